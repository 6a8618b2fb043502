"""A group coordinator on an in-memory ``__consumer_offsets`` and a manual clock: tests drive time
with ``advance`` (which fires due timers) and never sleep."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from broker.coordinator.group import GroupConfig, GroupCoordinator, JoinRequest, JoinResult, SyncResult
from broker.coordinator.group.store import StoreError
from pyspark_log.records.header import iter_batch_headers
from pyspark_log.wire.consumer_protocol import Subscription, encode_subscription
from pyspark_log.wire.errors import ErrorCode

GROUP = "group-a"


class MemoryLog:
    """``OffsetsLog`` over per-partition lists of batches (offsets assigned on append)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[int, int, bytes]]] = {}  # partition -> (base, next, bytes)
        self.fail_with: int | None = None
        self.replicated_to: int | None = None  # the high watermark when set; else every append is replicated

    def append(self, partition: int, records: bytes) -> int:
        if self.fail_with is not None:
            raise StoreError(self.fail_with, "injected failure")
        batches = self.batches.setdefault(partition, [])
        base = batches[-1][1] if batches else 0
        count = sum(h.records_count for _, h in iter_batch_headers(records, verify_crc=False))
        data = bytearray(records)
        data[0:8] = base.to_bytes(8, "big", signed=True)  # one batch per append
        batches.append((base, base + count, bytes(data)))
        return base

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        for _base, nxt, data in self.batches.get(partition, []):
            if nxt > offset:
                return data, nxt
        return b"", offset

    def log_start_offset(self, partition: int) -> int:
        return 0

    def log_end_offset(self, partition: int) -> int:
        batches = self.batches.get(partition, [])
        return batches[-1][1] if batches else 0

    def high_watermark(self, partition: int) -> int:
        end = self.log_end_offset(partition)
        return end if self.replicated_to is None else min(end, self.replicated_to)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


CONFIG = GroupConfig(
    min_session_timeout_ms=100,
    max_session_timeout_ms=60_000,
    initial_rebalance_delay_ms=300,
    offsets_retention_ms=10_000,
    offsets_retention_check_interval_ms=1_000,
)


def subscription(*topics: str) -> bytes:
    return encode_subscription(Subscription(tuple(topics)))


@dataclass
class Harness:
    log: MemoryLog = field(default_factory=MemoryLog)
    clock: Clock = field(default_factory=Clock)
    partitions: int = 3
    config: GroupConfig = CONFIG

    def __post_init__(self) -> None:
        self.coordinator = self.new_coordinator()

    def new_coordinator(self) -> GroupCoordinator:
        coordinator = GroupCoordinator(self.config, self.log, self.clock, rng=random.Random(7))
        coordinator.startup(self.partitions, range(self.partitions))
        return coordinator

    @property
    def group(self):
        return self.coordinator.manager.groups[GROUP]

    def advance(self, ms: int) -> None:
        """Move the clock in 10 ms steps, firing due timers as the coordinator's task would."""
        target = self.clock.now + ms
        while self.clock.now < target:
            self.clock.now = min(self.clock.now + 10, target)
            self.coordinator.manager.run_due()

    def until_answered(self, *answers: list[JoinResult], limit_ms: int = 10_000) -> None:
        """Advance the clock until every pending JoinGroup in ``answers`` was answered."""
        waited = 0
        while not all(answers):
            assert waited < limit_ms, "JoinGroup not answered"
            self.advance(50)
            waited += 50

    def join(
        self,
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = 1000,
        rebalance_ms: int = 2000,
        require_known: bool = True,
        group: str = GROUP,
    ) -> list[JoinResult]:
        """Send a JoinGroup; the returned list fills when the coordinator answers."""
        out: list[JoinResult] = []
        req = JoinRequest(
            group,
            member_id,
            instance_id,
            require_known and instance_id is None,
            "client",
            "/127.0.0.1",
            rebalance_ms,
            session_ms,
            "consumer",
            protocols or [("range", subscription("t"))],
        )
        self.coordinator.join_group(req, out.append)
        return out

    def join_new(self, **kwargs: object) -> list[JoinResult]:
        """A dynamic member's two-step join (MEMBER_ID_REQUIRED, then again with the id)."""
        first = self.join(**kwargs)  # type: ignore[arg-type]
        assert first
        assert first[0].error == ErrorCode.MEMBER_ID_REQUIRED
        return self.join(first[0].member_id, **kwargs)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance_id: str | None = None,
    ) -> list[SyncResult]:
        out: list[SyncResult] = []
        self.coordinator.sync_group(
            GROUP, generation, member_id, instance_id, "consumer", None, assignments or {}, out.append
        )
        return out

    def heartbeat(self, member_id: str, generation: int, instance_id: str | None = None) -> int:
        return self.coordinator.heartbeat(GROUP, member_id, instance_id, generation)

    def stable_group(self, members: int) -> list[JoinResult]:
        """``members`` dynamic members joined, synced, Stable; returns their join results."""
        pending = [self.join_new() for _ in range(members)]
        self.until_answered(*pending)
        results = [p[0] for p in pending]
        leader = next(r for r in results if r.leader_id == r.member_id)
        assignment = {r.member_id: r.member_id.encode() for r in results}
        for r in results:
            self.sync(r.member_id, r.generation_id, assignment if r is leader else None)
        return results
