"""KIP-848 "Upgrade & Downgrade" with real clients: confluent-kafka consumers of a classic group
(``group.protocol=classic``, eager ``range``) are replaced one by one by ``group.protocol=consumer``
members under a producer — the group becomes a consumer group when the first one joins and the
classic members go on through JoinGroup/SyncGroup/Heartbeat answered by it — and then back one by
one, so the group becomes classic again when the last consumer-protocol member leaves
(``group.consumer.migration.policy=bidirectional``, Kafka 4.x's default). Every member commits
each record synchronously before its next poll: by committed offsets no record is lost or read
twice across both migrations. The Java consumer (Kafka 4.1.1's ``kafka-verifiable-consumer``,
``--group-protocol classic`` then ``consumer``) migrates the same way, each offset consumed once.
A restart of the broker in the mixed state (the coordinator
replays the migrated group from ``__consumer_offsets``) keeps the group, its epochs and members."""

from __future__ import annotations

import itertools
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline

from .groups_helpers import create_topic, produce, unique

OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "100",
    "group.min.session.timeout.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "250",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
}
PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    import confluent_kafka

    if confluent_kafka.libversion()[1] < 0x020A0000:
        pytest.skip("librdkafka < 2.10 has no group.protocol=consumer")
    with EmbeddedBroker(tmp_path_factory.mktemp("kip848-migration"), overrides=OVERRIDES) as b:
        yield b


