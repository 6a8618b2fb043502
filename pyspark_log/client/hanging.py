"""Finding hanging transactions (KIP-664; ``kafka-transactions.sh find-hanging``). Pure.

A transaction is open on a partition while the partition's producer state has a
``current_transaction_start_offset`` for its producer: until a COMMIT/ABORT marker comes, the
partition's last stable offset stays at that offset and read_committed readers stop there.

The search has Kafka's steps:

1. **candidates** (``open_transactions``): producers with an open transaction whose last write is
   older than the threshold (``now - last_timestamp > max_transaction_timeout_ms``);
2. the **coordinator's view** (``coordinator_view``): the candidates' producer ids are looked up
   with ListTransactions, their transactional ids described with DescribeTransactions. If the
   coordinator still lists the partition in the transaction (Ongoing, PrepareCommit,
   PrepareAbort), the coordinator will write the marker itself — at the latest when the
   transaction times out (``transaction.timeout.ms``, up to ``transaction.max.timeout.ms``);
   otherwise nothing ever will, and only ``abort`` ends it (Kafka's definition of *hanging*).

Kafka's tool prints only the second kind. ``pylog transactions find-hanging`` prints every
candidate with the coordinator's state in an extra column (``None``: the coordinator does not
know it), because a transaction left open by a dead producer (a killed Spark driver) holds the
LSO back for up to its timeout, and an operator may want to end it sooner (docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark_log.client.operations import ProducerState, TransactionDescription
from pyspark_log.client.types import TopicPartition

ACTIVE_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    partition: TopicPartition
    producer: ProducerState

    def duration_ms(self, now_ms: int) -> int:
        """Time since the producer last wrote to the partition (Kafka's measure)."""
        return now_ms - self.producer.last_timestamp_ms


def open_transactions(
    producers: Mapping[TopicPartition, list[ProducerState]], now_ms: int, max_transaction_timeout_ms: int
) -> list[OpenTransaction]:
    """The open transactions whose producer's last write is more than the threshold ago, by
    partition then start offset."""
    found = [
        OpenTransaction(tp, p)
        for tp, states in producers.items()
        for p in states
        if p.current_transaction_start_offset >= 0 and now_ms - p.last_timestamp_ms > max_transaction_timeout_ms
    ]
    return sorted(
        found, key=lambda t: (t.partition.topic, t.partition.partition, t.producer.current_transaction_start_offset)
    )


def coordinator_view(
    txn: OpenTransaction,
    transactional_ids: Mapping[int, str],
    descriptions: Mapping[str, TransactionDescription],
) -> str | None:
    """The coordinator's state name of ``txn`` when it still expects to write the partition's
    marker; None when it does not (no transactional id has this producer id, the id is unknown,
    or its transaction no longer includes the partition): a hanging transaction."""
    transactional_id = transactional_ids.get(txn.producer.producer_id)
    description = descriptions.get(transactional_id) if transactional_id is not None else None
    if description is None or description.producer_id != txn.producer.producer_id:
        return None
    if description.state in ACTIVE_STATES and txn.partition in description.topic_partitions:
        return description.state
    return None
