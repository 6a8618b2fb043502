"""Which records and batches a clean keeps (Kafka documentation §4.8 "Log Compaction" guarantees; Kafka's
transaction rules)."""

from __future__ import annotations

from broker.log.cleaner.retain import (
    BatchRetention,
    TxnCleaning,
    data_batch_retention,
    delete_horizon_to_stamp,
    deletes_retained,
    keep_control_batch,
    keep_record,
)
from broker.log.txn_index import AbortedTxn

DAY_MS = 86_400_000


def test_section_4_8_at_least_the_last_known_value_of_each_key_is_kept() -> None:
    """compaction keeps at least the last known value of every key of the partition."""
    assert keep_record(7, True, True, 7, retain_deletes=False)
    assert not keep_record(3, True, True, 7, retain_deletes=False)
    assert keep_record(9, True, True, 7, retain_deletes=False)  # after the map's range: kept
    assert keep_record(3, True, True, -1, retain_deletes=False)  # key not in the dirty head


def test_section_4_8_tombstones_are_themselves_removed_after_delete_retention() -> None:
    """delete markers are themselves removed after a while to free space."""
    assert keep_record(7, True, False, 7, retain_deletes=True)
    assert not keep_record(7, True, False, 7, retain_deletes=False)


def test_section_4_8_tombstones_visible_within_delete_retention_ms() -> None:
    """a consumer that reaches the head within the topic's ``delete.retention.ms`` sees every delete marker:
    KIP-534 — a tombstone survives the clean that first
    sees it (its batch has no delete horizon yet), which stamps the horizon now + delete.retention.ms,
    and every clean before that horizon."""
    now = 10 * DAY_MS
    assert deletes_retained(None, now)  # never stamped: this clean keeps it and stamps it
    assert delete_horizon_to_stamp(None, True, now, DAY_MS) == now + DAY_MS
    assert deletes_retained(now + 1, now)
    assert not deletes_retained(now, now)  # the horizon has passed
    assert delete_horizon_to_stamp(now - 5, True, now, DAY_MS) is None  # a horizon is set once
    assert delete_horizon_to_stamp(None, False, now, DAY_MS) is None  # nothing to delete later
    assert delete_horizon_to_stamp(None, True, now, 1 << 63) == (1 << 63) - 1  # capped


def test_records_without_a_key_are_dropped() -> None:
    assert not keep_record(5, False, True, -1, retain_deletes=True)


def test_aborted_batches_dropped_last_batch_of_a_producer_kept_as_header() -> None:
    assert data_batch_retention(aborted=True, last_batch_of_producer=False) is BatchRetention.DELETE
    assert data_batch_retention(aborted=True, last_batch_of_producer=True) is BatchRetention.RETAIN_EMPTY
    assert data_batch_retention(aborted=False, last_batch_of_producer=False) is BatchRetention.DELETE_EMPTY


def test_aborted_transaction_batches_found_from_the_index() -> None:
    txns = TxnCleaning([AbortedTxn(7, first_offset=10, last_offset=20, last_stable_offset=21)])
    assert not txns.on_data_batch(7, 5, transactional=True)  # an earlier, committed transaction
    assert not txns.on_marker(7, 6, commit=True)  # data seen: the COMMIT marker stays
    assert txns.on_data_batch(7, 12, transactional=True)
    assert not txns.on_data_batch(8, 13, transactional=True)  # another producer
    assert not txns.on_data_batch(7, 14, transactional=False)  # not transactional
    assert not txns.on_marker(7, 20, commit=False)  # its data was seen in this clean: the marker stays
    assert txns.keep_abort_marker(7, 20) == AbortedTxn(7, 10, 20, 21)
    assert txns.retained_aborted == [AbortedTxn(7, 10, 20, 21)]


def test_markers_removable_once_their_transaction_data_is_gone() -> None:
    """Kafka: a COMMIT/ABORT marker goes once no batch of its transaction remains and its delete
    horizon (KIP-534, stamped when it became removable) has passed."""
    txns = TxnCleaning([AbortedTxn(7, first_offset=10, last_offset=20, last_stable_offset=21)])
    assert txns.on_marker(7, 20, commit=False)
    assert txns.on_marker(8, 30, commit=True)
    assert not txns.on_marker(8, 31, commit=None)  # not an end-transaction marker
    assert not keep_control_batch(marker_removable=True, retain_deletes=False, last_batch_of_producer=False)
    assert keep_control_batch(marker_removable=True, retain_deletes=True, last_batch_of_producer=False)
    assert keep_control_batch(marker_removable=False, retain_deletes=False, last_batch_of_producer=False)
    assert keep_control_batch(marker_removable=True, retain_deletes=False, last_batch_of_producer=True)