class Run:
    """Consumers of one group, each committing every record before its next poll."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.consumers: dict[str, Any] = {}
        self.sent: list[bytes] = []
        self.received: list[bytes] = []
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.deadline = Deadline(240)

    def open(self, name: str, protocol: str) -> None:
        from confluent_kafka import Consumer

        conf = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name,
        }  # fmt: skip
        if protocol == "classic":
            conf.update({"partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 250})  # fmt: skip
        consumer = Consumer(conf)
        consumer.subscribe([self.topic])
        self.consumers[name] = consumer

    def close(self, name: str) -> None:
        self.consumers.pop(name).close()

    def produce(self, n: int) -> None:
        self.sent.extend(produce(self.bootstrap, self.topic, n, start=len(self.sent)))

    def pump(self, rounds: int = 1) -> None:
        for _ in range(rounds):
            for consumer in list(self.consumers.values()):
                msg = consumer.poll(0.02)
                if msg is not None and not msg.error():
                    self.received.append(msg.value())
                    consumer.commit(message=msg, asynchronous=False)

    def end_offsets(self) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        probe = Consumer({"bootstrap.servers": self.bootstrap, "group.id": unique("probe")})
        try:
            return {p: probe.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)[1] for p in range(4)}
        finally:
            probe.close()

    def group_type(self) -> str | None:
        listed = self.admin.list_consumer_groups().result(timeout=30)
        for g in listed.valid:
            if g.group_id == self.group:
                return str(g.type).rsplit(".", 1)[-1].lower()
        return None

    def until(self, what: str, check: Callable[[], bool]) -> None:
        next_check = 0.0
        while True:
            self.pump()
            if len(self.sent) < 600:
                self.produce(2)
            now = time.monotonic()
            if now >= next_check:
                if check():
                    return
                next_check = now + 0.5
            assert not self.deadline.expired(), f"{what}: not reached; owners {self.owners()}"

    def owners(self) -> dict[str, int]:
        return {name: len(c.assignment()) for name, c in self.consumers.items()}

    def settled(self) -> bool:
        """Every partition owned by exactly one open consumer, every consumer owning some."""
        sets = [{(p.topic, p.partition) for p in c.assignment()} for c in self.consumers.values()]
        union: set[tuple[str, int]] = set().union(*sets)
        return sum(map(len, sets)) == PARTITIONS == len(union) and all(sets)


def test_rolling_upgrade_and_downgrade_under_load_reads_each_record_once(broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = unique("migrate"), unique("g")
    create_topic(bootstrap, topic, PARTITIONS)
    run = Run(bootstrap, group, topic)
    try:
        for name in ("c0", "c1", "c2"):
            run.open(name, "classic")
        run.until("classic group formed", lambda: run.settled() and run.group_type() == "classic")

        for i in range(3):  # a rolling upgrade: each classic member replaced by a consumer-protocol one
            run.open(f"k{i}", "consumer")
            run.pump(10)
            if i == 0:
                run.until("upgraded to a consumer group", lambda: run.group_type() == "consumer")
            run.close(f"c{i}")
            run.until(f"k{i} in, c{i} out", run.settled)
        assert run.group_type() == "consumer"

        for i in range(3):  # and back: the last consumer-protocol member leaving downgrades the group
            run.open(f"d{i}", "classic")
            run.pump(10)
            run.until(f"d{i} in", run.settled)
            run.close(f"k{i}")
            if i < 2:
                assert run.group_type() == "consumer"
        run.until("downgraded to a classic group", lambda: run.group_type() == "classic" and run.settled())

        run.until("every record read", lambda: len(run.received) >= len(run.sent))
        assert len(run.received) == len(set(run.received)), "a record was read twice"
        assert set(run.received) == set(run.sent), "a record was lost"
    finally:
        for name in list(run.consumers):
            run.close(name)


class JavaConsumer:
    """A ``kafka-verifiable-consumer`` (synchronous commit after every batch) and its events."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str) -> None:
        from tests.apache_kafka import kafka_tool_process

        self.proc = kafka_tool_process(
            "kafka-verifiable-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group,
            "--group-protocol", protocol, "--reset-policy", "earliest",
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.held: frozenset[int] = frozenset()
        self.consumed: list[tuple[int, int, int]] = []  # (partition, first offset, last offset)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def drain(self) -> None:
        while True:
            try:
                event = json.loads(self.lines.get_nowait())
            except queue.Empty:
                return
            except ValueError:
                continue
            name, parts = event.get("name"), event.get("partitions", [])
            if name == "partitions_assigned":
                self.held = self.held | {int(p["partition"]) for p in parts}
            elif name == "partitions_revoked":
                self.held = self.held - {int(p["partition"]) for p in parts}
            elif name == "records_consumed":
                self.consumed += [(int(p["partition"]), int(p["minOffset"]), int(p["maxOffset"])) for p in parts]

    def stop(self) -> None:
        """SIGTERM: the consumer closes (leaves the group) in its shutdown hook."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.drain()


def test_the_java_consumer_migrates_both_ways(broker: EmbeddedBroker) -> None:
    """A classic Java member, then a consumer-protocol one joins (upgrade; the two split the
    partitions), then it stops (downgrade; the classic member gets them all back): by the
    consumers' own records_consumed events every produced offset is consumed exactly once."""
    try:
        from tests.apache_kafka import kafka_libs

        kafka_libs()
    except Exception as exc:
        pytest.skip(f"Apache Kafka's tools are not available: {exc}")
    bootstrap = broker.bootstrap_servers
    topic, group = unique("java-migrate"), unique("g")
    create_topic(bootstrap, topic, 4)
    run = Run(bootstrap, group, topic)  # for its admin client and producer
    classic = JavaConsumer(bootstrap, topic, group, "classic")
    modern: JavaConsumer | None = None
    everything = frozenset(range(4))

    def wait(what: str, check: Callable[[], bool]) -> None:
        deadline = Deadline(120)
        while True:
            for c in (classic, modern):
                if c is not None:
                    c.drain()
            if check():
                return
            assert not deadline.expired(), f"{what}: not reached"
            run.produce(4)
            time.sleep(0.2)  # a pace for the producer, not a synchronisation: the check above polls

    try:
        wait("the classic member holds all", lambda: classic.held == everything and run.group_type() == "classic")
        modern = JavaConsumer(bootstrap, topic, group, "consumer")
        second = modern
        wait("upgraded and split", lambda: len(classic.held) == len(second.held) == 2
             and run.group_type() == "consumer")  # fmt: skip
        modern.stop()
        modern = None
        wait("downgraded", lambda: classic.held == everything and run.group_type() == "classic")
        ends = dict.fromkeys(range(4), 0)
        for tp, off in run.end_offsets().items():
            ends[tp] = off
        wait("everything consumed", lambda: all(
            max((last for p, _, last in classic.consumed + second.consumed if p == tp), default=-1) >= ends[tp] - 1
            for tp in ends
        ))  # fmt: skip
        for tp in ends:
            ranges = sorted((first, last) for p, first, last in classic.consumed + second.consumed if p == tp)
            for (_, last), (first, _) in itertools.pairwise(ranges):
                assert first == last + 1, f"partition {tp}: offsets read twice or skipped: {ranges}"
            assert ranges[0][0] == 0
    finally:
        classic.stop()
        if modern is not None:
            modern.stop()


def test_a_mixed_group_survives_a_broker_restart(broker: EmbeddedBroker) -> None:
    """The consumer group records (with the classic members' metadata) are replayed by the
    restarted coordinator: the group is still a consumer group with both kinds of members, and
    they keep consuming without a record lost or read twice."""
    bootstrap = broker.bootstrap_servers  # the module's broker, restarted on its port and data directory
    topic, group = unique("restart"), unique("g")
    create_topic(bootstrap, topic, PARTITIONS)
    run = Run(bootstrap, group, topic)
    try:
        run.open("c0", "classic")
        run.until("classic member owns all", lambda: run.settled() and run.group_type() == "classic")
        run.open("k0", "consumer")
        run.until("mixed consumer group", lambda: run.settled() and run.group_type() == "consumer")
        broker.restart()
        loaded = re.compile(rf"consumer group {group} loaded at epoch \d+ \(2 member\(s\)\)")
        run.until("replayed, not rebuilt", lambda: loaded.search(broker.output()) is not None)
        run.until("mixed group after the restart", lambda: run.group_type() == "consumer" and run.settled())
        described = run.admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert {m.client_id for m in described.members} == {"c0", "k0"}
        run.until("every record read", lambda: len(run.received) >= len(run.sent))
        assert len(run.received) == len(set(run.received)), "a record was read twice"
        assert set(run.received) == set(run.sent), "a record was lost"
    finally:
        for name in list(run.consumers):
            run.close(name)
