"""ListTransactions (66) and DescribeTransactions (65), KIP-664 and KIP-994: the coordinator's
filters (``broker.coordinator.txn.listing``) and the handlers through the generated codecs at
every version pylog advertises."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from broker.api.context import Request
from broker.api.txn_admin import txn_admin_handlers
from broker.coordinator.txn.listing import TxnFilter, select
from broker.coordinator.txn.metadata import TransactionMetadata
from broker.coordinator.txn.records import TxnState
from broker.network.connection import ConnectionContext
from pyspark_log.wire import ApiKey, ErrorCode
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message
from pyspark_log.wire.registry import (
    decode_request_body,
    decode_response_body,
    encode_request_body,
    encode_response_body,
)
from pyspark_log.wire.versions import SUPPORTED_VERSIONS

from .helpers import TXN_ID, Harness

pytestmark = pytest.mark.unit


def txn(tid: str, pid: int, state: TxnState, start_ms: int = 0) -> TransactionMetadata:
    return TransactionMetadata(tid, pid, 0, state=state, start_ms=start_ms)


TXNS = [
    txn("a", 1, TxnState.ONGOING, start_ms=1_000),
    txn("b", 2, TxnState.EMPTY, start_ms=-1),
    txn("c", 3, TxnState.PREPARE_COMMIT, start_ms=9_000),
    txn("d", 4, TxnState.DEAD),
    txn("e", 5, TxnState.COMPLETE_ABORT, start_ms=5_000),
]


def ids(wanted: TxnFilter, now_ms: int = 10_000) -> list[str]:
    return [t.transactional_id for t in select(TXNS, wanted, now_ms)]


def test_no_filter_lists_everything_but_dead() -> None:
    assert ids(TxnFilter()) == ["a", "b", "c", "e"]


def test_state_filter_uses_kafka_state_names() -> None:
    assert ids(TxnFilter(state_names=("Ongoing", "PrepareCommit"))) == ["a", "c"]
    assert ids(TxnFilter(state_names=("ongoing",))) == []  # names are case-sensitive, as Kafka's
    assert TxnFilter(state_names=("Ongoing", "Bogus")).unknown_states() == ["Bogus"]
    assert ids(TxnFilter(state_names=("Bogus",))) == []  # only unknown names: nothing matches
    assert ids(TxnFilter(state_names=("Dead",))) == []


def test_producer_id_filter() -> None:
    assert ids(TxnFilter(producer_ids=frozenset({1, 5, 99}))) == ["a", "e"]


def test_kip_994_duration_filter_keeps_those_running_longer() -> None:
    # now 10 000: a started 9 000 ms ago, c 1 000, e 5 000; b never started (start -1)
    assert ids(TxnFilter(duration_ms=4_999)) == ["a", "b", "e"]
    assert ids(TxnFilter(duration_ms=5_000)) == ["a", "b"]  # strictly longer
    assert ids(TxnFilter(duration_ms=0, state_names=("Ongoing",))) == ["a"]


# -- handlers ------------------------------------------------------------------------------------


class FakeBroker:
    def __init__(self) -> None:
        self.h = Harness()
        self.txn = self.h.coordinator
        self.clock_ms = self.h.clock

    def image(self) -> Any:
        return self.h.image


def call(broker: FakeBroker, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
    decoded = decode_request_body(api_key, version, encode_request_body(api_key, version, body))
    header = RequestHeader(api_key, version, 1, "client", 2)
    request = Request(header, decoded, ConnectionContext("127.0.0.1:5000", "PLAINTEXT", 1))
    result = txn_admin_handlers()[api_key](broker, request)  # type: ignore[arg-type]
    assert isinstance(result, dict)
    return decode_response_body(api_key, version, encode_response_body(api_key, version, result))


def versions(api_key: int) -> list[int]:
    lo, hi = SUPPORTED_VERSIONS[api_key]
    return list(range(lo, hi + 1))


@pytest.fixture
def broker() -> FakeBroker:
    b = FakeBroker()
    assert b.h.init().error == ErrorCode.NONE
    assert b.h.begin(("t", 0), ("t", 2), ("u", 1)) == ErrorCode.NONE
    assert b.h.init("idle").error == ErrorCode.NONE
    return b


@pytest.mark.parametrize("version", versions(ApiKey.LIST_TRANSACTIONS))
def test_list_transactions_at_each_version(broker: FakeBroker, version: int) -> None:
    resp = call(broker, ApiKey.LIST_TRANSACTIONS, version, {"state_filters": [], "producer_id_filters": []})
    assert resp.error_code == ErrorCode.NONE
    listed = {(t.transactional_id, t.transaction_state) for t in resp.transaction_states}
    assert listed == {(TXN_ID, "Ongoing"), ("idle", "Empty")}
    resp = call(
        broker, ApiKey.LIST_TRANSACTIONS, version, {"state_filters": ["Ongoing", "Nope"], "producer_id_filters": []}
    )
    assert [t.transactional_id for t in resp.transaction_states] == [TXN_ID]
    assert resp.unknown_state_filters == ["Nope"]


def test_list_transactions_v1_duration_filter(broker: FakeBroker) -> None:
    broker.h.clock.now += 5_000
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": 4_000}
    resp = call(broker, ApiKey.LIST_TRANSACTIONS, 1, body)
    # "idle" never started a transaction (start -1): Kafka's rule (now - start > duration) keeps it
    assert [t.transactional_id for t in resp.transaction_states] == ["idle", TXN_ID]
    body["duration_filter"] = 6_000
    assert [t.transactional_id for t in call(broker, ApiKey.LIST_TRANSACTIONS, 1, body).transaction_states] == ["idle"]
    body["state_filters"] = ["Ongoing"]
    body["duration_filter"] = 4_000
    assert [t.transactional_id for t in call(broker, ApiKey.LIST_TRANSACTIONS, 1, body).transaction_states] == [TXN_ID]


def test_list_transactions_while_loading(broker: FakeBroker) -> None:
    from broker.coordinator.txn.manager import PartitionStatus

    manager = broker.txn.manager
    partition, (_, epoch) = next(iter(manager.partitions.items()))
    manager.partitions[partition] = (PartitionStatus.LOADING, epoch)
    resp = call(broker, ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []})
    assert resp.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_TRANSACTIONS))
def test_describe_transactions_at_each_version(broker: FakeBroker, version: int) -> None:
    resp = call(broker, ApiKey.DESCRIBE_TRANSACTIONS, version, {"transactional_ids": [TXN_ID, "idle", "nope", ""]})
    ongoing, idle, nope, empty = resp.transaction_states
    txn_state = broker.h.txn
    assert ongoing.error_code == ErrorCode.NONE
    assert (ongoing.transaction_state, ongoing.producer_id, ongoing.producer_epoch) == (
        "Ongoing",
        txn_state.producer_id,
        txn_state.producer_epoch,
    )
    assert ongoing.transaction_start_time_ms == txn_state.start_ms >= 0
    assert [(t.topic, t.partitions) for t in ongoing.topics] == [("t", [0, 2]), ("u", [1])]
    assert (idle.error_code, idle.transaction_state, idle.topics) == (ErrorCode.NONE, "Empty", [])
    assert nope.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert empty.error_code == ErrorCode.INVALID_REQUEST


def test_no_coordinator_answers_coordinator_not_available(broker: FakeBroker) -> None:
    broker.txn = None  # type: ignore[assignment]
    resp = call(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN_ID]})
    assert resp.transaction_states[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    resp = call(broker, ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
    assert resp.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
