"""Raw-protocol scenarios run unchanged against Apache Kafka and pylog (``request`` sends one
request with pylog's generated codecs on a fresh connection and decodes the answer).

Each function takes a broker address and returns what a client observes as plain data (error
names, offsets), so a test can put the two brokers' answers side by side.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pyspark_log.embedded_cluster import request
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch
from pyspark_log.records.control import decode_control_key
from pyspark_log.wire import ApiKey
from pyspark_log.wire.errors import ErrorCode
from tests.waiting import wait_until

DEADLINE_S = 90.0
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_CODE_{code}"


def poll(what: str, attempt: Callable[[], Any], done: Callable[[Any], bool], deadline_s: float = DEADLINE_S) -> Any:
    """``attempt()`` until ``done(result)``; only a failure waits out the deadline."""
    answers: list[Any] = []

    def succeeded() -> bool:
        answers[:] = [attempt()]
        return done(answers[0])

    wait_until(succeeded, lambda: f"{what} (last answer {answers[-1]!r})", timeout_s=deadline_s)
    return answers[0]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- topics ------------------------------------------------------------------------------------
def create_topic(
    address: str, name: str, *, partitions: int = 1, replication_factor: int = 1,
    configs: Mapping[str, str] | None = None,
) -> str:  # fmt: skip
    """CreateTopics v7 of one topic; its error name."""
    body = {
        "topics": [
            {
                "name": name, "num_partitions": partitions, "replication_factor": replication_factor,
                "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 30000,
    }  # fmt: skip
    answer = request(address, ApiKey.CREATE_TOPICS, 7, body, timeout_s=40)
    return error_name(answer.topics[0].error_code)


def create_ready_topic(address: str, name: str, **kwargs: Any) -> None:
    """Create ``name`` and wait until its partitions have leaders (Metadata) that lead them: the
    Metadata answer can name a leader before that broker's replica manager has taken the
    leadership (in Kafka too: its metadata cache is published first), so a ListOffsets to each
    partition's leader must answer NONE."""
    assert create_topic(address, name, **kwargs) == "NONE"

    def leaders() -> dict[int, str | None]:
        """Partition -> its leader's address (None while it has none)."""
        answer = request(address, ApiKey.METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
        hosts = {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
        return {p.partition_index: hosts.get(p.leader_id) for t in answer.topics for p in t.partitions
                if t.error_code == 0 and p.error_code == 0}  # fmt: skip

    found = poll(f"leaders of {name}", leaders, lambda ls: bool(ls) and all(ls.values()))
    for partition, leader in found.items():
        poll(f"the leader of {name}-{partition} serving",
             lambda p=partition, at=leader: list_offset(at, name, -1, partition=p),
             lambda answer: answer.error_code == 0)  # fmt: skip


# -- produce / fetch ---------------------------------------------------------------------------
def produce(
    address: str, topic: str, batch: bytes, *, acks: int = -1, partition: int = 0, version: int = 9,
    transactional_id: str | None = None,
) -> Any:  # fmt: skip
    """Produce of one batch to one partition; the partition's answer."""
    body = {
        "transactional_id": transactional_id, "acks": acks, "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }  # fmt: skip
    return request(address, ApiKey.PRODUCE, version, body, timeout_s=40).responses[0].partition_responses[0]


def small_batch(n: int = 1, value_bytes: int = 10) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([ProducerRecord(b"k%d" % i, b"v" * value_bytes, now) for i in range(n)])


def fetch(address: str, topic: str, offset: int, *, partition: int = 0, isolation_level: int = 0) -> Any:
    """Fetch v12 (topic by name) of one partition, no waiting; the partition's answer."""
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation_level,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                     "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip
    answer = request(address, ApiKey.FETCH, 12, body)
    return answer.responses[0].partitions[0]


def list_offset(address: str, topic: str, timestamp: int, *, partition: int = 0, isolation_level: int = 0) -> Any:
    """ListOffsets v8 of one partition; the partition's answer."""
    body = {
        "replica_id": -1, "isolation_level": isolation_level,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}],
    }  # fmt: skip
    return request(address, ApiKey.LIST_OFFSETS, 8, body).topics[0].partitions[0]


def raw_log(address: str, topic: str, isolation_level: int) -> dict[str, Any]:
    """Every record and control record from offset 0 by raw Fetch v12, and the watermarks."""
    rows: list[tuple[Any, ...]] = []
    aborted: list[int] = []
    offset = 0
    while True:
        part = fetch(address, topic, offset, isolation_level=isolation_level)
        assert part.error_code == 0, part
        aborted += [a.first_offset for a in part.aborted_transactions or ()]
        batches = decode_batches(part.records or b"")
        for header, records in batches:
            for r in records:
                if header.is_control:
                    rows.append((r.offset, "control", decode_control_key(r.key), header.is_transactional))
                else:
                    rows.append((
                        r.offset, CODEC_NAMES[header.compression], r.key, r.value,
                        tuple(tuple(h) for h in r.headers), r.timestamp, header.is_transactional,
                    ))  # fmt: skip
        if not batches:
            break
        offset = batches[-1][0].next_offset
    return {
        "records": rows, "aborted_first_offsets": sorted(set(aborted)), "high_watermark": part.high_watermark,
        "last_stable_offset": part.last_stable_offset, "log_start_offset": part.log_start_offset,
    }  # fmt: skip


# -- coordinators ------------------------------------------------------------------------------
def find_coordinator(address: str, key: str, key_type: int) -> None:
    """FindCoordinator v4 until the coordinator of ``key`` is known (internal topic created)."""
    body = {"key_type": key_type, "coordinator_keys": [key]}
    poll(
        f"coordinator of {key}",
        lambda: request(address, ApiKey.FIND_COORDINATOR, 4, body).coordinators[0].error_code,
        lambda code: code == 0,
    )


def init_producer_id(address: str, transactional_id: str) -> Any:
    body = {"transactional_id": transactional_id, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}  # fmt: skip
    return poll(
        f"InitProducerId {transactional_id}",
        lambda: request(address, ApiKey.INIT_PRODUCER_ID, 4, body, timeout_s=40),
        lambda a: error_name(a.error_code) not in ("COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                                                   "CONCURRENT_TRANSACTIONS", "NOT_COORDINATOR"),
    )  # fmt: skip


def add_partitions_to_txn(address: str, transactional_id: str, pid: int, epoch: int, topic: str) -> str:
    body = {
        "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
    }  # fmt: skip
    answer = request(address, ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)
    return error_name(answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def end_txn(address: str, transactional_id: str, pid: int, epoch: int, *, committed: bool) -> str:
    body = {"transactional_id": transactional_id, "producer_id": pid, "producer_epoch": epoch, "committed": committed}
    return error_name(request(address, ApiKey.END_TXN, 3, body).error_code)


def join_group(address: str, group: str, member_id: str = "") -> Any:
    body = {
        "group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": member_id,
        "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}],
    }  # fmt: skip
    return request(address, ApiKey.JOIN_GROUP, 5, body, timeout_s=40)


def offset_commit(address: str, group: str, member_id: str, generation: int, topic: str) -> str:
    body = {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                   "committed_metadata": ""}]}],
    }  # fmt: skip
    answer = request(address, ApiKey.OFFSET_COMMIT, 8, body)
    return error_name(answer.topics[0].partitions[0].error_code)
