"""Producer state of one partition: idempotence and transactions (KIP-98; Kafka ``ProducerStateManager``).

Kafka documentation §3.3 "Producer Configs", `enable.idempotence`: the broker keeps, per producer id (PID),
the sequence numbers of what it
stored; "unless a message's sequence number is exactly one more than the one the broker has, the
broker does not store it", and a retried message it already has is only acknowledged. Kafka documentation
§4.6 "Message Delivery Semantics": the producer "sends a sequence number with every message; the broker uses it to drop
duplicates", and transactions write all or nothing. Kafka 3.7's rules, per partition and PID:

* The state of a PID: its epoch, its last ``NUM_BATCHES_TO_RETAIN`` (5) batches (first and last
  sequence, first and last offset, timestamp), the coordinator epoch of its last transaction
  marker, and the first offset of its ongoing transaction (-1 when none).
* A client batch whose epoch and sequence range equal one of the 5 cached batches is a
  duplicate: it is acknowledged with the original offsets and not written again. Unlike Kafka
  3.7, a transactional batch that repeats a batch of a transaction already ended by a marker of
  the same epoch is no duplicate but out of sequence (OUT_OF_ORDER_SEQUENCE_NUMBER): librdkafka's
  ``abort_transaction`` can hand the sequence of a purged retry that had been written to the next
  transaction's record, which Kafka acknowledges with the aborted record's offset and so drops
  (docs/compatibility.md, "Idempotence and transactions on the partition").
* An epoch below the PID's is INVALID_PRODUCER_EPOCH (47) (clients and coordinator appends).
* Client batches only: with the PID's epoch, the first sequence must follow the last one
  (``last + 1``, or 0 after 2^31 - 1); a new, higher epoch must start at sequence 0; otherwise
  OUT_OF_ORDER_SEQUENCE_NUMBER (45). A PID the partition does not know (new, or expired) is
  accepted with any sequence (Kafka ≥ 2.5, KIP-360: the broker no longer answers
  UNKNOWN_PRODUCER_ID).
* Transactions: the first transactional batch of a PID starts its ongoing transaction at that
  batch's offset; a non-transactional batch while one is ongoing is INVALID_TXN_STATE (48). A
  COMMIT/ABORT marker ends it (an epoch below the PID's is INVALID_PRODUCER_EPOCH; a coordinator
  epoch below the last marker's is TRANSACTION_COORDINATOR_FENCED (52)); an aborted one goes to
  the segment's ``.txnindex`` with the partition's LSO after its marker (the first offset of the
  earliest *other* transaction still ongoing — including one that a later marker of the same
  append ends — else the marker's offset + 1). The last stable offset (LSO) is the first offset
  of the earliest ongoing transaction (``first_unstable_offset``), at least the log start offset
  and at most the high watermark (the log and the replica manager bound it).
* Replicated appends (``AppendOrigin.REPLICATION``, also used when the state is rebuilt from the
  log) are not checked, only applied.
* A PID expires ``producer.id.expiration.ms`` after its last batch or marker when it has no
  ongoing transaction (``remove_expired``, and when a snapshot is loaded, as Kafka's
  ``loadFromSnapshot``); retention deleting its batches does not remove it.
* A client append holds exactly one batch (``Log.append`` enforces Kafka's rule), so a duplicate
  is the whole append.

Checking is pure: ``prepare`` returns a ``ProducerAppend`` (the updated entries, the completed
transactions, or the duplicate) without changing the manager; ``apply`` installs it after the
batches were written. Snapshots (``<offset 20 digits>.snapshot``, the state of every offset below
``offset``) are taken when a segment rolls and on clean shutdown; see ``encode_snapshot``.
``rebuild`` loads the state from the log (start-up, truncation): the newest usable snapshot, then
the batch headers after it. The manager alone touches the snapshot files. Its ``Log`` owns it;
one asyncio loop calls it; it takes no lock.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import crc32c as _crc32c

from broker.log.errors import LogError
from broker.log.files import write_atomic, write_replace
from broker.log.scan import iter_headers
from broker.log.segment import LogSegment
from broker.log.segments import LogSegments
from broker.log.txn_index import AbortedTxn
from broker.log.validate import AppendOrigin, BatchInfo, batch_info
from pyspark_log.records.control import ControlType, EndTxnMarker, decode_control_batch
from pyspark_log.records.errors import RecordError
from pyspark_log.records.header import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1


class OutOfOrderSequenceError(LogError):
    """A client batch whose first sequence does not follow the producer's last one."""

    code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    """A batch or marker whose producer epoch is older than the one the partition has seen."""

    code = 47  # INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(LogError):
    """A non-transactional batch from a producer with an ongoing transaction."""

    code = 48  # INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    """A marker from a coordinator epoch older than the producer's last marker's."""

    code = 52  # TRANSACTION_COORDINATOR_FENCED


