"""Broker-level settings of the log cleaner, under Kafka's ``log.cleaner.*`` names.

Per-topic settings (``cleanup.policy``, ``delete.retention.ms``, ``min.compaction.lag.ms``,
``max.compaction.lag.ms``, ``min.cleanable.dirty.ratio``) live in ``broker.log.config.LogConfig``
with their ``log.cleaner.*`` broker synonyms. Kafka documentation §4.8 "Log Compaction" "Configuring The Log
Cleaner": the log cleaner is enabled by default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

UNLIMITED_BYTES_PER_SECOND = 1.7976931348623157e308  # Kafka's Double.MaxValue default


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """``log.cleaner.*`` (Kafka defaults; units last)."""

    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads (worker processes: broker.log.cleaner.worker)
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size (all workers)
    io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms
    io_max_bytes_per_second: float = UNLIMITED_BYTES_PER_SECOND  # log.cleaner.io.max.bytes.per.second

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"config log.cleaner.threads={self.threads} is out of range (at least 1)")
        if self.dedupe_buffer_size // self.threads < 24 * 16:
            raise ValueError(f"config log.cleaner.dedupe.buffer.size={self.dedupe_buffer_size} is too small")
        if not 0 < self.io_buffer_load_factor <= 1:
            factor = self.io_buffer_load_factor
            raise ValueError(f"config log.cleaner.io.buffer.load.factor={factor} is out of range")
        if self.backoff_ms < 0:
            raise ValueError(f"config log.cleaner.backoff.ms={self.backoff_ms} is out of range")
        if self.io_max_bytes_per_second <= 0:
            rate = self.io_max_bytes_per_second
            raise ValueError(f"config log.cleaner.io.max.bytes.per.second={rate} is out of range")

    @property
    def map_bytes_per_thread(self) -> int:
        """Each worker's share of the dedupe buffer (Kafka divides it among threads the same way)."""
        return self.dedupe_buffer_size // self.threads

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> CleanerConfig:
        """Read the ``log.cleaner.*`` keys (strings or Python values); ValueError names a bad key."""
        changes: dict[str, Any] = {}
        for field_name, name, kind in _KEYS:
            value = props.get(name)
            if value is None:
                continue
            try:
                changes[field_name] = kind(value)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"config {name}={value!r} is invalid: {exc}") from exc
        return dataclasses.replace(cls(), **changes)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError("expected true or false")
    return text == "true"


_KEYS: tuple[tuple[str, str, Any], ...] = (
    ("enable", "log.cleaner.enable", _bool),
    ("threads", "log.cleaner.threads", int),
    ("dedupe_buffer_size", "log.cleaner.dedupe.buffer.size", int),
    ("io_buffer_load_factor", "log.cleaner.io.buffer.load.factor", float),
    ("backoff_ms", "log.cleaner.backoff.ms", int),
    ("io_max_bytes_per_second", "log.cleaner.io.max.bytes.per.second", float),
)
