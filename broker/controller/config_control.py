"""``ConfigurationControlManager``: topic configs and KIP-226 dynamic broker configs on the quorum
controller, as Kafka's ``ConfigurationControlManager`` (``org.apache.kafka.controller``).

IncrementalAlterConfigs of a TOPIC or a BROKER resource becomes ``ConfigRecord``s
(``operations.alter_topic_configs`` validates topic keys and values; ``alter_broker_configs``
writes a broker id's or the cluster default's keys), appended on the active controller (forwarded
there from any other node) and answered once this node's image shows every change. It holds no
state of its own: the configs are in the metadata log.
"""

from __future__ import annotations

from broker.controller import operations
from broker.controller.forwarding import (
    ControllerChannel,
    forward_alter_broker_configs,
    forward_alter_topic_configs,
    raise_for,
)
from broker.controller.operation_runner import OperationRunner
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import MetadataRecord


class ConfigurationControlManager:
    """Topic and broker configs through the metadata log; see the module docstring."""

    def __init__(self, runner: OperationRunner) -> None:
        self._runner = runner

    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None:
        runner = self._runner

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            records = operations.alter_topic_configs(state, name, changes)
            return ([] if validate_only else records), None

        def applied() -> bool:
            topic = runner.image.topics.get(name)
            return topic is None or all(topic.configs.get(k) == v for k, v in changes.items())

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            outcome = await forward_alter_topic_configs(
                channel, name, changes, validate_only=validate_only, timeout_ms=timeout_ms
            )
            raise_for(outcome)
            if not validate_only:
                await runner.await_image(applied, f"configs of topic {name!r}")

        await runner.execute(local, remote)

    async def alter_broker_configs(
        self, resource_name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None:
        """KIP-226: ConfigRecords of a BROKER resource through the metadata log (forwarded to the
        active controller); returns once this node's image shows them."""
        runner = self._runner

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            del state
            return ([] if validate_only else operations.alter_broker_configs(resource_name, changes)), None

        def applied() -> bool:
            values = runner.image.broker_configs.get(resource_name, {})
            return all(values.get(k) == v for k, v in changes.items())

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            outcome = await forward_alter_broker_configs(
                channel, resource_name, changes, validate_only=validate_only, timeout_ms=timeout_ms
            )
            raise_for(outcome)
            if not validate_only:
                await runner.await_image(applied, f"dynamic configs of broker {resource_name!r}")

        await runner.execute(local, remote)
