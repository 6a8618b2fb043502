"""Finding hanging transactions (KIP-664, ``kafka-transactions.sh find-hanging``): the candidate
rule and the coordinator's view, pure (``pyspark_log.client.hanging``)."""

from __future__ import annotations

import pytest

from pyspark_log.client.hanging import OpenTransaction, coordinator_view, open_transactions
from pyspark_log.client.operations import ProducerState, TransactionDescription
from pyspark_log.client.types import TopicPartition

pytestmark = pytest.mark.unit

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
NOW = 10_000_000


def producer(pid: int, *, start: int = -1, last_ms: int = NOW, epoch: int = 0, coord: int = -1) -> ProducerState:
    return ProducerState(pid, epoch, 4, last_ms, coord, start)


def describe(pid: int, state: str, *partitions: TopicPartition) -> TransactionDescription:
    return TransactionDescription(1, f"tx-{pid}", state, pid, 0, 60_000, NOW - 100_000, tuple(partitions))


def test_candidates_are_open_transactions_idle_longer_than_the_threshold() -> None:
    producers = {
        TP0: [
            producer(1, start=40, last_ms=NOW - 61_000),  # open, idle 61 s
            producer(2, start=-1, last_ms=NOW - 900_000),  # idle but no open transaction
            producer(3, start=50, last_ms=NOW - 60_000),  # exactly at the threshold: not more
        ],
        TP1: [producer(4, start=7, last_ms=NOW - 3_600_000)],
    }
    found = open_transactions(producers, NOW, 60_000)
    assert [(t.partition, t.producer.producer_id) for t in found] == [(TP0, 1), (TP1, 4)]
    assert found[1].duration_ms(NOW) == 3_600_000
    ordered = open_transactions(producers, NOW, 0)  # by partition, then start offset
    assert [(t.partition.partition, t.producer.current_transaction_start_offset) for t in ordered] == [
        (0, 40),
        (0, 50),
        (1, 7),
    ]


def test_the_coordinators_view_decides_whether_it_is_hanging() -> None:
    open_on_tp0 = OpenTransaction(TP0, producer(1, start=40, last_ms=0))
    ids = {1: "tx-1"}
    # the coordinator still has the partition in the transaction: it will write the marker itself
    assert coordinator_view(open_on_tp0, ids, {"tx-1": describe(1, "Ongoing", TP0, TP1)}) == "Ongoing"
    assert coordinator_view(open_on_tp0, ids, {"tx-1": describe(1, "PrepareAbort", TP0)}) == "PrepareAbort"
    # hanging (Kafka's definition): no marker will ever come from the coordinator
    assert coordinator_view(open_on_tp0, {}, {}) is None  # no transactional id has this producer id
    assert coordinator_view(open_on_tp0, ids, {}) is None  # TRANSACTIONAL_ID_NOT_FOUND
    assert coordinator_view(open_on_tp0, ids, {"tx-1": describe(1, "Ongoing", TP1)}) is None  # not this partition
    assert coordinator_view(open_on_tp0, ids, {"tx-1": describe(1, "CompleteCommit")}) is None
    assert coordinator_view(open_on_tp0, ids, {"tx-1": describe(9, "Ongoing", TP0)}) is None  # another producer id
