"""KIP-630 metadata snapshot files: naming, byte layout, atomic write, validated read.

A snapshot is the metadata image as of a log position, so a replica can start from it (or
fetch it with FetchSnapshot) instead of replaying the log from offset 0. Kafka names the file
after its snapshot id (KIP-630 "Snapshot Format")::

    <metadata log dir>/<endOffset, 20 digits>-<epoch, 10 digits>.checkpoint

``endOffset`` is exclusive (the snapshot holds everything below it) and ``epoch`` is the epoch
of the entry at ``endOffset - 1``. The file is a sequence of RecordBatch v2 (each with its
CRC-32C, as Kafka's ``RecordsSnapshotWriter`` writes them)::

    offset 0           control batch, one SnapshotHeader record  (control type 3:
                       version int16, lastContainedLogTimestamp int64, tagged fields)
    [offset 1          control batch, one KRaftVersionRecord (type 5, kraft.version 1) and
                       one VotersRecord (type 6): the voter set in effect at the snapshot's
                       end offset (KIP-853; only when the log had a VotersRecord)]
    then               data batches, up to ``max_batch_records`` records each; a record's
                       key is null and its value one metadata record (the same bytes as
                       the log entry's payload)
    last offset        control batch, one SnapshotFooter record  (control type 4)

Offsets inside the file are dense from 0 and every batch carries ``partitionLeaderEpoch`` =
the snapshot's epoch. A file missing its footer, with a bad CRC, a gap, or anything after
the footer is invalid (``CorruptSnapshotError``); ``load_newest_valid`` skips such a file
with a log line and falls back to the next older one.

Writing: ``<name>.checkpoint.part`` is written and fsynced, renamed to ``<name>.checkpoint``
and the directory fsynced (Kafka's ``.part`` suffix), so a crash leaves either no snapshot
or a whole one; ``.part`` leftovers are removed on load. This module is pure (codec and
policies); the file I/O (``write_snapshot``, ``load_newest_valid``, ...) is the store's
(``broker.raft.store``), and a driver calls it in an executor, never on the event loop.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.control import (
    ControlType,
    KRaftVersion,
    SnapshotFooter,
    SnapshotHeader,
    Voters,
    encode_control_batch,
    to_control_record,
)
from pyspark_log.records.errors import RecordError
from pyspark_log.records.header import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, read_header

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DEFAULT_MAX_BATCH_RECORDS = 1000
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class CorruptSnapshotError(ValueError):
    """The bytes are not a whole, valid KIP-630 snapshot (torn, bad CRC, bad framing)."""


@dataclass(frozen=True, order=True, slots=True)
class SnapshotId:
    """KIP-630 OffsetAndEpoch of a snapshot: ``end_offset`` exclusive, ``epoch`` of the last entry.

    Ordered by (end_offset, epoch): the newest snapshot is the max.
    """

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return snapshot_file_name(self)


def snapshot_file_name(snapshot_id: SnapshotId) -> str:
    """Kafka's file name: 20-digit end offset, dash, 10-digit epoch, ``.checkpoint``."""
    if snapshot_id.end_offset < 0 or snapshot_id.epoch < 0:
        raise ValueError(f"a snapshot id is non-negative, got {snapshot_id}")
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> SnapshotId | None:
    """The id in a snapshot file name, or None if ``name`` is not one (``.part`` files are not)."""
    match = _NAME.match(name)
    if match is None:
        return None
    return SnapshotId(int(match.group(1)), int(match.group(2)))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A decoded snapshot: its id, the header's timestamp, and the metadata records in order."""

    snapshot_id: SnapshotId
    last_contained_log_timestamp: int
    records: tuple[bytes, ...]
    voters: Voters | None = None  # KIP-853 VotersRecord in effect at the end offset


