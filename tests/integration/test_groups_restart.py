"""Committed offsets live in ``__consumer_offsets`` (Kafka documentation §5.5 "Distribution") and survive a
broker restart: the
coordinator replays the partition into its cache when it starts, and a group resumes where it
committed — with our consumer, confluent-kafka and kafka-python alike."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka as confluent
import kafka
import pytest

from pyspark_log.client import AdminClient
from pyspark_log.embedded import EmbeddedBroker

from .groups_helpers import GROUP_BROKER_OVERRIDES, create_topic, drive, produce, pylog_member, unique

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_committed_offsets_and_groups_survive_a_broker_restart(tmp_path: Path) -> None:
    topic, group = unique("restart"), unique("g")
    with EmbeddedBroker(tmp_path / "broker", overrides=GROUP_BROKER_OVERRIDES) as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, topic, 3)
        first = produce(bootstrap, topic, 30)
        member, consumer = pylog_member("p1", bootstrap, group, [topic], **{"enable.auto.commit": False})
        try:
            drive([member], lambda: len(member.received) == 30)
            consumer.commit()
        finally:
            consumer.close()
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            before = admin.list_consumer_group_offsets(group)
        assert sum(o.offset for o in before.values()) == 30

        broker.restart()
        bootstrap = broker.bootstrap_servers
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            assert admin.list_consumer_group_offsets(group) == before
        more = produce(bootstrap, topic, 9, start=30)

        # our consumer resumes at the committed offsets: only the new records
        member, consumer = pylog_member("p2", bootstrap, group, [topic])
        try:
            drive([member], lambda: len(member.received) >= 9)
            assert sorted(member.received) == sorted(more)
            assert not set(member.received) & set(first)
        finally:
            consumer.close()  # auto-commit (on by default) commits the new positions

        broker.restart()
        bootstrap = broker.bootstrap_servers
        admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            # The broker answers COORDINATOR_LOAD_IN_PROGRESS until it has read __consumer_offsets
            # back, and kafka-python's admin client raises it rather than retrying.
            def loaded() -> bool:
                try:
                    offsets = admin.list_group_offsets(group)[group]
                    state = admin.describe_groups([group])[group]["group_state"]
                except kafka.errors.CoordinatorLoadInProgressError:
                    return False
                return sum(om.offset for om in offsets.values()) == 39 and state == "Empty"

            drive([], loaded, timeout_s=30)
        finally:
            admin.close()

        extra = produce(bootstrap, topic, 3, start=39)
        c = confluent.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
        got: list[bytes] = []
        try:
            c.subscribe([topic])
            drive([], lambda: _poll_into(c, got) and len(got) >= 3, timeout_s=30)
        finally:
            c.close()
        assert sorted(got) == sorted(extra)


def _poll_into(consumer: object, out: list[bytes]) -> bool:
    msg = consumer.poll(0.1)  # type: ignore[attr-defined]
    if msg is not None and not msg.error():
        out.append(msg.value())
    return True
