"""The error codes Apache Kafka 4.1.1 and pylog answer to the same bad requests (raw protocol,
field level): unknown topics, a record batch too large, invalid CreateTopics arguments, acks=all
against min.insync.replicas, a fenced transactional producer, a stale group generation, fetch
offsets out of range.

Also: bad acks, unknown partitions, a corrupt batch, timestamps out of range, an old Produce
version, a future leader epoch, CreatePartitions/DeleteTopics/DescribeConfigs/
IncrementalAlterConfigs/DeleteRecords errors, idempotent sequence errors, transactional writes
outside a transaction, InitProducerId/AddOffsetsToTxn errors and group protocol errors.

Each scenario runs on both brokers; where the answers differ the scenario must be a row of the
table "Error codes" in docs/compatibility.md (and a row whose answers agree again is stale).
Not covered: authorisation errors (SASL and ACLs on both brokers cost more than this tier's
budget; tests/integration/test_acls*.py cover pylog's against Kafka's documented codes).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pyspark_log.embedded_cluster import request
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import (
    add_partitions_to_txn,
    create_ready_topic,
    create_topic,
    end_txn,
    error_name,
    fetch,
    find_coordinator,
    init_producer_id,
    join_group,
    list_offset,
    offset_commit,
    poll,
    produce,
    small_batch,
    unique,
)

HEADING = "Error codes"
RETRIABLE_COORDINATOR = ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")


@dataclass
class Setup:
    """Per broker: a topic with one record and max.message.bytes=1024."""

    address: str
    topic: str


def metadata_unknown(s: Setup) -> str:
    body = {"topics": [{"name": unique("missing")}], "allow_auto_topic_creation": False}
    return error_name(request(s.address, ApiKey.METADATA, 12, body).topics[0].error_code)


def produce_unknown(s: Setup) -> str:
    return error_name(produce(s.address, unique("missing"), small_batch()).error_code)


def fetch_unknown(s: Setup) -> str:
    return error_name(fetch(s.address, unique("missing"), 0).error_code)


def list_offsets_unknown(s: Setup) -> str:
    return error_name(list_offset(s.address, unique("missing"), -1).error_code)


def produce_too_large(s: Setup) -> str:
    return error_name(produce(s.address, s.topic, small_batch(1, 4000)).error_code)


def fetch_beyond_end(s: Setup) -> str:
    return error_name(fetch(s.address, s.topic, 100).error_code)


def fetch_negative_offset(s: Setup) -> str:
    return error_name(fetch(s.address, s.topic, -5).error_code)


def create_bad_config_value(s: Setup) -> str:
    return create_topic(s.address, unique("c"), configs={"retention.ms": "abc"})


def create_unknown_config(s: Setup) -> str:
    return create_topic(s.address, unique("c"), configs={"no.such.config": "1"})


def create_bad_cleanup_policy(s: Setup) -> str:
    return create_topic(s.address, unique("c"), configs={"cleanup.policy": "bogus"})


def create_rf_above_brokers(s: Setup) -> str:
    return create_topic(s.address, unique("c"), replication_factor=3)


def create_rf_zero(s: Setup) -> str:
    return create_topic(s.address, unique("c"), replication_factor=0)


def create_zero_partitions(s: Setup) -> str:
    return create_topic(s.address, unique("c"), partitions=0)


def create_minus_two_partitions(s: Setup) -> str:
    return create_topic(s.address, unique("c"), partitions=-2)


def create_invalid_name(s: Setup) -> str:
    return create_topic(s.address, "bad/name")


def create_existing(s: Setup) -> str:
    return create_topic(s.address, s.topic)


def acks_all_min_isr_above_rf(s: Setup) -> str:
    """RF=1, min.insync.replicas=2: Kafka caps the minimum at the replica count (effectiveMinIsr)."""
    topic = unique("misr")
    create_ready_topic(s.address, topic, configs={"min.insync.replicas": "2"})
    return error_name(produce(s.address, topic, small_batch(), acks=-1).error_code)


def fenced_producer(s: Setup) -> str:
    """Two InitProducerId of one transactional id; the first producer's AddPartitionsToTxn and
    EndTxn with its old epoch, then EndTxn of the second with no transaction."""
    tid = unique("txn")
    find_coordinator(s.address, tid, 1)
    first, second = init_producer_id(s.address, tid), init_producer_id(s.address, tid)
    return " ".join([
        error_name(first.error_code), error_name(second.error_code),
        f"epoch+{second.producer_epoch - first.producer_epoch}",
        add_partitions_to_txn(s.address, tid, first.producer_id, first.producer_epoch, s.topic),
        end_txn(s.address, tid, first.producer_id, first.producer_epoch, committed=True),
        end_txn(s.address, tid, second.producer_id, second.producer_epoch, committed=True),
    ])  # fmt: skip


def stale_generation(s: Setup) -> str:
    """JoinGroup v5 (MEMBER_ID_REQUIRED, then joined), then OffsetCommit with the generation
    before, after and of the join (still CompletingRebalance: no SyncGroup) and of an unknown member."""
    group = unique("g")
    find_coordinator(s.address, group, 0)
    first = poll(
        "JoinGroup",
        lambda: join_group(s.address, group),
        lambda a: error_name(a.error_code) not in RETRIABLE_COORDINATOR,
    )
    joined = join_group(s.address, group, first.member_id)
    member, generation = joined.member_id, joined.generation_id
    return " ".join([
        error_name(first.error_code), error_name(joined.error_code), f"generation={generation}",
        offset_commit(s.address, group, member, generation - 1, s.topic),
        offset_commit(s.address, group, member, generation + 1, s.topic),
        offset_commit(s.address, group, member, generation, s.topic),
        offset_commit(s.address, group, "nobody", generation, s.topic),
    ])  # fmt: skip


def produce_bad_acks(s: Setup) -> str:
    return error_name(produce(s.address, s.topic, small_batch(), acks=2).error_code)


def produce_unknown_partition(s: Setup) -> str:
    return error_name(produce(s.address, s.topic, small_batch(), partition=7).error_code)


def fetch_unknown_partition(s: Setup) -> str:
    return error_name(fetch(s.address, s.topic, 0, partition=7).error_code)


def list_offsets_unknown_partition(s: Setup) -> str:
    return error_name(list_offset(s.address, s.topic, -1, partition=7).error_code)


def produce_corrupt_batch(s: Setup) -> str:
    damaged = bytearray(small_batch(3))
    damaged[-3] ^= 0xFF  # inside the records: the CRC no longer matches
    return error_name(produce(s.address, s.topic, bytes(damaged)).error_code)


def produce_timestamps(s: Setup) -> str:
    """CreateTime two hours ahead (log.message.timestamp.after.max.ms is 1 h), then one in 1970."""
    ahead = encode_batch([ProducerRecord(b"k", b"v", int(time.time() * 1000) + 2 * 3600 * 1000)])
    ancient = encode_batch([ProducerRecord(b"k", b"v", 1000)])
    return " ".join(error_name(produce(s.address, s.topic, b).error_code) for b in (ahead, ancient))


def produce_v2(s: Setup) -> str:
    """Produce v2 (message format v0/v1 era), advertised by both (KAFKA-18659)."""
    try:
        return error_name(produce(s.address, s.topic, small_batch(), version=2).error_code)
    except ConnectionError:
        return "connection closed"


def fetch_future_leader_epoch(s: Setup) -> str:
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": s.topic, "partitions": [{"partition": 0, "fetch_offset": 0, "current_leader_epoch": 5,
                                                       "partition_max_bytes": 1 << 20}]}],
    }  # fmt: skip
    return error_name(request(s.address, ApiKey.FETCH, 12, body).responses[0].partitions[0].error_code)


def create_partitions_errors(s: Setup) -> str:
    """CreatePartitions to the current count, then of an unknown topic."""
    out = []
    for name, count in ((s.topic, 1), (unique("missing"), 3)):
        body = {"topics": [{"name": name, "count": count, "assignments": None}], "timeout_ms": 30000,
                "validate_only": False}  # fmt: skip
        out.append(error_name(request(s.address, ApiKey.CREATE_PARTITIONS, 3, body).results[0].error_code))
    return " ".join(out)


def delete_unknown_topic(s: Setup) -> str:
    body = {"topics": [{"name": unique("missing"), "topic_id": uuid.UUID(int=0)}], "timeout_ms": 30000}
    return error_name(request(s.address, ApiKey.DELETE_TOPICS, 6, body).responses[0].error_code)


def describe_configs_unknown_topic(s: Setup) -> str:
    body = {"resources": [{"resource_type": 2, "resource_name": unique("missing"), "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}  # fmt: skip
    return error_name(request(s.address, ApiKey.DESCRIBE_CONFIGS, 4, body).results[0].error_code)


def alter_configs_invalid(s: Setup) -> str:
    """IncrementalAlterConfigs SET of a bad value, then of an unknown key."""
    out = []
    for name, value in (("retention.ms", "abc"), ("no.such.config", "1")):
        body = {"resources": [{"resource_type": 2, "resource_name": s.topic,
                               "configs": [{"name": name, "config_operation": 0, "value": value}]}],
                "validate_only": False}  # fmt: skip
        out.append(error_name(request(s.address, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0].error_code))
    return " ".join(out)


def delete_records_beyond_high_watermark(s: Setup) -> str:
    body = {"topics": [{"name": s.topic, "partitions": [{"partition_index": 0, "offset": 100}]}], "timeout_ms": 30000}
    return error_name(request(s.address, ApiKey.DELETE_RECORDS, 2, body).topics[0].partitions[0].error_code)


def idempotent_sequences(s: Setup) -> str:
    """An idempotent producer's first batch at sequence 5, then 0 (behind), 0 again, 3 (a gap);
    then a producer id the broker never issued."""
    body = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    pid = request(s.address, ApiKey.INIT_PRODUCER_ID, 4, body)
    now = int(time.time() * 1000)

    def send(producer_id: int, epoch: int, sequence: int) -> str:
        batch = encode_batch([ProducerRecord(b"k", b"v", now)], producer_id=producer_id, producer_epoch=epoch,
                             base_sequence=sequence)  # fmt: skip
        return error_name(produce(s.address, s.topic, batch).error_code)

    sent = [send(pid.producer_id, pid.producer_epoch, seq) for seq in (5, 0, 0, 3)]
    return " ".join([error_name(pid.error_code), *sent, send(pid.producer_id + 1000, 0, 0)])


def transactional_write_outside_transaction(s: Setup) -> str:
    """A transactional batch to a partition never added with AddPartitionsToTxn (KIP-890)."""
    tid = unique("txn")
    find_coordinator(s.address, tid, 1)
    pid = init_producer_id(s.address, tid)
    batch = encode_batch([ProducerRecord(b"k", b"v", int(time.time() * 1000))], producer_id=pid.producer_id,
                         producer_epoch=pid.producer_epoch, base_sequence=0, transactional=True)  # fmt: skip
    return error_name(produce(s.address, s.topic, batch, transactional_id=tid).error_code)


def transactional_sequence_reused_after_abort(s: Setup) -> str:
    """A transaction writes sequence 0 and is aborted; the next transaction, same epoch, writes
    sequence 0 again (what librdkafka's ``abort_transaction`` sends after purging a retried batch
    that had been written): Kafka acknowledges it as a duplicate, at the aborted batch's offset."""
    topic, tid = unique("txnseq"), unique("txn")
    create_ready_topic(s.address, topic)
    find_coordinator(s.address, tid, 1)
    pid = init_producer_id(s.address, tid)
    producer_id, epoch = pid.producer_id, pid.producer_epoch

    def add() -> str:
        return poll(f"AddPartitionsToTxn {tid}",
                    lambda: add_partitions_to_txn(s.address, tid, producer_id, epoch, topic),
                    lambda code: code != "CONCURRENT_TRANSACTIONS")  # fmt: skip

    def send() -> Any:
        batch = encode_batch([ProducerRecord(b"k", b"v", int(time.time() * 1000))], producer_id=producer_id,
                             producer_epoch=epoch, base_sequence=0, transactional=True)  # fmt: skip
        return produce(s.address, topic, batch, transactional_id=tid)

    out = [add()]
    first = send()
    out += [error_name(first.error_code), end_txn(s.address, tid, producer_id, epoch, committed=False), add()]
    again = send()
    out.append(error_name(again.error_code))
    if again.error_code == 0:
        out.append("at the aborted batch's offset" if again.base_offset == first.base_offset else "at a new offset")
    end_txn(s.address, tid, producer_id, epoch, committed=False)
    return " ".join(out)