class BatchMetadata(NamedTuple):
    """One of a producer's cached batches: what a duplicate is acknowledged with."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class TxnMarker(NamedTuple):
    """What an end-transaction control batch says (read from its one record)."""

    commit: bool
    coordinator_epoch: int


def parse_txn_marker(buf: bytes | bytearray | memoryview, pos: int = 0) -> TxnMarker | None:
    """The COMMIT/ABORT marker of the control batch at ``pos`` (None for other control types or
    an unreadable batch, which Kafka ignores too)."""
    try:
        _, records = decode_control_batch(buf, pos, verify_crc=False)
    except RecordError:
        return None
    message = records[0].message if records else None
    if isinstance(message, EndTxnMarker):
        return TxnMarker(message.kind == ControlType.COMMIT, message.coordinator_epoch)
    return None


@dataclass(slots=True)
class ProducerStateEntry:
    """The state of one producer id in one partition; ``batches`` oldest first, at most 5."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: tuple[BatchMetadata, ...] = ()
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_OFFSET
    last_timestamp_ms: int = NO_TIMESTAMP

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this epoch and sequence range (Kafka ``findDuplicateBatch``)."""
        if epoch != self.producer_epoch:
            return None
        for cached in self.batches:
            if cached.first_seq == first_seq and cached.last_seq == last_seq:
                return cached
        return None

    def copy(self) -> ProducerStateEntry:
        # explicit: ``dataclasses.replace`` costs several times more on the produce path
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.batches,
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp_ms,
        )

    def update_epoch(self, epoch: int) -> None:
        """A new epoch forgets the batches of the old one."""
        if epoch != self.producer_epoch:
            self.batches = ()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, metadata: BatchMetadata) -> None:
        self.update_epoch(epoch)
        kept = self.batches if len(self.batches) < NUM_BATCHES_TO_RETAIN else self.batches[1:]
        self.batches = (*kept, metadata)
        self.last_timestamp_ms = metadata.timestamp_ms


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """``next_seq`` follows ``last_seq``: one more, or 0 after Int32.MAX_VALUE (sequences wrap)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppend:
    """The producer-state changes of one append, checked against the current entries without
    changing them (Kafka ``ProducerAppendInfo``, for all the PIDs of the append).

    ``duplicate`` is set (and nothing else) when a client batch repeats a cached one.
    ``started`` lists ``(first offset, PID)`` of the transactions the append begins.
    """

    __slots__ = ("_current", "completed", "duplicate", "origin", "started", "updated")

    def __init__(self, current: Mapping[int, ProducerStateEntry], origin: AppendOrigin) -> None:
        self._current = current
        self.origin = origin
        self.updated: dict[int, ProducerStateEntry] = {}
        self.completed: list[CompletedTxn] = []
        self.started: list[tuple[int, int]] = []
        self.duplicate: BatchMetadata | None = None

    def _entry(self, producer_id: int) -> ProducerStateEntry:
        entry = self.updated.get(producer_id)
        if entry is None:
            current = self._current.get(producer_id)
            entry = current.copy() if current is not None else ProducerStateEntry(producer_id)
            self.updated[producer_id] = entry
        return entry

    def _check_epoch(self, entry: ProducerStateEntry, epoch: int, offset: int) -> None:
        if epoch < entry.producer_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {entry.producer_id} at offset {offset} is older than "
                f"the last seen epoch {entry.producer_epoch}"
            )

    def _check_sequence(self, entry: ProducerStateEntry, epoch: int, first_seq: int, offset: int) -> None:
        pid = entry.producer_id
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"new epoch {epoch} of producer {pid} at offset {offset} starts at sequence {first_seq}, "
                    f"not 0 (current epoch {entry.producer_epoch})"
                )
            return
        current = self._current.get(pid)
        if current is None or current.producer_epoch == NO_PRODUCER_EPOCH:
            return  # an unknown producer (new, or its state expired): any sequence (KIP-360)
        if not in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence for producer {pid} at offset {offset}: {first_seq} does not "
                f"follow {entry.last_seq}"
            )

    def data_batch(self, batch: BatchInfo) -> None:
        """Check and record one data batch of a producer (Kafka ``appendDataBatch``)."""
        entry = self._entry(batch.producer_id)
        epoch = batch.producer_epoch
        self._check_epoch(entry, epoch, batch.base_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(entry, epoch, batch.base_sequence, batch.base_offset)
        entry.add_batch(
            epoch,
            BatchMetadata(
                batch.base_sequence, batch.last_sequence, batch.base_offset, batch.last_offset, batch.max_timestamp_ms
            ),
        )
        if entry.current_txn_first_offset >= 0:
            if not batch.is_transactional:
                raise InvalidTxnStateError(
                    f"producer {entry.producer_id} wrote a non-transactional batch at offset {batch.base_offset} "
                    f"during its transaction started at {entry.current_txn_first_offset}"
                )
        elif batch.is_transactional:
            entry.current_txn_first_offset = batch.base_offset
            self.started.append((batch.base_offset, entry.producer_id))

    def end_txn_marker(self, producer_id: int, epoch: int, offset: int, timestamp_ms: int, marker: TxnMarker) -> None:
        """Check and record a COMMIT/ABORT marker (Kafka ``appendEndTxnMarker``)."""
        entry = self._entry(producer_id)
        self._check_epoch(entry, epoch, offset)
        if entry.coordinator_epoch > marker.coordinator_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {producer_id} at offset {offset} has coordinator epoch "
                f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}"
            )
        if entry.current_txn_first_offset >= 0:
            self.completed.append(
                CompletedTxn(producer_id, entry.current_txn_first_offset, offset, is_aborted=not marker.commit)
            )
        entry.update_epoch(epoch)
        entry.current_txn_first_offset = NO_OFFSET
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp_ms = timestamp_ms


