"""A transaction coordinator on an in-memory ``__transaction_state``, a manual clock and a recording
marker appender: tests drive time with ``advance`` (which fires due timers) and never sleep.

An append to the in-memory log is committed at once (``commit_code`` says what the wait for its
replication answers), so the coordinator's coroutines finish without suspending: ``complete``
runs one to its end outside or inside an event loop, and the writes the coordinator spawns from
timers and marker callbacks run the same way, at once."""

from __future__ import annotations

import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker.coordinator.txn import TRANSACTION_STATE_TOPIC, TransactionCoordinator, TxnConfig
from broker.coordinator.txn.markers import TxnMarkerChannel
from broker.coordinator.txn.sender import MarkerRequest
from broker.metadata.image import BrokerInfo, MetadataImage, PartitionImage, TopicImage
from broker.replication.replica_manager import PartitionError
from pyspark_log.wire.errors import ErrorCode
from tests.unit.coordinator.helpers import Clock, MemoryLog

NODE = 1
TXN_PARTITIONS = 3
TXN_ID = "txn-a"
TIMEOUT_MS = 10_000

T = TypeVar("T")


def complete(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to its end; it must not suspend (nothing in this harness waits)."""
    try:
        work.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    work.close()
    raise AssertionError("the coordinator suspended where this harness commits at once")


CONFIG = TxnConfig(
    num_partitions=TXN_PARTITIONS,
    max_timeout_ms=60_000,
    id_expiration_ms=100_000,
    abort_timed_out_interval_ms=1_000,
    remove_expired_interval_ms=10_000,
    marker_retry_backoff_ms=100,
)


def topic_image(name: str, partitions: int, leader: int = NODE) -> TopicImage:
    return TopicImage(
        name, uuid.uuid4(), {p: PartitionImage(p, leader, 0, (leader,), (leader,)) for p in range(partitions)}, {}
    )


@dataclass(frozen=True)
class Marker:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


class RecordingAppender:
    """``ControlMarkerAppender`` that records markers; ``fail`` maps partitions to an error code."""

    def __init__(self) -> None:
        self.markers: list[Marker] = []
        self.fail: dict[tuple[str, int], int] = {}

    def append_control_marker(
        self, topic: str, partition: int, *, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> int:
        code = self.fail.get((topic, partition))
        if code is not None:
            raise PartitionError(code, "injected")
        self.markers.append(Marker(topic, partition, producer_id, producer_epoch, coordinator_epoch, commit))
        return len(self.markers) - 1

    def marker_replicated(self, topic: str, partition: int, offset: int) -> bool:
        return True  # one replica: written is committed

    async def wait_replicated(self, topic: str, partition: int, offset: int, timeout_ms: int) -> int:
        return int(ErrorCode.NONE)


class FakeSender:
    """A ``BrokerSender`` whose requests are answered by the test (``answer``)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, int, MarkerRequest]] = []
        self.code = int(ErrorCode.NONE)

    async def write_txn_markers(self, host: str, port: int, request: MarkerRequest) -> dict[tuple[str, int], int]:
        self.requests.append((host, port, request))
        return dict.fromkeys(request.partitions, self.code)

    def close(self) -> None:
        pass


@dataclass
class Harness:
    log: MemoryLog = field(default_factory=MemoryLog)
    clock: Clock = field(default_factory=Clock)
    appender: RecordingAppender = field(default_factory=RecordingAppender)
    config: TxnConfig = CONFIG
    next_pid: int = 1000
    commit_code: int = int(ErrorCode.NONE)  # what waiting for a __transaction_state append answers

    def __post_init__(self) -> None:
        self.image = MetadataImage.empty("cluster", NODE)
        self.image = self.image.with_broker(BrokerInfo(NODE, "127.0.0.1", 9092))
        self.add_topic(topic_image(TRANSACTION_STATE_TOPIC, TXN_PARTITIONS))
        self.add_topic(topic_image("t", 3))
        self.add_topic(topic_image("u", 2))
        self.coordinator = self.new_coordinator()

    def add_topic(self, topic: TopicImage) -> None:
        self.image = self.image.with_topic(topic)

    def generate(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def new_coordinator(self, sender: FakeSender | None = None) -> TransactionCoordinator:
        channel = TxnMarkerChannel(
            NODE,
            lambda: self.image,
            self.appender,
            sender,  # type: ignore[arg-type]
            clock_ms=self.clock,
            retry_backoff_ms=self.config.marker_retry_backoff_ms,
            retry_backoff_max_ms=self.config.marker_retry_backoff_max_ms,
        )
        coordinator = TransactionCoordinator(
            self.config, self.log, self.clock, self.generate, channel, wait_committed=self.wait_committed
        )
        coordinator.manager.spawn = lambda work, name: complete(work)  # type: ignore[method-assign]
        coordinator.startup(TXN_PARTITIONS, dict.fromkeys(range(TXN_PARTITIONS), 0))
        return coordinator

    async def wait_committed(self, partition: int, offset: int, timeout_ms: int) -> int:
        return self.commit_code

    @property
    def txn(self):
        return self.coordinator.manager.txns[TXN_ID]

    def advance(self, ms: int) -> None:
        """Move the clock in 10 ms steps, firing due timers as the coordinator's task would."""
        target = self.clock.now + ms
        while self.clock.now < target:
            self.clock.now = min(self.clock.now + 10, target)
            self.coordinator.manager.run_due()

    def init(self, txn_id: str | None = TXN_ID, timeout_ms: int = TIMEOUT_MS, pid: int = -1, epoch: int = -1):
        return complete(self.coordinator.init_producer_id(txn_id, timeout_ms, pid, epoch))

    def begin(self, *partitions: tuple[str, int], txn_id: str = TXN_ID) -> int:
        """AddPartitionsToTxn with the current ids of ``txn_id``."""
        txn = self.coordinator.manager.txns[txn_id]
        return complete(
            self.coordinator.add_partitions(txn_id, txn.producer_id, txn.producer_epoch, partitions or [("t", 0)])
        )

    def end(self, *, commit: bool, txn_id: str = TXN_ID) -> int:
        txn = self.coordinator.manager.txns[txn_id]
        return complete(self.coordinator.end_txn(txn_id, txn.producer_id, txn.producer_epoch, commit=commit))