def transaction_coordinator_errors(s: Setup) -> str:
    """AddOffsetsToTxn with no transaction yet, then with a future epoch; InitProducerId with a
    timeout above transaction.max.timeout.ms."""
    tid = unique("txn")
    find_coordinator(s.address, tid, 1)
    pid = init_producer_id(s.address, tid)
    out = []
    for epoch in (pid.producer_epoch, pid.producer_epoch + 3):
        body = {"transactional_id": tid, "producer_id": pid.producer_id, "producer_epoch": epoch, "group_id": "g"}
        out.append(error_name(request(s.address, ApiKey.ADD_OFFSETS_TO_TXN, 3, body).error_code))
    body = {"transactional_id": tid, "transaction_timeout_ms": 10**9, "producer_id": -1, "producer_epoch": -1}
    out.append(error_name(request(s.address, ApiKey.INIT_PRODUCER_ID, 4, body).error_code))
    return " ".join(out)


def group_protocol_errors(s: Setup) -> str:
    """JoinGroup with a 1 s session timeout; after a member joined: Heartbeat of an unknown
    member and of an unknown group, SyncGroup of the next generation, JoinGroup with another
    protocol type, OffsetFetch of a group that never existed."""
    group = unique("g")
    find_coordinator(s.address, group, 0)
    small = {
        "group_id": group, "session_timeout_ms": 1000, "rebalance_timeout_ms": 30000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
    }  # fmt: skip
    loaded = lambda a: error_name(a.error_code) not in RETRIABLE_COORDINATOR  # noqa: E731
    first = poll("JoinGroup", lambda: join_group(s.address, group), loaded)
    out = [error_name(request(s.address, ApiKey.JOIN_GROUP, 5, small).error_code)]
    joined = join_group(s.address, group, first.member_id)
    for body in (
        {"group_id": group, "generation_id": joined.generation_id, "member_id": "nobody"},
        {"group_id": unique("nogroup"), "generation_id": 1, "member_id": "nobody"},
    ):
        out.append(error_name(request(s.address, ApiKey.HEARTBEAT, 4, body).error_code))
    sync = {"group_id": group, "generation_id": joined.generation_id + 1, "member_id": joined.member_id,
            "protocol_type": "consumer", "protocol_name": "range", "assignments": []}  # fmt: skip
    out.append(error_name(request(s.address, ApiKey.SYNC_GROUP, 5, sync).error_code))
    other = dict(small, session_timeout_ms=30000, protocol_type="connect")
    out.append(error_name(request(s.address, ApiKey.JOIN_GROUP, 5, other).error_code))
    fetch_body = {"groups": [{"group_id": unique("nogroup"), "topics": [{"name": s.topic, "partition_indexes": [0]}]}],
                  "require_stable": False}  # fmt: skip
    answer = poll(
        "OffsetFetch", lambda: request(s.address, ApiKey.OFFSET_FETCH, 8, fetch_body).groups[0],
        lambda a: error_name(a.error_code) not in RETRIABLE_COORDINATOR,
    )  # fmt: skip
    out.append(error_name(answer.error_code))
    out += [f"{error_name(p.error_code)} offset={p.committed_offset}" for t in answer.topics for p in t.partitions]
    return " ".join(out)


