"""KIP-848 "Upgrade & Downgrade" with real clients: confluent-kafka consumers of a classic group
(``group.protocol=classic``, eager ``range``) are replaced one by one by ``group.protocol=consumer``
members under a producer — the group becomes a consumer group when the first one joins and the
classic members go on through JoinGroup/SyncGroup/Heartbeat answered by it — and then back one by
one, so the group becomes classic again when the last consumer-protocol member leaves
(``group.consumer.migration.policy=bidirectional``, Kafka 4.x's default). Every member commits
each record synchronously before its next poll: by committed offsets no record is lost or read
twice across both migrations. A restart of the broker in the mixed state (the coordinator
replays the migrated group from ``__consumer_offsets``) keeps the group, its epochs and members."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pyspark_log.embedded import EmbeddedBroker

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
        self.deadline = time.monotonic() + 240

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
            assert now < self.deadline, f"{what}: not reached; owners {self.owners()}"

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
