"""What ListTransactions (66) and DescribeTransactions (65) show of the coordinator's
transactions (KIP-664 hanging-transaction tooling; KIP-994 duration filter). Pure.

ListTransactions keeps a transaction when it matches every filter given, as Kafka's
``TransactionStateManager.listTransactionStates``:

* ``Dead`` transactions are never listed (their ids are being expired);
* ``producer_id_filters``: its producer id is one of them (empty: any);
* ``state_filters``: its state is one of them, by Kafka's state name (``Ongoing``,
  ``PrepareCommit``, ...; case-sensitive). Names Kafka does not know are returned as
  ``unknown_state_filters``; a non-empty filter of only unknown names matches nothing;
* ``duration_filter_ms`` ≥ 0 (ListTransactions v1, KIP-994): it started more than that many
  milliseconds ago (``now - start > duration``); < 0: any. An id that never started one (start
  -1, e.g. Empty after InitProducerId) passes, as in Kafka; add ``Ongoing`` to the state filter
  for open transactions only.

DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not have
or has in ``Dead``, INVALID_REQUEST for the empty id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.coordinator.txn.metadata import TransactionMetadata
from broker.coordinator.txn.records import TxnState

STATE_BY_NAME: dict[str, TxnState] = {state.kafka_name: state for state in TxnState}


@dataclass(frozen=True, slots=True)
class TxnFilter:
    state_names: tuple[str, ...] = ()
    producer_ids: frozenset[int] = frozenset()
    duration_ms: int = -1

    def unknown_states(self) -> list[str]:
        return [name for name in self.state_names if name not in STATE_BY_NAME]

    def matches(self, txn: TransactionMetadata, now_ms: int) -> bool:
        if txn.state is TxnState.DEAD:
            return False
        if self.producer_ids and txn.producer_id not in self.producer_ids:
            return False
        if self.state_names and txn.state not in {STATE_BY_NAME[n] for n in self.state_names if n in STATE_BY_NAME}:
            return False
        return not (self.duration_ms >= 0 and now_ms - txn.start_ms <= self.duration_ms)


def select(txns: Iterable[TransactionMetadata], wanted: TxnFilter, now_ms: int) -> list[TransactionMetadata]:
    """The transactions ``wanted`` keeps, by transactional id."""
    return sorted((t for t in txns if wanted.matches(t, now_ms)), key=lambda t: t.transactional_id)


def topics_of(txn: TransactionMetadata) -> list[dict[str, object]]:
    """The transaction's partitions as DescribeTransactions' ``topics`` (sorted)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()]
