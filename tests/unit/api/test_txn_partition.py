"""The partition side of idempotence and transactions through ``ReplicaManager`` and the request
handlers: Produce (duplicates, transactional records), Fetch read_committed (LSO, aborted list),
ListOffsets latest for read_committed, WriteTxnMarkers (KIP-98; Kafka documentation §4.6 "Message Delivery
Semantics", transactions).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.api.context import Request
from broker.api.fetch import handle_fetch
from broker.api.list_offsets import handle_list_offsets
from broker.api.produce import handle_produce
from broker.api.txn_markers import handle_write_txn_markers
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.manager import LogManager
from broker.metadata.image import BrokerInfo, MetadataImage, PartitionImage, TopicImage
from broker.network.connection import ConnectionContext
from broker.replication.replica_manager import PartitionError, ReplicaManager
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.wire import ApiKey, decode_request, encode_request
from pyspark_log.wire.errors import ErrorCode
from tests.unit.log.helpers import FakeClock

TOPIC = "t"
NODE = 1


def _image(leader: int = NODE) -> MetadataImage:
    topic_id = uuid.uuid4()
    part = PartitionImage(0, leader, 0, (leader,), (leader,))
    return MetadataImage(
        "cluster", NODE, {NODE: BrokerInfo(NODE, "127.0.0.1", 9092)}, {TOPIC: TopicImage(TOPIC, topic_id, {0: part})},
        {topic_id: TOPIC},
    )  # fmt: skip


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path),)), LogConfig(), FakeClock())
    logs.startup()
    image = _image()
    manager = ReplicaManager(NODE, logs, lambda: image, lambda _: LogConfig())
    manager.on_image_change(None, image)
    yield manager
    logs.shutdown()


def _batch(count: int = 1, *, pid: int = -1, seq: int = -1, txn: bool = False, epoch: int = 0) -> bytes:
    records = [ProducerRecord(b"k", b"v%d" % i, FakeClock()()) for i in range(count)]
    return encode_batch(
        records, producer_id=pid, producer_epoch=epoch if pid >= 0 else -1, base_sequence=seq, transactional=txn
    )


def _request(key: ApiKey, version: int, body: dict[str, Any]) -> Request:
    header, decoded = decode_request(encode_request(key, version, 1, "test", body)[4:])
    return Request(header, decoded, ConnectionContext("peer", "PLAINTEXT", 1))


def _broker(replicas: ReplicaManager) -> Any:
    image = _image()
    return SimpleNamespace(replicas=replicas, image=lambda: image, logs=None, raft=None, replication_throttles=None)


def _fetch(broker: Any, offset: int, isolation: int) -> dict[str, Any]:
    part = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1}
    body = {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation,
            "topics": [{"topic": TOPIC, "partitions": [part]}]}  # fmt: skip
    response = handle_fetch(broker, _request(ApiKey.FETCH, 12, body))
    partition: dict[str, Any] = response["responses"][0]["partitions"][0]
    return partition


def test_lso_is_the_first_offset_of_the_earliest_ongoing_transaction(replicas: ReplicaManager) -> None:
    log = replicas.leader_log(TOPIC, 0)
    replicas.append(TOPIC, 0, _batch(2))
    assert replicas.last_stable_offset(log) == 2
    replicas.append(TOPIC, 0, _batch(pid=5, seq=0, txn=True))
    replicas.append(TOPIC, 0, _batch(3))
    assert replicas.high_watermark(log) == 6
    assert replicas.last_stable_offset(log) == 2
    replicas.append_control_marker(TOPIC, 0, producer_id=5, producer_epoch=0, coordinator_epoch=0, commit=True)
    assert replicas.last_stable_offset(log) == 7


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(replicas: ReplicaManager) -> None:
    replicas.append(TOPIC, 0, _batch(pid=5, seq=0, txn=True))  # 0
    replicas.append(TOPIC, 0, _batch(2))  # 1-2
    replicas.append(TOPIC, 0, _batch(pid=6, seq=0, txn=True))  # 3 (stays open)
    uncommitted = replicas.read(TOPIC, 0, 0, 1 << 20, read_committed=False)
    assert uncommitted.records.next_offset == 4
    assert uncommitted.aborted_transactions is None
    committed = replicas.read(TOPIC, 0, 0, 1 << 20, read_committed=True)
    assert committed.records.size == 0, "nothing below the LSO (0) yet"
    assert committed.last_stable_offset == 0
    replicas.append_control_marker(TOPIC, 0, producer_id=5, producer_epoch=0, coordinator_epoch=0, commit=False)
    committed = replicas.read(TOPIC, 0, 0, 1 << 20, read_committed=True)
    assert committed.last_stable_offset == 3
    assert committed.records.next_offset == 3
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions or []] == [(5, 0)]
    later = replicas.read(TOPIC, 0, 1, 1 << 20, read_committed=True)
    assert [t.producer_id for t in later.aborted_transactions or []] == [5], "its marker (4) is past the fetch"
    replicas.append_control_marker(TOPIC, 0, producer_id=6, producer_epoch=0, coordinator_epoch=0, commit=True)
    tail = replicas.read(TOPIC, 0, 5, 1 << 20, read_committed=True)
    assert tail.records.size > 0
    assert tail.aborted_transactions == []


def test_marker_listeners_and_errors(replicas: ReplicaManager) -> None:
    heard: list[tuple[str, int, int, bool]] = []
    replicas.add_marker_listener(lambda *args: heard.append(args))
    replicas.append(TOPIC, 0, _batch(pid=5, seq=0, txn=True, epoch=2))
    offset = replicas.append_control_marker(TOPIC, 0, producer_id=5, producer_epoch=2, coordinator_epoch=1, commit=True)
    assert offset == 1
    assert heard == [(TOPIC, 0, 5, True)]
    with pytest.raises(PartitionError) as caught:
        replicas.append_control_marker(TOPIC, 0, producer_id=5, producer_epoch=1, coordinator_epoch=1, commit=True)
    assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(PartitionError) as caught:
        replicas.append_control_marker("nope", 0, producer_id=5, producer_epoch=2, coordinator_epoch=1, commit=True)
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert len(heard) == 1


def test_duplicate_produce_answers_the_original_base_offset(replicas: ReplicaManager) -> None:
    broker = _broker(replicas)
    replicas.append(TOPIC, 0, _batch(3))
    data = _batch(2, pid=9, seq=0)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": data}]}]}  # fmt: skip
    first = handle_produce(broker, _request(ApiKey.PRODUCE, 9, body))
    again = handle_produce(broker, _request(ApiKey.PRODUCE, 9, body))
    for response in (first, again):
        part = response["responses"][0]["partition_responses"][0]
        assert (part["error_code"], part["base_offset"]) == (0, 3)
    assert replicas.leader_log(TOPIC, 0).log_end_offset == 5
    gap = {**body, "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": _batch(pid=9, seq=5)}]}]}
    part = handle_produce(broker, _request(ApiKey.PRODUCE, 9, gap))["responses"][0]["partition_responses"][0]
    assert part["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_transactional_records_need_a_transactional_id(replicas: ReplicaManager) -> None:
    broker = _broker(replicas)
    records = _batch(pid=9, seq=0, txn=True)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
    part = handle_produce(broker, _request(ApiKey.PRODUCE, 9, body))["responses"][0]["partition_responses"][0]
    assert part["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    part = handle_produce(broker, _request(ApiKey.PRODUCE, 9, {**body, "transactional_id": "tx"}))["responses"][0][
        "partition_responses"
    ][0]
    assert (part["error_code"], part["base_offset"]) == (0, 0)


def test_fetch_read_committed_returns_aborted_transactions(replicas: ReplicaManager) -> None:
    broker = _broker(replicas)
    replicas.append(TOPIC, 0, _batch(2, pid=5, seq=0, txn=True))  # 0-1
    replicas.append(TOPIC, 0, _batch(pid=6, seq=0, txn=True))  # 2
    replicas.append_control_marker(TOPIC, 0, producer_id=5, producer_epoch=0, coordinator_epoch=0, commit=False)  # 3
    committed = _fetch(broker, 0, 1)
    assert committed["last_stable_offset"] == 2
    assert committed["high_watermark"] == 4
    assert committed["aborted_transactions"] == [{"producer_id": 5, "first_offset": 0}]
    uncommitted = _fetch(broker, 0, 0)
    assert uncommitted["last_stable_offset"] == 2
    assert uncommitted["aborted_transactions"] is None
    assert len(uncommitted["records"]) > len(committed["records"])


def test_list_offsets_latest_is_the_lso_for_read_committed(replicas: ReplicaManager) -> None:
    broker = _broker(replicas)
    replicas.append(TOPIC, 0, _batch(2))
    replicas.append(TOPIC, 0, _batch(pid=5, seq=0, txn=True))
    offsets = {}
    for isolation in (0, 1):
        part = {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}
        body = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": TOPIC, "partitions": [part]}]}
        broker.image = lambda: _image_with_epoch(replicas)
        response = handle_list_offsets(broker, _request(ApiKey.LIST_OFFSETS, 7, body))
        offsets[isolation] = response["topics"][0]["partitions"][0]["offset"]
    assert offsets == {0: 3, 1: 2}


def test_list_offsets_by_timestamp_stays_below_the_lso_for_read_committed(replicas: ReplicaManager) -> None:
    """Kafka answers a timestamp lookup only with an offset the isolation level may fetch."""
    broker = _broker(replicas)
    broker.image = lambda: _image_with_epoch(replicas)
    replicas.append(TOPIC, 0, _batch(pid=5, seq=0, txn=True))
    found = {}
    for isolation in (0, 1):
        part = {"partition_index": 0, "timestamp": 0, "current_leader_epoch": -1}
        body = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": TOPIC, "partitions": [part]}]}
        response = handle_list_offsets(broker, _request(ApiKey.LIST_OFFSETS, 7, body))
        found[isolation] = response["topics"][0]["partitions"][0]["offset"]
    assert found == {0: 0, 1: -1}


def _image_with_epoch(replicas: ReplicaManager) -> MetadataImage:
    return replicas._image()


def test_write_txn_markers_writes_one_marker_per_partition(replicas: ReplicaManager) -> None:
    broker = _broker(replicas)
    replicas.append(TOPIC, 0, _batch(pid=5, seq=0, txn=True))
    body = {"markers": [
        {"producer_id": 5, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 2,
         "topics": [{"name": TOPIC, "partition_indexes": [0, 7]}, {"name": "other", "partition_indexes": [0]}]},
    ]}  # fmt: skip
    response = handle_write_txn_markers(broker, _request(ApiKey.WRITE_TXN_MARKERS, 1, body))
    [marker] = response["markers"]
    assert marker["producer_id"] == 5
    codes = {(t["name"], p["partition_index"]): p["error_code"] for t in marker["topics"] for p in t["partitions"]}
    assert codes == {
        (TOPIC, 0): ErrorCode.NONE,
        (TOPIC, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("other", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    log = replicas.leader_log(TOPIC, 0)
    assert log.log_end_offset == 2
    assert log.segments.collect_aborted_transactions(0, 2)[0].producer_id == 5
    topics = [{"name": TOPIC, "partition_indexes": [0]}]
    stale = {"markers": [{**body["markers"][0], "coordinator_epoch": 1, "topics": topics}]}
    response = handle_write_txn_markers(broker, _request(ApiKey.WRITE_TXN_MARKERS, 1, stale))
    [part] = response["markers"][0]["topics"][0]["partitions"]
    assert part["error_code"] == ErrorCode.TRANSACTION_COORDINATOR_FENCED


def test_produce_of_several_batches_for_one_partition_is_invalid_record(replicas: ReplicaManager) -> None:
    """Kafka 3.7 ProduceRequest.validateRecords (v3+): exactly one record batch per partition, else
    INVALID_RECORD for that partition; a retried batch beside a new one can then never make the
    broker acknowledge the new one without writing it."""
    broker = _broker(replicas)
    first = _batch(pid=9, seq=0)
    replicas.append(TOPIC, 0, first)
    records = _batch(pid=8, seq=0) + first  # a new batch, then a retry of one already stored
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
    part = handle_produce(broker, _request(ApiKey.PRODUCE, 9, body))["responses"][0]["partition_responses"][0]
    assert part["error_code"] == ErrorCode.INVALID_RECORD
    assert replicas.leader_log(TOPIC, 0).log_end_offset == 1
    assert replicas.append(TOPIC, 0, _batch(pid=8, seq=0)).first_offset == 1


def test_lso_of_a_hanging_transaction_whose_start_was_deleted_is_the_log_start(replicas: ReplicaManager) -> None:
    log = replicas.leader_log(TOPIC, 0)
    replicas.append(TOPIC, 0, _batch(pid=5, seq=0, txn=True))  # 0, never ended
    log.roll()
    replicas.append(TOPIC, 0, _batch(3))  # 1-3
    log.delete_records_before(2)
    assert replicas.last_stable_offset(log) == 2
    committed = replicas.read(TOPIC, 0, 2, 1 << 20, read_committed=True)
    assert committed.last_stable_offset == 2
    assert committed.records.size == 0


def test_disk_error_writing_the_txn_index_is_kafka_storage_error(
    replicas: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker is in the log but its ``.txnindex`` entry is not: the partition answers
    KAFKA_STORAGE_ERROR from then on instead of serving read_committed fetches without it."""
    broker = _broker(replicas)
    broker.logs = replicas._logs
    log = replicas.leader_log(TOPIC, 0)
    replicas.append(TOPIC, 0, _batch(pid=5, seq=0, txn=True))

    def disk_error(*_: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(log.segments.active.txn_index, "append", disk_error)
    with pytest.raises(PartitionError) as caught:
        replicas.append_control_marker(TOPIC, 0, producer_id=5, producer_epoch=0, coordinator_epoch=0, commit=False)
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert _fetch(broker, 0, 1)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": _batch()}]}]}  # fmt: skip
    part = handle_produce(broker, _request(ApiKey.PRODUCE, 9, body))["responses"][0]["partition_responses"][0]
    assert part["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
