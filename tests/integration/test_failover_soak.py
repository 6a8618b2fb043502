"""The failover soak: faults injected for real while idempotent acks=all producers write.

Kafka documentation §4.7 "Replication": "the guarantee that Kafka offers is that a committed message will not
be lost, as
long as there is at least one in sync replica alive, at all times." Three ``broker,controller``
nodes, a topic of replication factor 3 with min.insync.replicas 2, and an idempotent
confluent-kafka producer with acks=all writing sequence-numbered records to every partition,
while a chaos loop SIGKILLs, SIGSTOPs/SIGCONTs, SIGTERMs and restarts random nodes — one at a
time, so never more than one ISR member of a partition is down. After every fault the loop waits
for the state it causes (leadership away from the victim) and after the repair for the ISR to be
whole again, never for a fixed time.

At the end: **every acknowledged record is there, none twice, each partition in order**, for
read_uncommitted and read_committed consumers alike, and every replica's log is byte-identical.
The figures (records acknowledged, faults, longest gap between acknowledgements, time from a
fault to the new leader) are printed.

CI runs ``SOAK_CYCLES_CI`` fault cycles; the long run is on demand:
``PYLOG_SOAK_CYCLES=100 ./dev test tests/integration/test_failover_soak.py -s`` (marker ``soak``).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import consume, wait_for

NODES = (1, 2, 3)
PARTITIONS = 3
SOAK_CYCLES_CI = 3
CYCLES = int(os.environ.get("PYLOG_SOAK_CYCLES", SOAK_CYCLES_CI))
pytestmark = [pytest.mark.soak, pytest.mark.timeout(300 + 90 * CYCLES)]  # a cycle takes ~10-20 s
OVERRIDES = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}
FAULTS = ("kill", "pause", "terminate")


@dataclass
class Writer:
    """An idempotent acks=all producer in its own thread, round-robin over the partitions."""

    bootstrap: str
    topic: str
    acked: dict[int, list[int]] = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})
    ack_times: list[float] = field(default_factory=list)
    failed: list[KafkaError] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="soak-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 300000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        sent = dict.fromkeys(range(PARTITIONS), 0)

        def delivered(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                self.failed.append(err)
                return
            partition, seq = (int(x) for x in msg.value().split(b":"))  # type: ignore[attr-defined]
            self.acked[partition].append(seq)
            self.ack_times.append(time.monotonic())

        turn = 0
        while not self.stop.is_set():
            if len(producer) < 300:
                partition = turn % PARTITIONS
                turn += 1
                producer.produce(
                    self.topic, value=f"{partition}:{sent[partition]}".encode(), partition=partition,
                    on_delivery=delivered,
                )  # fmt: skip
                sent[partition] += 1
            producer.poll(0.002)
        producer.flush(300)

    def join(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(330)

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())


@pytest.fixture
def cluster(tmp_path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path / "soak", brokers=NODES, combined=True, overrides=OVERRIDES) as c:
        yield c


def _read_all(bootstrap: str, topic: str, isolation: str, wanted: dict[int, int]) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for partition, value in consume(bootstrap, topic, PARTITIONS, sum(wanted.values()), isolation=isolation):
        seen[partition].append(int(value.split(b":")[1]))
    return seen


def _live(cluster: EmbeddedCluster, victim: int) -> int:
    return next(n for n in NODES if n != victim)


def _fault_cycle(cluster: EmbeddedCluster, writer: Writer, topic: str, victim: int, fault: str) -> float | None:
    """Inject ``fault`` into ``victim``, wait until its leaderships moved and writes go on, repair
    it and wait until it is back in every ISR; the seconds from the fault to the new leaders
    (None when the victim led nothing)."""
    witness = _live(cluster, victim)
    led_before = [p for p, v in cluster.partitions(topic, via=witness).items() if v.leader == victim]
    started = time.monotonic()
    if fault == "kill":
        cluster.kill(victim)
    elif fault == "pause":
        cluster.pause(victim)
    else:
        cluster.stop(victim)  # SIGTERM: a clean shutdown hands its leaderships over first

    def moved() -> bool:
        return all(v.leader not in (victim, -1) for v in cluster.partitions(topic, via=witness).values())

    wait_for(moved, f"leadership away from node {victim} after {fault}", timeout_s=120)
    elapsed = time.monotonic() - started
    acked = writer.count
    wait_for(lambda: writer.count > acked + 100, f"writes going on without node {victim}", timeout_s=120)
    if fault == "pause":
        cluster.resume(victim)
    else:
        cluster.restart(victim)
    wait_for(
        lambda: all(set(v.isr) == set(NODES) for v in cluster.partitions(topic).values()),
        f"node {victim} back in every ISR",
        timeout_s=180,
    )
    return elapsed if led_before else None


def _check_everything_acknowledged_once(cluster: EmbeddedCluster, topic: str, writer: Writer) -> None:
    """Every acknowledged record there, none twice, each partition in order, for read_uncommitted
    and read_committed readers; every replica's log byte-identical."""
    assert writer.failed == []
    acked = writer.acked
    wanted = {p: len(acked[p]) for p in range(PARTITIONS)}
    for isolation in ("read_uncommitted", "read_committed"):
        seen = _read_all(cluster.bootstrap(), topic, isolation, wanted)
        for p in range(PARTITIONS):
            assert len(seen[p]) == len(set(seen[p])), f"partition {p}: duplicates ({isolation})"
            assert seen[p] == sorted(seen[p]), f"partition {p}: out of order ({isolation})"
            lost = set(acked[p]) - set(seen[p])
            assert not lost, f"partition {p}: {len(lost)} acknowledged records lost ({isolation})"
    wait_for(
        lambda: all(len({cluster.segment_bytes(n, topic, p) for n in NODES}) == 1 for p in range(PARTITIONS)),
        "identical logs on every replica",
    )