def encode_snapshot(
    snapshot_id: SnapshotId,
    records: Sequence[bytes],
    last_contained_log_timestamp: int,
    *,
    timestamp_ms: int,
    max_batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
    voters: Voters | None = None,
) -> bytes:
    """The file contents for ``records`` (layout in the module docstring). Pure and CPU-bound."""
    if max_batch_records < 1:
        raise ValueError("max_batch_records must be at least 1")
    epoch = snapshot_id.epoch
    parts = [
        encode_control_batch(
            ControlType.SNAPSHOT_HEADER,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            0,
            timestamp_ms,
            base_offset=0,
            message=SnapshotHeader(last_contained_log_timestamp),
            partition_leader_epoch=epoch,
        )
    ]
    offset = 1
    if voters is not None:
        parts.append(_voters_batch(voters, epoch, timestamp_ms))
        offset += 2
    for start in range(0, len(records), max_batch_records):
        chunk = records[start : start + max_batch_records]
        batch = [ProducerRecord(None, value, timestamp_ms) for value in chunk]
        parts.append(encode_batch(batch, base_offset=offset, partition_leader_epoch=epoch))
        offset += len(chunk)
    parts.append(
        encode_control_batch(
            ControlType.SNAPSHOT_FOOTER,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            0,
            timestamp_ms,
            base_offset=offset,
            message=SnapshotFooter(),
            partition_leader_epoch=epoch,
        )
    )
    return b"".join(parts)


def _voters_batch(voters: Voters, epoch: int, timestamp_ms: int) -> bytes:
    """KRaftVersionRecord then VotersRecord, one control batch at offset 1 (the control-batch
    codec writes one record per batch, so two batches at offsets 1 and 2)."""
    return encode_control_batch(
        ControlType.KRAFT_VERSION,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        0,
        timestamp_ms,
        base_offset=1,
        message=KRaftVersion(1),
        partition_leader_epoch=epoch,
    ) + encode_control_batch(
        ControlType.KRAFT_VOTERS,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        0,
        timestamp_ms,
        base_offset=2,
        message=voters,
        partition_leader_epoch=epoch,
    )