def metadata_auto_create(s: Setup) -> str:
    """Metadata v12 of an unknown topic with auto-creation allowed: the first answer."""
    body = {"topics": [{"name": unique("auto")}], "allow_auto_topic_creation": True}
    topic = request(s.address, ApiKey.METADATA, 12, body).topics[0]
    return f"{error_name(topic.error_code)} partitions={len(topic.partitions)}"


def authorized_operations(s: Setup) -> str:
    """KIP-430 bit fields, asked for without an authorizer: Metadata v10 (topic and cluster) and
    DescribeCluster v1."""
    body = {"topics": [{"name": s.topic}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True, "include_topic_authorized_operations": True}  # fmt: skip
    answer = request(s.address, ApiKey.METADATA, 10, body)
    cluster = request(s.address, ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True,
                                                               "endpoint_type": 1})  # fmt: skip
    return (
        f"topic={answer.topics[0].topic_authorized_operations} cluster={answer.cluster_authorized_operations} "
        f"describe_cluster={cluster.cluster_authorized_operations}"
    )


def offset_for_leader_epoch(s: Setup) -> str:
    """OffsetForLeaderEpoch v4 for the current epoch (0), a newer one (5), and with a newer
    ``current_leader_epoch`` (UNKNOWN_LEADER_EPOCH): error, epoch and end offset of each."""
    out = []
    for epoch, current in ((0, -1), (5, -1), (0, 5)):
        body = {"replica_id": -1, "topics": [{"topic": s.topic, "partitions": [
            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]}  # fmt: skip
        p = request(s.address, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions[0]
        out.append(f"{error_name(p.error_code)}/{p.leader_epoch}/{'end' if p.end_offset > 0 else p.end_offset}")
    return " ".join(out)


def delete_records_and_log_dirs(s: Setup) -> str:
    """On a topic of its own with 6 records: DeleteRecords to offset 3 (low watermark), then
    ListOffsets earliest, a Fetch below and at the new start, DeleteRecords to -1 (the high
    watermark); DescribeLogDirs of the partition."""
    topic = unique("deleted")
    create_ready_topic(s.address, topic)
    for _ in range(3):
        produce(s.address, topic, small_batch(2))

    def delete(offset: int) -> str:
        body = {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}],
                "timeout_ms": 30000}  # fmt: skip
        part = request(s.address, ApiKey.DELETE_RECORDS, 2, body).topics[0].partitions[0]
        return f"{error_name(part.error_code)}/{part.low_watermark}"

    first = delete(3)
    earliest = list_offset(s.address, topic, -2).offset
    below, at = fetch(s.address, topic, 0), fetch(s.address, topic, 3)
    dirs = request(s.address, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": topic, "partitions": [0]}]})
    listed = [
        (r.error_code, [(p.partition_index, p.offset_lag, p.is_future_key) for t in r.topics for p in t.partitions])
        for r in dirs.results
    ]
    return (
        f"{first} earliest={earliest} below={error_name(below.error_code)} at={error_name(at.error_code)}"
        f"/start={at.log_start_offset} {delete(-1)} dirs={dirs.error_code}:{listed}"
    )


SCENARIOS: dict[str, Callable[[Setup], str]] = {
    f.__name__: f
    for f in (
        metadata_unknown, produce_unknown, fetch_unknown, list_offsets_unknown, produce_too_large, fetch_beyond_end,
        fetch_negative_offset, create_bad_config_value, create_unknown_config, create_bad_cleanup_policy,
        create_rf_above_brokers, create_rf_zero, create_zero_partitions, create_minus_two_partitions,
        create_invalid_name, create_existing, acks_all_min_isr_above_rf, fenced_producer, stale_generation,
        produce_bad_acks, produce_unknown_partition, fetch_unknown_partition, list_offsets_unknown_partition,
        produce_corrupt_batch, produce_timestamps, produce_v2, fetch_future_leader_epoch, create_partitions_errors,
        delete_unknown_topic, describe_configs_unknown_topic, alter_configs_invalid,
        delete_records_beyond_high_watermark, idempotent_sequences, transactional_write_outside_transaction,
        transactional_sequence_reused_after_abort,
        transaction_coordinator_errors, group_protocol_errors, metadata_auto_create, authorized_operations,
        offset_for_leader_epoch, delete_records_and_log_dirs,
    )
}  # fmt: skip


@pytest.fixture(scope="module")
def setups(brokers: Brokers) -> dict[str, Setup]:
    out = {}
    for name, address in brokers.items():
        topic = unique("errors")
        create_ready_topic(address, topic, configs={"max.message.bytes": "1024"})
        assert error_name(produce(address, topic, small_batch()).error_code) == "NONE"
        out[name] = Setup(address, topic)
    return out


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_bad_request_same_error(setups: dict[str, Setup], scenario: str) -> None:
    kafka, pylog = (SCENARIOS[scenario](setups[name]) for name in ("kafka", "pylog"))
    observed = {(scenario, kafka, pylog)} if kafka != pylog else set()
    documented = {tuple(row) for row in table(HEADING, 3) if row[0] == scenario}
    message = compare(HEADING, observed, documented)
    assert not message, message
