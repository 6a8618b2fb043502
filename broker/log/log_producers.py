"""The producer-state part of ``Log`` (Kafka documentation §4.6 "Message Delivery Semantics"; ``log.py``'s
module doc): loading the
partition's ``ProducerStateManager`` from its newest usable snapshot and replaying the batch
headers after it (at start-up and after a truncation), and the aborted transactions a
read_committed fetch of a range returns (Kafka ``collectAbortedTransactions``)."""

from __future__ import annotations

import abc
import logging
from bisect import bisect_right
from collections.abc import Callable, Iterable

from broker.log.errors import LogError
from broker.log.producer_state import ProducerStateManager, TxnMarker, parse_txn_marker
from broker.log.scan import iter_headers
from broker.log.segment import LogSegment
from broker.log.txn_index import AbortedTxn
from broker.log.validate import AppendOrigin, BatchInfo, batch_info
from pyspark_log.records.header import BatchHeader

log = logging.getLogger(__name__)


class LogProducerState(abc.ABC):
    """Producer state and aborted transactions of a ``Log`` (see the module doc)."""

    _clock: Callable[[], int]
    _segments: list[LogSegment]
    _bases: list[int]
    _producers: ProducerStateManager
    _last_abort_offset: int

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @property
    @abc.abstractmethod
    def log_end_offset(self) -> int: ...

    def load_producer_state(self, snapshot_limit: int, rebuild_txn_indexes: Iterable[LogSegment] = ()) -> None:
        """Start-up: drop snapshots past the log end, load the newest one at or below
        ``snapshot_limit`` (the recovery loader passes the base of the first segment it
        re-validated, or the log end after a clean shutdown) and replay the batch headers after
        it. ``rebuild_txn_indexes`` are segments whose ``.txnindex`` recovery emptied: the
        aborted transactions whose markers they hold are indexed again during the replay."""
        end = self.log_end_offset
        self._producers.delete_snapshots(lambda offset: offset > end)
        loaded = self._producers.load_latest_snapshot(min(snapshot_limit, end), self._clock())
        self._replay_producer_state(loaded if loaded is not None else 0, rebuild_txn_indexes)
        self._last_abort_offset = self._find_last_abort()

    def _find_last_abort(self) -> int:
        """The newest ABORT marker's offset, from the newest ``.txnindex`` with entries."""
        for segment in reversed(self._segments):
            entries = segment.txn_index.entries
            if entries:
                return entries[-1].last_offset
        return -1

    def _reload_producer_state(self) -> None:
        """After a truncation: the newest snapshot at or below the new log end, then a replay."""
        self.load_producer_state(self.log_end_offset)

    def _replay_producer_state(self, start_offset: int, rebuild_txn_indexes: Iterable[LogSegment]) -> None:
        """Apply every producer batch and marker from ``start_offset`` to the log end, unchecked
        (``AppendOrigin.REPLICATION``), reading batch headers only (and the one record of each
        control batch)."""
        rebuild = {id(segment) for segment in rebuild_txn_indexes}
        state = self._producers
        start = max(start_offset, self._bases[0])
        for segment in self._segments[max(bisect_right(self._bases, start) - 1, 0) :]:
            if segment.next_offset <= start:
                continue
            position = 0
            if start > segment.base_offset:
                found = segment.find_batch(start)
                if found is None:
                    continue
                position = found[0]
            index = segment.txn_index if id(segment) in rebuild else None
            for pos, header in iter_headers(segment.fd, position, segment.size_bytes):
                if header.producer_id < 0:
                    continue
                for txn in self._replay_batch(segment, pos, header):
                    if index is not None:
                        index.append(txn)
        state.map_end_offset = self.log_end_offset

    def _replay_batch(self, segment: LogSegment, position: int, header: BatchHeader) -> list[AbortedTxn]:
        marker_of = _fixed_marker(segment.read_batch(position, header)) if header.is_control else None
        try:
            pending = self._producers.prepare([batch_info(position, header)], AppendOrigin.REPLICATION, marker_of)
        except LogError as exc:  # the leader accepted the batch once; a start-up must not fail on it
            log.warning("%s: producer state skips the batch at %d: %s", self.name, header.base_offset, exc)
            return []
        return self._producers.apply(pending, header.next_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, upper_bound_offset)`` (what a
        read_committed fetch of that range returns; Kafka ``collectAbortedTransactions``): the
        ``.txnindex`` of the segment holding ``start_offset`` and of later ones, until an entry's
        LSO reaches the upper bound (no later marker can then end an overlapping transaction).
        Nothing to look for at or after the newest ABORT marker."""
        if start_offset > self._last_abort_offset:
            return []
        found: list[AbortedTxn] = []
        for segment in self._segments[max(bisect_right(self._bases, start_offset) - 1, 0) :]:
            entries, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
            found.extend(entries)
            if complete:
                break
        return found


def _fixed_marker(control_batch: bytes) -> Callable[[BatchInfo], TxnMarker | None]:
    marker = parse_txn_marker(control_batch)
    return lambda _: marker