def decode_snapshot(snapshot_id: SnapshotId, data: bytes | memoryview) -> Snapshot:
    """Check and decode a whole snapshot file; CorruptSnapshotError on anything invalid.

    Checks every batch's CRC, dense offsets from 0, a SnapshotHeader first, a SnapshotFooter
    last and nothing after it.
    """
    view = memoryview(data)
    pos = 0
    expected_offset = 0
    header_timestamp: int | None = None
    records: list[bytes] = []
    voters: Voters | None = None
    footer_seen = False
    while pos < len(view):
        if footer_seen:
            raise CorruptSnapshotError(f"bytes after the SnapshotFooter at position {pos}")
        try:
            batch_header = read_header(view, pos)
            header, batch = decode_records(view, pos, max_decompressed_bytes=64 << 20)
        except (RecordError, ValueError) as exc:
            raise CorruptSnapshotError(f"batch at position {pos}: {exc}") from exc
        if header.base_offset != expected_offset or not batch:
            raise CorruptSnapshotError(
                f"batch at position {pos} starts at offset {header.base_offset}, expected {expected_offset}"
            )
        if header.is_control:
            for record in batch:
                control = to_control_record(record)
                if control.kind == ControlType.SNAPSHOT_HEADER and isinstance(control.message, SnapshotHeader):
                    if expected_offset != 0 or header_timestamp is not None:
                        raise CorruptSnapshotError("SnapshotHeader not at offset 0")
                    header_timestamp = control.message.last_contained_log_timestamp
                elif control.kind == ControlType.SNAPSHOT_FOOTER:
                    if header_timestamp is None:
                        raise CorruptSnapshotError("SnapshotFooter before a SnapshotHeader")
                    footer_seen = True
                elif control.kind == ControlType.KRAFT_VOTERS and isinstance(control.message, Voters):
                    if header_timestamp is None or records:
                        raise CorruptSnapshotError("VotersRecord outside the snapshot's control prefix")
                    voters = control.message
                elif control.kind == ControlType.KRAFT_VERSION:
                    if header_timestamp is None or records:
                        raise CorruptSnapshotError("KRaftVersionRecord outside the snapshot's control prefix")
                else:
                    raise CorruptSnapshotError(f"unexpected control record type {control.kind} in a snapshot")
        else:
            if header_timestamp is None:
                raise CorruptSnapshotError("data before the SnapshotHeader")
            for record in batch:
                if record.value is None:
                    raise CorruptSnapshotError(f"record {record.offset} has no value")
                records.append(bytes(record.value))
        expected_offset = header.base_offset + len(batch)
        pos += batch_header.size
    if header_timestamp is None or not footer_seen:
        raise CorruptSnapshotError("snapshot has no SnapshotFooter (partial file)")
    return Snapshot(snapshot_id, header_timestamp, tuple(records), voters)


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When to take a snapshot (Kafka's ``metadata.log.max.record.bytes.between.snapshots``,
    default 20 MiB, and ``metadata.log.max.snapshot.interval.ms``, default 1 h; 0 disables the
    time trigger). Pure: the caller supplies what it has appended and the clock.
    """

    max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    max_snapshot_interval_ms: int = 3_600_000

    def should_snapshot(self, bytes_since_snapshot: int, ms_since_snapshot: int, records_since_snapshot: int) -> bool:
        """True when a new snapshot is due; never when nothing was appended since the last one."""
        if records_since_snapshot <= 0:
            return False
        if bytes_since_snapshot >= self.max_record_bytes_between_snapshots:
            return True
        return self.max_snapshot_interval_ms > 0 and ms_since_snapshot >= self.max_snapshot_interval_ms


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How much metadata log to keep below the newest snapshot (Kafka's
    ``metadata.max.retention.bytes``, default 100 MiB, and ``metadata.max.retention.ms``,
    default 7 days; -1 disables a limit).

    Kafka (``KafkaMetadataLog``) deletes the log prefix only below a snapshot, so a replica can
    always rebuild the image from the newest snapshot plus the tail; the prefix goes when either
    limit is exceeded. Pure: the caller supplies sizes, timestamps and the clock.
    """

    max_retention_bytes: int = 100 * 1024 * 1024
    max_retention_ms: int = 7 * 24 * 3_600_000

    def new_log_start_offset(
        self,
        *,
        log_start_offset: int,
        snapshot_end_offset: int | None,
        high_watermark: int,
        retained_bytes: int,
        oldest_entry_timestamp_ms: int | None,
        now_ms: int,
        voter_fetch_offsets: Sequence[int] = (),
        snapshots_servable: bool = True,
        prefix_has_readers: bool = True,
    ) -> int:
        """The log start offset after a retention pass (``log_start_offset`` if nothing goes).

        The prefix below the newest snapshot is dropped whole when the retained log exceeds
        ``max_retention_bytes`` or its oldest entry is older than ``max_retention_ms``. Never
        past the high watermark (KIP-630: only committed data is snapshotted), and, when
        ``snapshots_servable`` is False (no FetchSnapshot to send a lagging replica), never past
        the lowest fetch offset of a voter that still needs the log.

        ``prefix_has_readers`` False (an observer: no replica fetches its log): the prefix goes
        as soon as a snapshot covers it, unless both limits are off (-1). Both limits are maxima (Kafka documents
        ``metadata.max.retention.bytes`` as *the maximum combined size of the metadata log and
        snapshots before deleting old snapshots and log files*), and pylog's replica holds its
        log in memory and scans it at start-up, so a prefix nobody reads only costs memory and
        restart time.
        """
        if snapshot_end_offset is None or snapshot_end_offset <= log_start_offset:
            return log_start_offset
        if not prefix_has_readers and (self.max_retention_bytes >= 0 or self.max_retention_ms >= 0):
            return max(log_start_offset, min(snapshot_end_offset, high_watermark))
        too_big = 0 <= self.max_retention_bytes < retained_bytes
        too_old = (
            self.max_retention_ms >= 0
            and oldest_entry_timestamp_ms is not None
            and now_ms - oldest_entry_timestamp_ms > self.max_retention_ms
        )
        if not (too_big or too_old):
            return log_start_offset
        limit = min(snapshot_end_offset, high_watermark)
        if not snapshots_servable and voter_fetch_offsets:
            limit = min(limit, *voter_fetch_offsets)
        return max(log_start_offset, limit)


__all__ = [
    "CorruptSnapshotError",
    "RetentionPolicy",
    "Snapshot",
    "SnapshotId",
    "SnapshotPolicy",
    "decode_snapshot",
    "encode_snapshot",
    "parse_snapshot_file_name",
    "snapshot_file_name",
]
