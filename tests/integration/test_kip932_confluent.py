"""KIP-932 share groups with librdkafka's share consumer (confluent-kafka's ``ShareConsumer``,
explicit acknowledgement: ``share.acknowledgement.mode=explicit``) against a real pylog broker:
consumers of one partition get distinct records, a released record is redelivered with a higher
delivery count, a rejected one never is, nothing is delivered past
``group.share.delivery.count.limit``, a consumer killed mid-batch (SIGKILL of a subprocess) has
its records redelivered once their acquisition locks (``group.share.record.lock.duration.ms``)
expire, and the acknowledged state survives a broker restart (``__share_group_state``)."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline

from .groups_helpers import create_topic, produce, unique

LOCK_MS = 4000
SHARE_OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": "2",  # Kafka's lowest
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.heartbeat.interval.ms": "250",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.session.timeout.ms": "3000",
}
DEADLINE_S = 90


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import confluent_kafka

    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer")
    with EmbeddedBroker(tmp_path_factory.mktemp("kip932"), overrides=SHARE_OVERRIDES) as broker:
        yield broker.bootstrap_servers


class Member:
    """One explicit-mode share consumer; ``decide(message)`` picks its acknowledge type."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        from confluent_kafka import ShareConsumer

        self.name = name
        self.consumer = ShareConsumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "share.acknowledgement.mode": "explicit",
        })  # fmt: skip
        self.consumer.subscribe([topic])
        self.received: list[tuple[int, bytes, int]] = []  # (offset, value, delivery count)

    def poll(self, decide: Callable[[Any], Any] | None = None, timeout_s: float = 0.2) -> int:
        from confluent_kafka import AcknowledgeType

        messages = [m for m in self.consumer.poll(timeout_s) or [] if m.error() is None]
        for m in messages:
            self.received.append((m.offset(), m.value(), m.delivery_count()))
            self.consumer.acknowledge(m, decide(m) if decide is not None else AcknowledgeType.ACCEPT)
        if messages:
            self.consumer.commit_sync()
        return len(messages)

    def values(self) -> list[bytes]:
        return [v for _, v, _ in self.received]

    def close(self) -> None:
        self.consumer.close()


def until(members: list[Member], done: Callable[[], bool], decide: Callable[[Any], Any] | None = None) -> None:
    deadline = Deadline(DEADLINE_S)
    while not done():
        assert not deadline.expired(), {m.name: m.received for m in members}
        for m in members:
            m.poll(decide)


def warm_up(bootstrap: str, topic: str, members: list[Member]) -> None:
    """The share-partition starts at the high watermark when first fetched (share.auto.offset.reset
    = latest): send one record at a time until a member gets one, so what follows is delivered."""
    deadline = Deadline(DEADLINE_S)
    n = 0
    while not any(m.received for m in members):
        assert not deadline.expired(), "no member ever received a record"
        produce(bootstrap, topic, 1, start=10_000 + n)
        n += 1
        for m in members:
            m.poll(timeout_s=0.5)
    for m in members:
        m.received.clear()


def test_consumers_on_one_partition_get_distinct_records(bootstrap: str) -> None:
    topic, group = unique("share"), unique("g")
    create_topic(bootstrap, topic, 1)
    members = [Member(bootstrap, group, topic, f"c{i}") for i in range(3)]
    try:
        warm_up(bootstrap, topic, members)
        values = set()
        for round_ in range(6):  # the round's first poller acquires the round's records
            values |= set(produce(bootstrap, topic, 5, start=round_ * 5))
            order = members[round_ % 3 :] + members[: round_ % 3]
            until(order, lambda: values <= {v for m in members for v in m.values()})  # noqa: B023
        delivered = collections.Counter(v for m in members for v in m.values())
        assert set(delivered) == values
        assert all(count == 1 for count in delivered.values()), delivered  # each to one consumer, once
        assert sum(1 for m in members if m.received) >= 2
    finally:
        for m in members:
            m.close()


def test_a_released_record_is_redelivered_and_a_rejected_one_is_not(bootstrap: str) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = unique("ack"), unique("g")
    create_topic(bootstrap, topic, 1)
    member = Member(bootstrap, group, topic, "c")
    try:
        warm_up(bootstrap, topic, [member])
        values = produce(bootstrap, topic, 6)
        released, rejected = values[1], values[2]
        seen: set[bytes] = set()

        def decide(m: Any) -> Any:
            first = m.value() not in seen
            seen.add(m.value())
            if m.value() == released and first:
                return AcknowledgeType.RELEASE
            if m.value() == rejected:
                return AcknowledgeType.REJECT
            return AcknowledgeType.ACCEPT

        until([member], lambda: member.values().count(released) == 2, decide)
        redelivered = [d for _, v, d in member.received if v == released]
        assert redelivered == [1, 2]  # the delivery count grows
        marker = produce(bootstrap, topic, 1, start=100)[0]
        until([member], lambda: marker in member.values(), decide)
        assert member.values().count(rejected) == 1
        assert set(values) <= set(member.values())
    finally:
        member.close()


