"""Which batches and records a clean keeps: pure rules (Kafka ``LogCleaner.cleanInto`` / ``filterTo``).

Kafka documentation §4.8 "Log Compaction": compaction keeps at least the last known value of every key of a
partition; it removes records but never reorders them; offsets never change; a key with a null payload is a
delete marker (tombstone) that is itself removed after a while to free space; a consumer that reaches the head
within ``delete.retention.ms`` sees every delete marker.

Rules:

* a record is kept when it has a key and its offset is at least the map's offset for the key
  (a key the map does not hold: kept) — the latest record of each key survives;
* a tombstone (null value) is kept until its batch's *delete horizon* (KIP-534): a batch that
  keeps a tombstone and has no horizon yet is stamped with one, the clean's time plus
  ``delete.retention.ms`` (``delete_horizon_to_stamp``); later cleans keep its tombstones while
  the time is before it (``deletes_retained``). So a tombstone always survives the clean that
  first sees it, and a reader that reaches the head within ``delete.retention.ms`` of that clean
  sees it;
* a record without a key is dropped (a compacted topic refuses them on produce, KIP-467);
* every batch of an aborted transaction is dropped (``TxnCleaning``, from the aborted
  transactions of the transaction indexes);
* a COMMIT/ABORT marker stays while data of its transaction was seen in this clean; once none is
  (the marker is removable) it is stamped with a delete horizon like a tombstone's and goes at
  the first clean after it (Kafka's rule);
* the last data batch of each live producer id is kept (with no records if none survives) so
  that its sequence state survives a restart that rebuilds the producer state from the log.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.log.txn_index import AbortedTxn


class BatchRetention(enum.Enum):
    """What happens to a batch (Kafka ``BatchRetention``)."""

    DELETE = "delete"  # drop it whole
    DELETE_EMPTY = "delete_empty"  # keep the records that pass; drop the batch if none does
    RETAIN_EMPTY = "retain_empty"  # keep the records that pass; keep the header if none does


_INT64_MAX = (1 << 63) - 1


def deletes_retained(delete_horizon_ms: int | None, now_ms: int) -> bool:
    """KIP-534: whether a batch's tombstones (and its marker, when removable) survive this clean —
    always when it has no delete horizon yet (this clean stamps one), else while ``now_ms`` is
    before the horizon."""
    return delete_horizon_ms is None or now_ms < delete_horizon_ms


def delete_horizon_to_stamp(
    delete_horizon_ms: int | None, keeps_deletes: bool, now_ms: int, delete_retention_ms: int
) -> int | None:
    """The delete horizon a rewritten batch gets (Kafka ``needToSetDeleteHorizon``): ``now +
    delete.retention.ms`` when it keeps a tombstone or a removable marker and has none yet;
    otherwise None (the batch keeps whatever horizon it has)."""
    if delete_horizon_ms is not None or not keeps_deletes:
        return None
    return min(now_ms + delete_retention_ms, _INT64_MAX)


def keep_record(
    offset: int, has_key: bool, has_value: bool, latest_offset_for_key: int, *, retain_deletes: bool
) -> bool:
    """Kafka ``shouldRetainRecord``: the latest record of its key; a tombstone only while its
    batch retains deletes (``deletes_retained``); never a record without a key."""
    if not has_key:
        return False
    if offset < latest_offset_for_key:
        return False
    return has_value or retain_deletes


def data_batch_retention(*, aborted: bool, last_batch_of_producer: bool) -> BatchRetention:
    """A data batch: dropped whole when its transaction aborted, kept as a header when it is the
    last batch of a live producer id, otherwise filtered record by record."""
    if last_batch_of_producer:
        return BatchRetention.RETAIN_EMPTY
    if aborted:
        return BatchRetention.DELETE
    return BatchRetention.DELETE_EMPTY


def keep_control_batch(*, marker_removable: bool, retain_deletes: bool, last_batch_of_producer: bool) -> bool:
    """A control batch stays unless its marker is removable (no data of its transaction seen in
    this clean) and its delete horizon has passed; the last batch of a producer stays."""
    return last_batch_of_producer or not marker_removable or retain_deletes


@dataclass
class TxnCleaning:
    """Transactions met while walking batches in offset order (Kafka ``CleanedTransactionMetadata``).

    Built with the aborted transactions that overlap the cleaned range (first offset and marker
    offset of each, from the ``.txnindex`` files). ``on_data_batch`` says whether a batch
    belongs to an aborted transaction; ``on_marker`` whether a COMMIT/ABORT marker may be
    removed; ``retained_aborted`` are the index entries of the ABORT markers that were kept.
    """

    aborted: list[AbortedTxn]
    _next: int = 0
    _ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = field(default_factory=dict)  # pid -> (txn, data seen)
    _ongoing_committed: set[int] = field(default_factory=set)
    retained_aborted: list[AbortedTxn] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.aborted = sorted(self.aborted, key=lambda t: t.first_offset)

    def _start_up_to(self, offset: int) -> None:
        aborted = self.aborted
        while self._next < len(aborted) and aborted[self._next].first_offset <= offset:
            txn = aborted[self._next]
            self._ongoing_aborted[txn.producer_id] = (txn, False)
            self._next += 1

    def on_data_batch(self, producer_id: int, last_offset: int, *, transactional: bool) -> bool:
        """True when the batch belongs to an aborted transaction (its records are dropped)."""
        self._start_up_to(last_offset)
        if not transactional:
            return False
        found = self._ongoing_aborted.get(producer_id)
        if found is not None:
            self._ongoing_aborted[producer_id] = (found[0], True)
            return True
        self._ongoing_committed.add(producer_id)
        return False

    def on_marker(self, producer_id: int, offset: int, *, commit: bool | None) -> bool:
        """At a control batch: True when its marker may be removed (no data of its transaction
        was seen in this walk). ``commit`` is None for other control types (never removable)."""
        self._start_up_to(offset)
        if commit is None:
            return False
        if commit:
            seen = producer_id in self._ongoing_committed
            self._ongoing_committed.discard(producer_id)
            return not seen
        found = self._ongoing_aborted.pop(producer_id, None)
        return found is None or not found[1]

    def keep_abort_marker(self, producer_id: int, offset: int) -> AbortedTxn | None:
        """An ABORT marker at ``offset`` was kept: returns its index entry, which goes into the
        cleaned segment (None when no ``.txnindex`` named it)."""
        for txn in self.aborted:
            if txn.producer_id == producer_id and txn.last_offset == offset:
                self.retained_aborted.append(txn)
                return txn
        return None


def aborted_in(aborted: Iterable[AbortedTxn], start_offset: int, end_offset: int) -> list[AbortedTxn]:
    """The entries whose ABORT marker lies in ``[start_offset, end_offset)``."""
    return [txn for txn in aborted if start_offset <= txn.last_offset < end_offset]
