"""Tiered storage settings (KIP-405) under Kafka's names, and Kafka's topic-level checks.

Broker keys (Kafka's ``RemoteLogManagerConfig``): ``remote.log.storage.system.enable``,
``remote.log.manager.task.interval.ms``, ``remote.log.storage.manager.class.name`` and the keys
under ``remote.log.storage.manager.impl.prefix`` (default ``rsm.config.``), prefix stripped,
for the RemoteStorageManager; ``remote.log.metadata.manager.class.name`` (only Kafka's
topic-based manager, which keeps metadata in ``__remote_log_metadata``) and under
``remote.log.metadata.manager.impl.prefix`` (default ``rlmm.config.``) the metadata topic's
``remote.log.metadata.topic.num.partitions`` (50), ``.replication.factor`` (3) and
``.retention.ms`` (-1), as Kafka's ``TopicBasedRemoteLogMetadataManagerConfig``.

Topic checks (Kafka 4.1's ``LogConfig.validate`` with remote storage): ``remote.storage.enable``
needs the system enabled and ``cleanup.policy=delete``; ``local.retention.*`` must not exceed
``retention.*`` (Kafka's messages verbatim). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.log.config import LogConfig

TOPIC_BASED_RLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"


class RemoteConfigError(ValueError):
    """A tiered-storage setting Kafka refuses (the message is Kafka's where it has one)."""


def _invalid(name: str, value: object, message: str) -> RemoteConfigError:
    """Kafka's ``ConfigException(name, value, message)`` text."""
    return RemoteConfigError(f"Invalid value {value} for configuration {name}: {message}")


def check_topic_config(config: LogConfig, *, system_enabled: bool) -> None:
    """Raise :class:`RemoteConfigError` as Kafka's ``LogConfig.validate`` does for a topic whose
    effective config is ``config`` on a broker with ``remote.log.storage.system.enable`` =
    ``system_enabled``. Nothing is checked for a topic without ``remote.storage.enable``."""
    if not config.remote_storage_enable:
        return
    if not system_enabled:  # validateRemoteStorageOnlyIfSystemEnabled
        raise RemoteConfigError(
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )
    if config.compact_enabled:  # validateRemoteStorageRequiresDeleteCleanupPolicy
        raise RemoteConfigError("Remote log storage only supports topics with cleanup.policy=delete")
    for local, total, name in (
        (config.local_retention_ms, config.retention_ms, "ms"),
        (config.local_retention_bytes, config.retention_bytes, "bytes"),
    ):  # validateRemoteStorageRetentionTime / Size
        if total != -1 and local != -2:
            if local == -1:
                message = f"Value must not be -1 as retention.{name} value is set as {total}."
                raise _invalid(f"local.retention.{name}", local, message)
            if local > total:
                message = f"Value must not be more than retention.{name} property value: {total}"
                raise _invalid(f"local.retention.{name}", local, message)


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    """The broker's tiered-storage settings (module docstring)."""

    system_enabled: bool = False
    task_interval_ms: int = 30_000
    rsm_class_name: str | None = None
    rsm_prefix: str = "rsm.config."
    rlmm_class_name: str = TOPIC_BASED_RLMM
    rlmm_prefix: str = "rlmm.config."
    metadata_topic_partitions: int = 50
    metadata_topic_replication_factor: int = 3
    metadata_topic_retention_ms: int = -1

    @classmethod
    def from_properties(cls, get: Any, raw: Mapping[str, str]) -> RemoteLogManagerConfig:
        """From the broker config (``get(key)`` gives typed values, ``raw`` the given strings);
        raises :class:`RemoteConfigError` for a setting Kafka refuses at start-up."""
        rlmm_prefix = str(get("remote.log.metadata.manager.impl.prefix") or "rlmm.config.")

        def topic_key(name: str, default: int) -> int:
            text = raw.get(rlmm_prefix + name)
            try:
                return default if text is None else int(text)
            except ValueError:
                raise _invalid(rlmm_prefix + name, text, "Not a number of type INT") from None

        config = cls(
            system_enabled=bool(get("remote.log.storage.system.enable")),
            task_interval_ms=int(get("remote.log.manager.task.interval.ms")),
            rsm_class_name=get("remote.log.storage.manager.class.name") or None,
            rsm_prefix=str(get("remote.log.storage.manager.impl.prefix") or "rsm.config."),
            rlmm_class_name=str(get("remote.log.metadata.manager.class.name") or TOPIC_BASED_RLMM),
            rlmm_prefix=rlmm_prefix,
            metadata_topic_partitions=topic_key("remote.log.metadata.topic.num.partitions", 50),
            metadata_topic_replication_factor=topic_key("remote.log.metadata.topic.replication.factor", 3),
            metadata_topic_retention_ms=topic_key("remote.log.metadata.topic.retention.ms", -1),
        )
        if config.task_interval_ms < 1:
            raise _invalid("remote.log.manager.task.interval.ms", config.task_interval_ms, "Value must be at least 1")
        if config.metadata_topic_partitions < 1 or config.metadata_topic_replication_factor < 1:
            raise RemoteConfigError(
                f"{rlmm_prefix}remote.log.metadata.topic.num.partitions and .replication.factor must be at least 1"
            )
        if config.system_enabled:
            if not config.rsm_class_name:
                raise RemoteConfigError(
                    "remote.log.storage.manager.class.name must be set when remote.log.storage.system.enable=true "
                    "(the built-in one: broker.log.remote.storage.FileSystemRemoteStorageManager with rsm.config.dir)"
                )
            if config.rlmm_class_name != TOPIC_BASED_RLMM:
                raise RemoteConfigError(
                    f"remote.log.metadata.manager.class.name={config.rlmm_class_name}: pylog serves only "
                    f"{TOPIC_BASED_RLMM} (__remote_log_metadata)"
                )
        return config