def test_nothing_is_delivered_past_the_delivery_count_limit(bootstrap: str) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = unique("limit"), unique("g")
    create_topic(bootstrap, topic, 1)
    member = Member(bootstrap, group, topic, "c")
    try:
        warm_up(bootstrap, topic, [member])
        doomed = produce(bootstrap, topic, 1)[0]

        def decide(m: Any) -> Any:
            return AcknowledgeType.RELEASE if m.value() == doomed else AcknowledgeType.ACCEPT

        until([member], lambda: member.values().count(doomed) == 2, decide)  # limit 2: now archived
        marker = produce(bootstrap, topic, 1, start=100)[0]
        until([member], lambda: marker in member.values(), decide)
        assert [d for _, v, d in member.received if v == doomed] == [1, 2]
    finally:
        member.close()


CHILD = """
import sys
import time
from confluent_kafka import ShareConsumer
bootstrap, group, topic = sys.argv[1:4]
c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
c.subscribe([topic])
while True:
    got = [m for m in c.poll(0.2) or [] if m.error() is None]
    if got:
        print("GOT", " ".join(m.value().decode() for m in got), flush=True)
        break
while True:  # holds its records, never acknowledges (until SIGKILL)
    time.sleep(0.2)
"""


def test_a_consumer_killed_mid_batch_has_its_records_redelivered_after_the_lock(bootstrap: str, tmp_path: Path) -> None:
    """SIGKILL closes no share session: the records stay acquired until their locks expire, then
    go to another consumer with delivery count 2 (KIP-932 "acquisition lock")."""
    topic, group = unique("kill"), unique("g")
    create_topic(bootstrap, topic, 1)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), bootstrap, group, topic], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert child.stdout is not None
        os.set_blocking(child.stdout.fileno(), False)
        text = ""  # the child's output so far; a non-blocking read may end inside a line
        deadline = Deadline(DEADLINE_S)
        n = 0

        def got_line() -> str | None:
            return next((line for line in text.split("\n")[:-1] if line.startswith("GOT")), None)

        while got_line() is None:
            assert not deadline.expired(), "the child never received a record"
            assert child.poll() is None, "the child died"
            produce(bootstrap, topic, 1, start=n)  # until its share-partition is initialised
            n += 1
            window = Deadline(0.5)
            while not window.expired() and got_line() is None:
                text += "".join(iter(child.stdout.readline, ""))
        line = got_line()
        assert line is not None
        held = {v.encode() for v in line.split()[1:]}
        assert held, line
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        member = Member(bootstrap, group, topic, "survivor")
        try:
            until([member], lambda: held <= set(member.values()))
            # a second delivery: the killed consumer's acquisition ended (its lock expired; a lock
            # that expired before the kill, on a slow machine, ends the same way)
            assert {d for _, v, d in member.received if v in held} == {2}
        finally:
            member.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


def test_acknowledged_state_survives_a_broker_restart(tmp_path: Path) -> None:
    """ShareSnapshot records in ``__share_group_state`` bring back the share-partition start
    offset and the acknowledged records: after a restart the group resumes where it was (not at
    the high watermark, where a share-partition without state would start)."""
    with EmbeddedBroker(tmp_path / "restart", overrides=SHARE_OVERRIDES) as broker:
        bootstrap = broker.bootstrap_servers
        topic, group = unique("restart"), unique("g")
        create_topic(bootstrap, topic, 1)
        member = Member(bootstrap, group, topic, "before")
        try:
            warm_up(bootstrap, topic, [member])
            values = produce(bootstrap, topic, 10)
            accepted = set(values[:4])
            from confluent_kafka import AcknowledgeType

            def decide(m: Any) -> Any:
                return AcknowledgeType.ACCEPT if m.value() in accepted else AcknowledgeType.RELEASE

            until([member], lambda: accepted <= set(member.values()), decide)
        finally:
            member.close()  # releases whatever it still holds
        broker.restart()
        bootstrap = broker.bootstrap_servers
        after = Member(bootstrap, group, topic, "after")
        try:
            rest = set(values[4:])
            until([after], lambda: rest <= set(after.values()))
            assert not accepted & set(after.values())
        finally:
            after.close()