MarkerReader = Callable[[BatchInfo], TxnMarker | None]


def _ended_before(entry: ProducerStateEntry, cached: BatchMetadata, batch: BatchInfo) -> bool:
    """``batch`` repeats ``cached``, a batch of a transaction that a marker with the same epoch
    already ended: not a retry (a client ends a transaction only once its batches are answered),
    but a client that reused the sequence for a new transaction. See the module docstring."""
    return batch.is_transactional and (
        entry.current_txn_first_offset == NO_OFFSET or cached.first_offset < entry.current_txn_first_offset
    )


class ProducerStateManager:
    """Every producer's state in one partition log (``directory``), and its snapshot files.

    ``map_end_offset``: the state reflects every batch below it. ``producer_id_expiration_ms`` is
    ``producer.id.expiration.ms``.
    """

    def __init__(self, directory: Path, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # first offset -> PID of each ongoing transaction, kept in increasing offset order (Kafka's
        # sorted ``ongoingTxns``), so the first key is the first unstable offset. Keyed by offset:
        # one follower append may end a PID's transaction and start its next one.
        self._ongoing: dict[int, int] = {}
        self.map_end_offset = 0
        self.changed_since_snapshot = True

    # -- queries ---------------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest ongoing transaction (None when there is none)."""
        for first in self._ongoing:
            return first
        return None

    def ongoing_transactions(self) -> dict[int, int]:
        """PID -> first offset of each ongoing transaction (a copy)."""
        return {pid: first for first, pid in self._ongoing.items()}

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # -- appends ---------------------------------------------------------------------------------
    def prepare(
        self, batches: Sequence[BatchInfo], origin: AppendOrigin, marker_of: MarkerReader | None = None
    ) -> ProducerAppend:
        """Check the producer batches of one append (offsets assigned) without changing the state.

        Raises the errors of the module docstring. Batches without a producer id are skipped; a
        control batch is a marker when ``marker_of`` says so (else it only carries an epoch). A
        CLIENT append is one batch (a duplicate stands for the whole append).
        """
        assert origin is not AppendOrigin.CLIENT or len(batches) == 1, "a client append is one batch"
        pending = ProducerAppend(self.producers, origin)
        for batch in batches:
            pid = batch.producer_id
            if pid < 0:
                continue
            if batch.is_control:
                marker = marker_of(batch) if marker_of is not None else None
                if marker is not None:
                    pending.end_txn_marker(pid, batch.producer_epoch, batch.base_offset, batch.max_timestamp_ms, marker)
                continue
            if origin is AppendOrigin.CLIENT:
                cached = self.producers.get(pid)
                if cached is not None:
                    duplicate = cached.find_duplicate(batch.producer_epoch, batch.base_sequence, batch.last_sequence)
                    if duplicate is not None and not _ended_before(cached, duplicate, batch):
                        pending.duplicate = duplicate
                        return pending
            pending.data_batch(batch)
        return pending

    def apply(self, pending: ProducerAppend, next_offset: int) -> list[AbortedTxn]:
        """Install ``pending`` once its batches are written; ``next_offset`` is the new log end.
        Returns the transactions it aborted, each with the LSO that follows its marker (what the
        segment's ``.txnindex`` records)."""
        self.producers.update(pending.updated)
        if pending.started:
            self._add_ongoing(pending.started)
        # As Kafka's UnifiedLog.append: every transaction the append starts is ongoing first, then
        # each completed one in marker order gets its LSO (later-completed ones still count as
        # ongoing, so a read_committed fetch never stops before their index entry) and is removed.
        aborted: list[AbortedTxn] = []
        ongoing = self._ongoing
        for txn in pending.completed:
            if txn.is_aborted:
                lso = next((first for first in ongoing if first != txn.first_offset), txn.last_offset + 1)
                aborted.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            ongoing.pop(txn.first_offset, None)
        self.map_end_offset = max(self.map_end_offset, next_offset)
        self.changed_since_snapshot = True
        return aborted

    def _add_ongoing(self, started: list[tuple[int, int]]) -> None:
        """Add ``(first offset, PID)`` transactions, keeping ``_ongoing`` in offset order (an
        append's transactions start above every ongoing one; sorting covers anything else)."""
        ongoing = self._ongoing
        started.sort()
        in_order = not ongoing or next(reversed(ongoing)) < started[0][0]
        for first, pid in started:
            ongoing[first] = pid
        if not in_order:
            self._ongoing = dict(sorted(ongoing.items()))

    # -- rebuilding from the log -----------------------------------------------------------------
    def rebuild(
        self,
        segments: LogSegments,
        snapshot_limit: int,
        now_ms: int,
        rebuild_txn_indexes: Iterable[LogSegment] = (),
    ) -> None:
        """Load the state of the log made of ``segments`` (Kafka ``UnifiedLog.rebuildProducerState``,
        at start-up and after a truncation): drop the snapshots past the log end, load the newest
        one at or below ``snapshot_limit`` (the recovery loader passes the base of the first
        segment it re-validated, or the log end after a clean shutdown; a truncation the new log
        end) and replay the batch headers after it, unchecked (``AppendOrigin.REPLICATION``),
        reading only the one record of each control batch. ``rebuild_txn_indexes`` are segments
        whose ``.txnindex`` recovery emptied: the aborted transactions whose markers they hold
        are indexed again during the replay. Raises OSError when that indexing fails."""
        end = segments.next_offset
        self.delete_snapshots(lambda offset: offset > end)
        loaded = self.load_latest_snapshot(min(snapshot_limit, end), now_ms)
        start = max(loaded if loaded is not None else 0, segments.first.base_offset)
        rebuild = {id(segment) for segment in rebuild_txn_indexes}
        for segment in segments.from_offset(start):
            if segment.next_offset <= start:
                continue
            position = 0
            if start > segment.base_offset:
                found = segment.find_batch(start)
                if found is None:
                    continue
                position = found[0]
            for pos, header in iter_headers(segment.fd, position, segment.size_bytes):
                if header.producer_id < 0:
                    continue
                aborted = self._replay_batch(segment, pos, header)
                if aborted and id(segment) in rebuild:
                    segments.index_aborted(aborted, segment)
        self.map_end_offset = end

    def _replay_batch(self, segment: LogSegment, position: int, header: BatchHeader) -> list[AbortedTxn]:
        marker_of = _fixed_marker(segment.read_batch(position, header)) if header.is_control else None
        try:
            pending = self.prepare([batch_info(position, header)], AppendOrigin.REPLICATION, marker_of)
        except LogError as exc:  # the leader accepted the batch once; a start-up must not fail on it
            log.warning("%s: producer state skips the batch at %d: %s", self.directory.name, header.base_offset, exc)
            return []
        return self.apply(pending, header.next_offset)

    # -- expiry and truncation -----------------------------------------------------------------
    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """Idle for ``producer.id.expiration.ms`` without an ongoing transaction (Kafka
        ``isProducerExpired``)."""
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp_ms >= self.producer_id_expiration_ms

    def remove_expired(self, now_ms: int) -> int:
        """Forget expired producers (Kafka ``removeExpiredProducers``); returns how many."""
        doomed = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now_ms)]
        for pid in doomed:
            del self.producers[pid]
        if doomed:
            self.changed_since_snapshot = True
        return len(doomed)

    def reset(self, offset: int = 0) -> None:
        """Forget every producer; the state now stands at ``offset``."""
        self.producers = {}
        self._ongoing = {}
        self.map_end_offset = offset
        self.changed_since_snapshot = True

    # -- snapshots -------------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the directory, sorted."""
        found: list[int] = []
        for entry in os.scandir(self.directory):
            stem, dot, suffix = entry.name.partition(".")
            if dot and "." + suffix == SNAPSHOT_SUFFIX and len(stem) == 20 and stem.isdigit():
                found.append(int(stem))
        return sorted(found)

    def take_snapshot(self, offset: int, *, sync: bool = True) -> Path:
        """Write the state, which covers every offset below ``offset`` (the log end), durably:
        temp file, fsync, rename, directory fsync. ``sync=False`` (a roll on the event loop; Kafka
        ``takeSnapshot(false)``) leaves out both fsyncs: the caller makes the file durable before
        the log's recovery point reaches ``offset`` (a damaged file is skipped at load anyway)."""
        self.map_end_offset = offset
        path = self.snapshot_path(offset)
        data = encode_snapshot(self.producers.values())
        if sync:
            write_atomic(path, data)
        else:
            write_replace(path, data)
        self.changed_since_snapshot = False
        return path

    def has_snapshot_at(self, offset: int) -> bool:
        return self.snapshot_path(offset).exists()

    def load_latest_snapshot(self, max_offset: int, now_ms: int) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset``, without the producers expired
        at ``now_ms``; returns its offset, or None (state emptied) when there is none. A snapshot
        that fails its checks is deleted and the next older one is tried (Kafka does the same)."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            path = self.snapshot_path(offset)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (OSError, CorruptSnapshotError) as exc:
                log.warning("%s: ignoring producer snapshot: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            self._install((e for e in entries if not self.is_expired(e, now_ms)), offset)
            return offset
        self.reset()
        return None

    def _install(self, entries: Iterable[ProducerStateEntry], offset: int) -> None:
        self.producers = {entry.producer_id: entry for entry in entries}
        ongoing = ((e.current_txn_first_offset, pid) for pid, e in self.producers.items())
        self._ongoing = dict(sorted(item for item in ongoing if item[0] >= 0))
        self.map_end_offset = offset
        self.changed_since_snapshot = False

    def remove_stray_snapshots(self, segment_bases: Sequence[int]) -> int:
        """Start-up (Kafka ``removeStraySnapshots``): delete the snapshots not at a segment base
        (``segment_bases``, sorted; clean-shutdown ones), except the newest if it is above the last
        base. Returns how many were deleted."""
        bases = set(segment_bases)
        strays = [offset for offset in self.snapshot_offsets() if offset not in bases]
        if strays and strays[-1] > segment_bases[-1]:
            strays.pop()
        return self.delete_snapshots(set(strays).__contains__)

    def delete_snapshot(self, offset: int) -> None:
        """Delete the snapshot at ``offset`` if there is one (its segment is being deleted)."""
        self.snapshot_path(offset).unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> int:
        """Delete the snapshots below ``offset`` (the first segment's base after retention)."""
        return self.delete_snapshots(lambda snapshot: snapshot < offset)

    def delete_snapshots(self, predicate: Callable[[int], bool]) -> int:
        """Delete the snapshot files whose offset satisfies ``predicate``; returns how many."""
        doomed = [offset for offset in self.snapshot_offsets() if predicate(offset)]
        for offset in doomed:
            self.snapshot_path(offset).unlink(missing_ok=True)
        return len(doomed)


def _fixed_marker(control_batch: bytes) -> MarkerReader:
    marker = parse_txn_marker(control_batch)
    return lambda _: marker


# -- snapshot file format -----------------------------------------------------------------------
#
#   version   int16   1
#   crc       uint32  CRC-32C of every byte after this field
#   count     int32   producers
#   per producer: producerId int64, producerEpoch int16, coordinatorEpoch int32,
#                 currentTxnFirstOffset int64, lastTimestamp int64, batchCount int16 (0..5),
#                 then per batch (oldest first): firstSeq int32, lastSeq int32, firstOffset int64,
#                 lastOffset int64, timestamp int64
#
# Kafka's snapshot (also version 1, CRC-32C) keeps only each producer's last batch; this one keeps
# all five, so a retry of any in-flight batch is still found after a restart.

_PREFIX = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhiqqh")
_BATCH = struct.Struct(">iiqqq")


class CorruptSnapshotError(Exception):
    """A snapshot file that is short, has trailing bytes, an unknown version or a bad CRC."""


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray(_COUNT.size)
    count = 0
    for entry in entries:
        count += 1
        body += _PRODUCER.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
            entry.last_timestamp_ms,
            len(entry.batches),
        )
        for batch in entry.batches:
            body += _BATCH.pack(*batch)
    _COUNT.pack_into(body, 0, count)
    return _PREFIX.pack(SNAPSHOT_VERSION, _crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot; CorruptSnapshotError if it is not exactly one valid snapshot."""
    if len(data) < _PREFIX.size + _COUNT.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a snapshot")
    version, crc = _PREFIX.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    body = memoryview(data)[_PREFIX.size :]
    if _crc32c.crc32c(body) != crc:
        raise CorruptSnapshotError("CRC-32C mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    pos = _COUNT.size
    entries: list[ProducerStateEntry] = []
    try:
        for _ in range(count):
            pid, epoch, coordinator_epoch, txn_first, last_ts, batch_count = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            if not 0 <= batch_count <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"producer {pid} has {batch_count} batches")
            batches = []
            for _ in range(batch_count):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(ProducerStateEntry(pid, epoch, tuple(batches), coordinator_epoch, txn_first, last_ts))
    except struct.error as exc:
        raise CorruptSnapshotError(f"truncated snapshot: {exc}") from exc
    if pos != len(body) or count < 0:
        raise CorruptSnapshotError(f"{len(body) - pos} trailing bytes after {count} producers")
    return entries
