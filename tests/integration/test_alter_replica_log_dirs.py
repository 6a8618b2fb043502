"""AlterReplicaLogDirs (34, KIP-113): a replica moves between its broker's log dirs, under load.

Issue 29 ("AlterReplicaLogDirs (34) between a broker's own log dirs"). A one-node KRaft broker with
two log dirs; confluent-kafka's idempotent producer writes to the partition while it moves (and a
committed and an aborted transaction lie in its log before). The move must lose nothing, duplicate
nothing, keep aborted records hidden from read_committed consumers, leave the partition in the
new dir only, and survive a restart. Kafka's own ``kafka-reassign-partitions`` with ``log_dirs``
drives the same move, and the refusals carry Kafka's codes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from pyspark_log.client import AdminClient, AlterConfigOp, ConfigResource, NewTopic, ResourceType
from pyspark_log.client.admin import AlterOp
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ErrorCode
from tests.apache_kafka import kafka_tool
from tests.integration.kafka_tools_helpers import wait_until

NODE = 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, list[Path]]]:
    root = tmp_path_factory.mktemp("alter-log-dirs")
    dirs = [(root / "dir-a").absolute(), (root / "dir-b").absolute()]
    overrides = {
        "node.id": str(NODE),
        "log.dirs": ",".join(map(str, dirs)),
        "log.segment.bytes": "65536",  # several segments to copy
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "file.delete.delay.ms": "1000",
    }
    with EmbeddedBroker(root, overrides=overrides, kraft=True) as b:
        yield b, dirs


def dir_of(admin: AdminClient, topic: str, partition: int) -> tuple[str | None, str | None]:
    """(the dir holding the partition's log, the dir holding its future log) by DescribeLogDirs."""
    current = future = None
    for path, description in admin.describe_log_dirs([NODE])[NODE].items():
        for tp, info in description.replicas.items():
            if (tp.topic, tp.partition) == (topic, partition):
                if info.is_future:
                    future = path
                else:
                    current = path
    return current, future


def other_dir(dirs: list[Path], path: str | None) -> str:
    return next(str(d) for d in dirs if str(d) != path)


def transactions(bootstrap: str, topic: str) -> None:
    """One committed and one aborted transaction on partition 0."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"txn-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(60)
    for outcome in ("committed", "aborted"):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, value=f"{outcome}-{i}".encode(), partition=0)
        producer.flush(60)  # in the log before the end (librdkafka's abort drops what it did not send)
        if outcome == "committed":
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)


def read_all(bootstrap: str, topic: str, partition: int, end: int) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
    })  # fmt: skip
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])

        def caught_up() -> bool:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    values.append(message.value())
                elif message.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(message.error())
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            return position >= end

        wait_until(caught_up, f"reading {topic}-{partition} to offset {end}", timeout_s=120)
    finally:
        consumer.close()
    return values


def test_move_under_an_idempotent_producer_loses_and_duplicates_nothing(
    broker: tuple[EmbeddedBroker, list[Path]],
) -> None:
    b, dirs = broker
    topic = f"move-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        wait_until(lambda: dir_of(admin, topic, 0)[0] is not None, f"{topic}-0 in a log dir")
        transactions(b.bootstrap_servers, topic)
        source = dir_of(admin, topic, 0)[0]
        target = other_dir(dirs, source)

        acked: list[bytes] = []
        failures: list[str] = []
        stop = threading.Event()

        def on_delivery(err: KafkaError | None, message: object) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                acked.append(message.value())  # type: ignore[attr-defined]

        def produce() -> None:
            producer = Producer({
                "bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True, "acks": "all",
                "linger.ms": 5, "batch.size": 16384,  # below log.segment.bytes (RECORD_LIST_TOO_LARGE else)
            })  # fmt: skip
            i = 0
            while not stop.is_set():
                producer.produce(topic, value=f"v{i:07d}".encode() + b"x" * 200, partition=0, on_delivery=on_delivery)
                producer.poll(0)
                i += 1
                if i % 100 == 0:  # a steady writer, not a flood: at most ~10,000 records/s
                    producer.flush(30)
                    stop.wait(0.01)
            producer.flush(60)

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        try:
            wait_until(lambda: failures or len(acked) >= 3000, "3000 records acknowledged before the move")
            assert not failures, failures[:5]
            outcome = admin.alter_replica_log_dirs({(topic, 0, NODE): target})
            assert outcome == {(topic, 0, NODE): None}
            wait_until(lambda: dir_of(admin, topic, 0) == (target, None), f"{topic}-0 moved to {target}")
            moved_at = len(acked)
            more = moved_at + 2000
            wait_until(lambda: failures or len(acked) >= more, "2000 more records acknowledged after the move")
        finally:
            stop.set()
            writer.join(120)
        assert not failures, failures[:5]

    end = _end_offset(b.bootstrap_servers, topic)
    expected = [f"committed-{i}".encode() for i in range(50)] + acked
    assert read_all(b.bootstrap_servers, topic, 0, end) == expected
    assert (Path(target) / f"{topic}-0").is_dir()
    assert not (Path(source) / f"{topic}-0").exists()

    b.stop()
    b.start()
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        wait_until(lambda: dir_of(admin, topic, 0) == (target, None), f"{topic}-0 still in {target} after a restart")
    assert read_all(b.bootstrap_servers, topic, 0, end) == expected


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets", "isolation.level": "read_committed"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()


def reassign_tool(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    if tool == "kafka":
        return kafka_tool("kafka-reassign-partitions", *args)
    argv = [sys.executable, "-m", "pyspark_log.cli", "reassign-partitions", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("tool", ["kafka", "pylog"])
def test_reassign_partitions_moves_a_replica_between_log_dirs(
    broker: tuple[EmbeddedBroker, list[Path]], tmp_path: Path, tool: str
) -> None:
    """Kafka's tool and ``pylog reassign-partitions``: ``log_dirs`` in the reassignment file sends
    AlterReplicaLogDirs; ``--verify`` reads DescribeLogDirs until the replica is in its new dir."""
    b, dirs = broker
    topic = f"tool-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        wait_until(lambda: dir_of(admin, topic, 0)[0] is not None, f"{topic}-0 in a log dir")
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(2000):
            producer.produce(topic, value=b"%d" % i, partition=0)
        producer.flush(60)
        target = other_dir(dirs, dir_of(admin, topic, 0)[0])
        plan = tmp_path / "plan.json"
        entry = {"topic": topic, "partition": 0, "replicas": [NODE], "log_dirs": [target]}
        plan.write_text(json.dumps({"version": 1, "partitions": [entry]}))
        args = ("--bootstrap-server", b.bootstrap_servers, "--reassignment-json-file", str(plan))
        executed = reassign_tool(tool, *args, "--execute")
        assert executed.returncode == 0, executed.stdout + executed.stderr
        started = f"Successfully started moving log directory to {target} for replica {topic}-0 with broker {NODE}"
        assert started in executed.stdout
        wait_until(lambda: dir_of(admin, topic, 0) == (target, None), f"{topic}-0 moved to {target}")
        verified = reassign_tool(tool, *args, "--verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert f"Reassignment of partition {topic}-0 is completed." in verified.stdout
        assert f"Reassignment of replica {topic}-0-{NODE} completed successfully." in verified.stdout
    assert _end_offset(b.bootstrap_servers, topic) == 2000


def test_refusals_carry_kafka_codes(broker: tuple[EmbeddedBroker, list[Path]], tmp_path: Path) -> None:
    b, dirs = broker
    topic = f"refuse-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        wait_until(lambda: dir_of(admin, topic, 0)[0] is not None, f"{topic}-0 in a log dir")
        here = dir_of(admin, topic, 0)[0]
        assert here is not None
        outcome = admin.alter_replica_log_dirs({
            (topic, 0, NODE): str(tmp_path / "not-a-log-dir"),
            ("no-such-topic", 0, NODE): str(dirs[0]),
        })  # fmt: skip
        codes = {key: (err.code if err is not None else ErrorCode.NONE) for key, err in outcome.items()}
        assert codes == {
            (topic, 0, NODE): ErrorCode.LOG_DIR_NOT_FOUND,
            ("no-such-topic", 0, NODE): ErrorCode.REPLICA_NOT_AVAILABLE,
        }
        assert admin.alter_replica_log_dirs({(topic, 0, NODE): here}) == {(topic, 0, NODE): None}  # already there
        assert dir_of(admin, topic, 0) == (here, None)


def test_a_throttled_move_shows_its_future_replica_and_resumes_after_a_restart(
    broker: tuple[EmbeddedBroker, list[Path]],
) -> None:
    """``replica.alter.log.dirs.io.max.bytes.per.second`` slows the copy; meanwhile DescribeLogDirs
    shows the future replica in the destination with its lag; a restart loads the future log and
    the move goes on to the end."""
    b, dirs = broker
    topic = f"resume-{uuid.uuid4().hex[:8]}"
    rate = {"replica.alter.log.dirs.io.max.bytes.per.second": "100000"}
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        wait_until(lambda: dir_of(admin, topic, 0)[0] is not None, f"{topic}-0 in a log dir")
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "batch.size": 16384, "linger.ms": 5})
        for i in range(8000):  # ~2 MB: about 20 s at the throttle
            producer.produce(topic, value=f"r{i:05d}".encode() + b"y" * 250, partition=0)
        producer.flush(60)
        source = dir_of(admin, topic, 0)[0]
        target = other_dir(dirs, source)
        admin.incremental_alter_configs({ConfigResource(ResourceType.BROKER, str(NODE)): [
            AlterConfigOp(key, value) for key, value in rate.items()
        ]})  # fmt: skip
        assert admin.alter_replica_log_dirs({(topic, 0, NODE): target}) == {(topic, 0, NODE): None}
        lag = wait_until(lambda: _future_lag(admin, topic, target), f"{topic}-0 as a future replica in {target}")
        assert lag > 0
    b.stop()
    assert any(p.name.startswith(f"{topic}-0.") and p.name.endswith("-future") for p in Path(target).iterdir())
    b.start()
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.incremental_alter_configs({ConfigResource(ResourceType.BROKER, str(NODE)): [
            AlterConfigOp(key, None, AlterOp.DELETE) for key in rate
        ]})  # fmt: skip
        wait_until(lambda: dir_of(admin, topic, 0) == (target, None), f"{topic}-0 moved to {target} after a restart")
    values = read_all(b.bootstrap_servers, topic, 0, 8000)
    assert values == [f"r{i:05d}".encode() + b"y" * 250 for i in range(8000)]


def _future_lag(admin: AdminClient, topic: str, target: str) -> int | None:
    """The future replica's offset lag in ``target`` (None while it is not there)."""
    description = admin.describe_log_dirs([NODE])[NODE][target]
    for tp, info in description.replicas.items():
        if (tp.topic, tp.partition) == (topic, 0) and info.is_future:
            return info.offset_lag
    return None
