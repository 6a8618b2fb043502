"""DeleteRecords (KIP-107; ``kafka-delete-records.sh``) against a real broker process.

A partition's log start offset moves to the requested offset (-1: the high watermark) and
everything below it is gone: confluent-kafka's ``AdminClient.delete_records``, kafka-python's
``KafkaAdminClient.delete_records``, aiokafka's ``AIOKafkaAdminClient.delete_records``, pylog's
``AdminClient.delete_records`` and ``pylog delete-records --offset-json-file`` do it;
ListOffsets(earliest) from confluent-kafka and pylog and consumers (a committed offset below the
new start resets by ``auto.offset.reset``) see the new start; it survives a restart
(``log-start-offset-checkpoint``). Kafka's refusals: an offset above the high watermark
(OFFSET_OUT_OF_RANGE), a compacted topic (POLICY_VIOLATION), an internal topic
(INVALID_TOPIC_EXCEPTION).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient as CkAdmin
from confluent_kafka.admin import NewTopic, OffsetSpec

from pyspark_log.client import AdminClient, Consumer, KafkaError, TopicPartition
from pyspark_log.client.errors import ErrorCode
from pyspark_log.client.types import OffsetSpec as PylogOffsetSpec
from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),  # kafka-python
]
WAIT_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {"offsets.topic.num.partitions": "2", "group.initial.rebalance.delay.ms": "0"}
    with EmbeddedBroker(tmp_path_factory.mktemp("delete-records"), overrides=overrides) as b:
        yield b


def make_topic(bootstrap: str, counts: list[int], *, one_per_batch: bool = False, **config: str) -> str:
    """A topic with ``len(counts)`` partitions holding ``counts[p]`` records each (values ``p-i``)."""
    name = f"dr-{uuid.uuid4().hex[:8]}"
    admin = CkAdmin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, len(counts), 1, config=config)])[name].result(30)
    extra = {"batch.num.messages": 1} if one_per_batch else {}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **extra})
    errors: list[object] = []
    for p, count in enumerate(counts):
        for i in range(count):
            producer.produce(
                name, key=f"k{i}".encode(), value=f"{p}-{i}".encode(), partition=p,
                on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
            )  # fmt: skip
            producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []
    return name


def ck_offsets(bootstrap: str, topic: str, partitions: int, spec: OffsetSpec) -> list[int]:
    admin = CkAdmin({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets({CkTopicPartition(topic, p): spec for p in range(partitions)})
    return [futures[CkTopicPartition(topic, p)].result(30).offset for p in range(partitions)]


def pylog_earliest(bootstrap: str, topic: str, partitions: int) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        found = admin.list_offsets({TopicPartition(topic, p): PylogOffsetSpec.EARLIEST for p in range(partitions)})
    finally:
        admin.close()
    return [found[TopicPartition(topic, p)].offset for p in range(partitions)]  # type: ignore[union-attr]


def first_consumed_offset(bootstrap: str, topic: str, group: str) -> int:
    """The first offset a confluent-kafka consumer of ``group`` reads from partition 0."""
    consumer = CkConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        msg = wait_until(
            lambda: (m := consumer.poll(0.5)) is not None and m.error() is None and m.partition() == 0 and m,
            f"a record of {topic}-0",
            timeout_s=WAIT_S,
            interval_s=0,
        )
        return int(msg.offset())
    finally:
        consumer.close()


def pylog_cli(broker: EmbeddedBroker, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", *args, "--bootstrap-server", broker.bootstrap_servers]
    env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)


def test_confluent_delete_records_moves_the_start_seen_by_list_offsets_and_consumers(broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = make_topic(bootstrap, [20, 10])
    group = f"g-{uuid.uuid4().hex[:8]}"
    committer = CkConsumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    committer.commit(offsets=[CkTopicPartition(topic, 0, 2)], asynchronous=False)
    committer.close()

    admin = CkAdmin({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([CkTopicPartition(topic, 0, 7), CkTopicPartition(topic, 1, -1)])
    low = {tp.partition: f.result(30).low_watermark for tp, f in futures.items()}
    assert low == {0: 7, 1: 10}  # -1: everything below the high watermark

    assert ck_offsets(bootstrap, topic, 2, OffsetSpec.earliest()) == [7, 10]
    assert ck_offsets(bootstrap, topic, 2, OffsetSpec.latest()) == [20, 10]
    assert pylog_earliest(bootstrap, topic, 2) == [7, 10]
    # the group's committed offset 2 is gone: auto.offset.reset=earliest starts at the new start
    assert first_consumed_offset(bootstrap, topic, group) == 7

    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 3)  # below the log start: out of range, reset to the earliest
        records: list = []
        deadline = Deadline(WAIT_S)
        while len(records) < 13 and not deadline.expired():
            records.extend(consumer.poll(500))
        assert [r.offset for r in records] == list(range(7, 20))
        assert consumer.beginning_offsets([tp])[tp] == 7
    finally:
        consumer.close()

    # An offset above the high watermark is refused; the start does not move.
    refused = admin.delete_records([CkTopicPartition(topic, 0, 21)])
    with pytest.raises(KafkaException) as info:
        next(iter(refused.values())).result(30)
    assert info.value.args[0].code() == 1  # OFFSET_OUT_OF_RANGE
    assert ck_offsets(bootstrap, topic, 2, OffsetSpec.earliest()) == [7, 10]


def test_kafka_python_delete_records(broker: EmbeddedBroker) -> None:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition

    bootstrap = broker.bootstrap_servers
    topic = make_topic(bootstrap, [12])
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.delete_records({KpTopicPartition(topic, 0): 5})
    finally:
        admin.close()
    assert result[KpTopicPartition(topic, 0)]["low_watermark"] == 5
    assert ck_offsets(bootstrap, topic, 1, OffsetSpec.earliest()) == [5]


def test_aiokafka_delete_records(broker: EmbeddedBroker) -> None:
    import asyncio

    from aiokafka import TopicPartition as AioTopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

    bootstrap = broker.bootstrap_servers
    topic = make_topic(bootstrap, [9])

    async def run() -> dict:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return await admin.delete_records({AioTopicPartition(topic, 0): RecordsToDelete(before_offset=6)})
        finally:
            await admin.close()

    assert asyncio.run(run()) == {AioTopicPartition(topic, 0): 6}
    assert ck_offsets(bootstrap, topic, 1, OffsetSpec.earliest()) == [6]


def test_pylog_client_delete_records_and_kafka_refusals(broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = make_topic(bootstrap, [10, 4])
    compacted = make_topic(bootstrap, [3], **{"cleanup.policy": "compact"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        # the internal topic exists once a group has used the broker (not only when an earlier
        # test of this module ran first)
        admin.alter_consumer_group_offsets(f"delete-records-{uuid.uuid4().hex[:8]}", {TopicPartition(topic, 0): 0})
        assert admin.delete_records({TopicPartition(topic, 0): 4, TopicPartition(topic, 1): -1}) == {
            TopicPartition(topic, 0): 4,
            TopicPartition(topic, 1): 4,
        }
        results = admin.delete_records(
            {
                TopicPartition(compacted, 0): 1,
                TopicPartition("__consumer_offsets", 0): 0,
                TopicPartition(topic, 0): 6,
            },
            return_exceptions=True,
        )
        assert results[TopicPartition(topic, 0)] == 6
        codes = {tp.topic: r.code for tp, r in results.items() if isinstance(r, KafkaError)}
        assert codes == {compacted: ErrorCode.POLICY_VIOLATION, "__consumer_offsets": ErrorCode.INVALID_TOPIC_EXCEPTION}
        with pytest.raises(KafkaError) as info:
            admin.delete_records({TopicPartition(topic, 1): 5})
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        admin.close()
    assert ck_offsets(bootstrap, topic, 2, OffsetSpec.earliest()) == [6, 4]


def test_pylog_delete_records_cli(broker: EmbeddedBroker, tmp_path: Path) -> None:
    topic = make_topic(broker.bootstrap_servers, [10, 10])
    spec = tmp_path / "offsets.json"
    spec.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": topic, "partition": 0, "offset": 3},
                    {"topic": topic, "partition": 1, "offset": -1},
                ],
                "version": 1,
            }
        )
    )
    proc = pylog_cli(broker, "delete-records", "--offset-json-file", str(spec))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {topic}-0\tlow_watermark: 3",
        f"partition: {topic}-1\tlow_watermark: 10",
    ]
    assert pylog_earliest(broker.bootstrap_servers, topic, 2) == [3, 10]

    spec.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 99}]}))
    failed = pylog_cli(broker, "delete-records", "--offset-json-file", str(spec))
    assert failed.returncode == 1
    assert f"partition: {topic}-0\terror: " in failed.stdout
    assert "(OFFSET_OUT_OF_RANGE)" in failed.stdout
    assert failed.stderr == "pylog: 1 partition(s) failed\n"

    twice = {"partitions": [{"topic": topic, "partition": 0, "offset": 4}] * 2}
    spec.write_text(json.dumps(twice))
    usage = pylog_cli(broker, "delete-records", "--offset-json-file", str(spec))
    assert usage.returncode == 2
    assert "duplicate topic partitions" in usage.stderr
    spec.write_text(json.dumps({"partitions": [], "version": 2}))
    assert "not supported version" in pylog_cli(broker, "delete-records", "--offset-json-file", str(spec)).stderr
    assert pylog_earliest(broker.bootstrap_servers, topic, 2) == [3, 10]


def test_the_new_start_survives_a_restart(tmp_path: Path) -> None:
    """Whole segments below the new start are deleted; the start inside the first segment left
    comes back from ``log-start-offset-checkpoint``, written at the clean shutdown."""
    with EmbeddedBroker(tmp_path / "restart") as b:
        topic = make_topic(b.bootstrap_servers, [200], one_per_batch=True, **{"segment.bytes": "1024"})
        admin = CkAdmin({"bootstrap.servers": b.bootstrap_servers})
        futures = admin.delete_records([CkTopicPartition(topic, 0, 123)])
        assert next(iter(futures.values())).result(30).low_watermark == 123
        del admin
        segments = sorted(p.name for p in (b.data_dir).rglob(f"{topic}-0/*.log"))
        assert len(segments) > 1
        assert int(segments[0].removesuffix(".log")) > 0  # segments wholly below 123 were deleted
        b.restart()
        assert ck_offsets(b.bootstrap_servers, topic, 1, OffsetSpec.earliest()) == [123]
        assert ck_offsets(b.bootstrap_servers, topic, 1, OffsetSpec.latest()) == [200]