def _soak_topic(cluster: EmbeddedCluster) -> str:
    topic = f"soak-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_for(lambda: len(cluster.partitions(topic)) == PARTITIONS, "the topic in the metadata")
    return topic


def test_a_rolling_restart_under_acks_all_load_fails_no_delivery(cluster: EmbeddedCluster):
    """Controlled shutdown (SIGTERM) of each node in turn: leaderships move first, the producer's
    retries of NOT_LEADER_OR_FOLLOWER land on the new leaders, and nothing fails or doubles."""
    topic = _soak_topic(cluster)
    writer = Writer(cluster.bootstrap(), topic)
    writer.start()
    try:
        wait_for(lambda: writer.count >= 500, "the first acknowledged records")
        for node in NODES:
            _fault_cycle(cluster, writer, topic, node, "terminate")
    finally:
        writer.join()
    _check_everything_acknowledged_once(cluster, topic, writer)


def test_failover_soak_loses_and_duplicates_nothing(cluster: EmbeddedCluster):
    cycles = CYCLES
    rng = random.Random(int(os.environ.get("PYLOG_SOAK_SEED", "7")))
    topic = _soak_topic(cluster)
    writer = Writer(cluster.bootstrap(), topic)
    writer.start()
    elections: list[float] = []
    faults: list[str] = []
    try:
        wait_for(lambda: writer.count >= 500, "the first acknowledged records")
        for cycle in range(cycles):
            victim, fault = rng.choice(NODES), rng.choice(FAULTS)
            faults.append(f"{cycle}:{fault}:{victim}")
            elapsed = _fault_cycle(cluster, writer, topic, victim, fault)
            if elapsed is not None:
                elections.append(elapsed)
    finally:
        writer.join()

    _check_everything_acknowledged_once(cluster, topic, writer)
    gaps = [b - a for a, b in zip(writer.ack_times, writer.ack_times[1:], strict=False)]
    print(
        f"\nsoak: {cycles} fault cycles {faults}; {writer.count} records acknowledged; "
        f"longest gap between acknowledgements {max(gaps):.2f} s; "
        f"fault to new leader: max {max(elections, default=0):.2f} s over {len(elections)} moves"
    )