def pylog(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", bootstrap, "share-groups", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def poll_output(run: Callable[[], subprocess.CompletedProcess[str]], wanted: Callable[[str], bool]) -> str:
    deadline = Deadline(DEADLINE_S)
    while True:
        done = run()
        if done.returncode == 0 and wanted(done.stdout):
            return done.stdout
        assert not deadline.expired(), done.stdout + done.stderr


def test_pylog_share_groups_reset_describe_list_delete(bootstrap: str) -> None:
    """``pylog share-groups``: reset-offsets --to-earliest on a group that has never consumed (so
    records written before its first member are delivered), describe's START-OFFSET after the
    acknowledgements, members, list --state, delete refused while members remain, then done."""
    topic, group = unique("cli"), unique("g")
    create_topic(bootstrap, topic, 1)
    values = produce(bootstrap, topic, 5)
    dry = pylog(bootstrap, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.split("\n")[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    done = pylog(bootstrap, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[1].split() == [group, topic, "0", "0"]
    member = Member(bootstrap, group, topic, "c")
    try:
        until([member], lambda: set(values) <= set(member.values()))
        poll_output(lambda: pylog(bootstrap, "describe", "--group", group), lambda out: f"{topic}  0" in out
                    and out.split("\n")[1].split()[-1] == "5")  # fmt: skip
        members = pylog(bootstrap, "describe", "--group", group, "--members", "--verbose")
        assert members.stdout.split("\n")[1].split()[-1] == f"{topic}:0", members.stdout
        refused = pylog(bootstrap, "delete", "--group", group)
        assert refused.returncode == 1
        assert "NON_EMPTY_GROUP" in refused.stderr
    finally:
        member.close()
    listed = poll_output(lambda: pylog(bootstrap, "list", "--state"), lambda out: f"{group}  Empty" in out)
    assert listed.split("\n")[0].split() == ["GROUP", "STATE"]
    assert pylog(bootstrap, "delete", "--group", group).returncode == 0
    gone = pylog(bootstrap, "describe", "--group", group)
    assert gone.returncode == 1
    assert f"Share group '{group}' does not exist." in gone.stderr


def test_kafka_console_share_consumer_and_kafka_share_groups(bootstrap: str) -> None:
    """Kafka 4.1.1's own tools against pylog: ``kafka-console-share-consumer`` (the Java
    KafkaShareConsumer) reads a share group, ``kafka-share-groups`` lists, describes and deletes it."""
    from tests.apache_kafka import KafkaUnavailable, kafka_libs, kafka_tool, kafka_tool_process

    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    topic, group = unique("java"), unique("g")
    create_topic(bootstrap, topic, 1)
    values = produce(bootstrap, topic, 5)
    assert (
        pylog(bootstrap, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute").returncode
        == 0
    )
    console = kafka_tool_process(
        "kafka-console-share-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
        "--max-messages", "5",
    )  # fmt: skip
    try:
        out, err = console.communicate(timeout=DEADLINE_S)
    finally:
        if console.poll() is None:
            os.killpg(console.pid, signal.SIGKILL)
            console.wait(10)
    assert console.returncode == 0, err
    printed = [line for line in out.splitlines() if not line.startswith("[")]  # its log4j lines start with "["
    assert sorted(printed) == sorted(v.decode() for v in values)

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return kafka_tool("kafka-share-groups", "--bootstrap-server", bootstrap, *args)

    assert group in tool("--list").stdout.split()
    described = tool("--describe", "--group", group).stdout.strip().split("\n")
    assert described[0].split() == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET"]
    assert described[1].split() == [group, topic, "0", "5"]  # the console consumer acknowledged all 5
    deleted = tool("--delete", "--group", group)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert group not in tool("--list").stdout.split()


def test_group_configs_earliest_and_read_committed(bootstrap: str) -> None:
    """Group configs (the GROUP config resource) set with Kafka 4.1.1's ``kafka-configs
    --entity-type groups``: ``share.auto.offset.reset=earliest`` delivers what was written before
    the group's first fetch, ``share.isolation.level=read_committed`` leaves out an aborted
    transaction's records (KIP-932 "read_committed"), while a read_uncommitted group gets them."""
    from confluent_kafka import Producer

    from tests.apache_kafka import KafkaUnavailable, kafka_libs, kafka_tool

    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    topic, committed_group, uncommitted_group = unique("txn"), unique("g"), unique("g")
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"aborted{i}".encode())
    producer.flush(60)  # written to the log, then aborted (not purged in the client)
    producer.abort_transaction(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"committed{i}".encode())
    producer.commit_transaction(60)
    committed = {f"committed{i}".encode() for i in range(3)}
    aborted = {f"aborted{i}".encode() for i in range(3)}

    def configure(group: str, settings: str) -> None:
        done = kafka_tool(
            "kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups",
            "--entity-name", group, "--add-config", settings,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    configure(committed_group, "share.auto.offset.reset=earliest,share.isolation.level=read_committed")
    configure(uncommitted_group, "share.auto.offset.reset=earliest")
    reader = Member(bootstrap, committed_group, topic, "rc")
    everything = Member(bootstrap, uncommitted_group, topic, "ru")
    try:
        until(
            [reader, everything],
            lambda: committed <= set(reader.values()) and committed | aborted <= set(everything.values()),
        )
        assert not aborted & set(reader.values())
    finally:
        reader.close()
        everything.close()
    refused = kafka_tool(
        "kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups",
        "--entity-name", committed_group, "--add-config", "share.record.lock.duration.ms=999",
    )  # fmt: skip
    assert refused.returncode != 0
