"""The error codes Apache Kafka 4.1.1 and pylog answer to the same bad requests (raw protocol,
field level): unknown topics, a record batch too large, invalid CreateTopics arguments, acks=all
against min.insync.replicas, a fenced transactional producer, a stale group generation, fetch
offsets out of range.

Each scenario runs on both brokers; where the answers differ the scenario must be a row of the
table "Error codes" in docs/compatibility.md (and a row whose answers agree again is stale).
Not covered: authorisation errors (SASL and ACLs on both brokers cost more than this tier's
budget; tests/integration/test_acls*.py cover pylog's against Kafka's documented codes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from pyspark_log.embedded_cluster import request
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


SCENARIOS: dict[str, Callable[[Setup], str]] = {
    f.__name__: f
    for f in (
        metadata_unknown, produce_unknown, fetch_unknown, list_offsets_unknown, produce_too_large, fetch_beyond_end,
        fetch_negative_offset, create_bad_config_value, create_unknown_config, create_bad_cleanup_policy,
        create_rf_above_brokers, create_rf_zero, create_zero_partitions, create_minus_two_partitions,
        create_invalid_name, create_existing, acks_all_min_isr_above_rf, fenced_producer, stale_generation,
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
