"""What a Raft replica keeps on disk: the ``quorum-state`` file and the metadata log.

Both live in the metadata directory ``<first log dir>/__cluster_metadata-0`` (Kafka's layout).

``quorum-state`` (KIP-595 "Quorum State", Kafka's ``QuorumStateData`` JSON)::

    {"clusterId": "...", "leaderId": 1, "leaderEpoch": 5, "votedId": -1, "appliedOffset": 42,
     "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0}

It is replaced atomically (write a temp file, fsync, rename over, fsync the directory): a crash
leaves either the old or the new contents, never a mix, so a vote once written is never lost and
never granted twice in an epoch (the driver writes it before the VoteResponse leaves).

The metadata log ``00000000000000000000.log``: one RecordBatch v2 per Raft entry, back to back,
``baseOffset`` = the entry's offset and ``partitionLeaderEpoch`` = its epoch. A data entry is a
batch of one record whose value is the payload; the KIP-595 LeaderChange entry is a control batch
of type LEADER_CHANGE (Kafka's 2, ``pyspark_log.records.control``). The same bytes travel in Fetch
responses. Every append and truncation is fsynced (KIP-595: *fsync on every append to the
metadata log*); on open, the file is scanned and cut at the first batch that is torn (a crash in
mid-write), fails its CRC, or breaks the log's rules (dense offsets, epochs > 0 that never go
down).

Why not ``broker.log.Log``: the Raft core holds the whole log in memory and needs to cut it at any
entry; segments, indexes, retention and offset assignment would be unused weight, and the fsync
policy differs. One file keeps recovery and truncation obvious. KIP-630: once a snapshot covers a
prefix, ``delete_prefix`` replaces the file by ``<new start offset, 20 digits>.log`` holding only
the tail (written whole and fsynced before the old file is removed; on open, the file with the
highest base offset wins and older ones are leftovers of an interrupted replacement).
Not thread-safe: one driver owns a store and calls it from one thread at a time.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from broker.log.files import fsync_dir, write_atomic
from broker.raft.effects import QuorumStateData
from broker.raft.log import Entry, LeaderChange, VoterSpec, VotersRecord
from broker.raft.snapshot import (
    PARTIAL_SUFFIX,
    SNAPSHOT_SUFFIX,
    CorruptSnapshotError,
    Snapshot,
    SnapshotId,
    decode_snapshot,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.control import ControlType, Endpoint, Voter, Voters, encode_control_batch, to_control_record
from pyspark_log.records.control import LeaderChange as LeaderChangeMessage
from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.header import HEADER_SIZE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, check_batch, read_header

log = logging.getLogger(__name__)

QUORUM_STATE_FILE = "quorum-state"
LOG_FILE = "00000000000000000000.log"
LOG_SUFFIX = ".log"


def log_file_name(base_offset: int) -> str:
    """Kafka's segment naming: the base offset in 20 digits, ``.log``."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def _log_base_offset(name: str) -> int | None:
    stem = name[: -len(LOG_SUFFIX)] if name.endswith(LOG_SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


DATA_VERSION = 0


class StoreError(RuntimeError):
    """The metadata directory cannot be used (unreadable quorum state, another cluster, ...)."""


# -- entries as record batches -------------------------------------------------------------------


CONTROLLER_LISTENER = "CONTROLLER"  # the endpoint name recorded for a voter (Kafka's default listener)


def encode_entry(entry: Entry, timestamp_ms: int) -> bytes:
    """One entry as one batch (a LeaderChange as a control batch)."""
    if isinstance(entry.payload, LeaderChange):
        change = entry.payload
        return encode_control_batch(
            ControlType.LEADER_CHANGE,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            0,
            timestamp_ms,
            base_offset=entry.offset,
            message=LeaderChangeMessage(change.leader_id, change.voters, change.granting_voters),
            partition_leader_epoch=entry.epoch,
        )
    if isinstance(entry.payload, VotersRecord):
        # KIP-853 VotersRecord (control type KRAFT_VOTERS = 6), version 0 as Kafka 4.1 writes it.
        voters = tuple(
            Voter(v.voter_id, v.directory_id, (Endpoint(CONTROLLER_LISTENER, v.host, v.port),) if v.port else (), 0, 1)
            for v in entry.payload.voters
        )
        return encode_control_batch(
            ControlType.KRAFT_VOTERS,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            0,
            timestamp_ms,
            base_offset=entry.offset,
            message=Voters(voters, 0),
            partition_leader_epoch=entry.epoch,
        )
    record = ProducerRecord(None, entry.payload, timestamp_ms)
    return encode_batch([record], base_offset=entry.offset, partition_leader_epoch=entry.epoch)


def voters_to_control(record: VotersRecord) -> Voters:
    """A KIP-853 VotersRecord as the control message Kafka writes (version 0)."""
    return Voters(
        tuple(
            Voter(v.voter_id, v.directory_id, (Endpoint(CONTROLLER_LISTENER, v.host, v.port),) if v.port else (), 0, 1)
            for v in record.voters
        ),
        0,
    )


def voters_from_control(message: Voters) -> VotersRecord:
    """The control message back as the core's VotersRecord (first endpoint of each voter)."""
    specs = []
    for voter in message.voters:
        endpoint = voter.endpoints[0] if voter.endpoints else Endpoint("", "", 0)
        specs.append(VoterSpec(voter.voter_id, bytes(voter.directory_id), endpoint.host, endpoint.port))
    return VotersRecord(tuple(specs))


def encode_entries(entries: Iterable[Entry], timestamp_ms: int) -> bytes:
    return b"".join(encode_entry(entry, timestamp_ms) for entry in entries)


def decode_entry(buf: bytes | memoryview, pos: int = 0, *, verify_crc: bool = True) -> tuple[Entry, int]:
    """The entry whose batch starts at ``pos`` and the position after it (``verify_crc`` False:
    the caller checked the batch already).

    Raises CorruptRecordError for a torn or corrupt batch, or one that is not a Raft entry (more
    than one record, an unknown control type)."""
    header, records = decode_records(buf, pos, max_decompressed_bytes=64 << 20, verify_crc=verify_crc)
    if len(records) != 1:
        raise CorruptRecordError(f"metadata batch at offset {header.base_offset} holds {len(records)} records, not 1")
    record = records[0]
    payload: bytes | LeaderChange | VotersRecord
    if header.is_control:
        control = to_control_record(record)
        message = control.message
        if isinstance(message, Voters):
            specs = []
            for voter in message.voters:
                endpoint = voter.endpoints[0] if voter.endpoints else Endpoint("", "", 0)
                specs.append(VoterSpec(voter.voter_id, bytes(voter.directory_id), endpoint.host, endpoint.port))
            payload = VotersRecord(tuple(specs))
            return Entry(header.base_offset, header.partition_leader_epoch, payload), pos + header.size
        if not isinstance(message, LeaderChangeMessage):
            raise CorruptRecordError(f"metadata control batch at offset {header.base_offset} has type {control.kind}")
        payload = LeaderChange(message.leader_id, tuple(message.voters), tuple(message.granting_voters))
    else:
        payload = bytes(record.value) if record.value is not None else b""
    return Entry(header.base_offset, header.partition_leader_epoch, payload), pos + header.size


def decode_entries(buf: bytes | memoryview) -> list[tuple[Entry, bytes]]:
    """Every entry of a Fetch response's records with its batch bytes (a partial trailing batch
    is ignored); CorruptRecordError for a corrupt one."""
    entries: list[tuple[Entry, bytes]] = []
    view = memoryview(buf)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        if len(view) - pos < read_header(view, pos).size:
            break
        entry, end = decode_entry(view, pos)
        entries.append((entry, bytes(view[pos:end])))
        pos = end
    return entries


# -- quorum-state ---------------------------------------------------------------------------------


class QuorumStateFile:
    """The ``quorum-state`` file: ``read()`` at start-up, ``write()`` on every transition."""

    def __init__(self, directory: Path, cluster_id: str | None) -> None:
        self.path = directory / QUORUM_STATE_FILE
        self.cluster_id = cluster_id

    def read(self) -> QuorumStateData | None:
        """The stored state, or None if there is no file yet (a new replica).

        Raises StoreError for an unreadable file or one of another cluster: starting over from
        epoch 0 could grant a second vote in an epoch, so the broker must not guess."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        try:
            data = json.loads(text)
            state = _state_from_json(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"{self.path} is not a valid quorum-state file ({exc}); restore it or move it away"
            ) from exc
        stored_cluster = data.get("clusterId") or None
        if stored_cluster and self.cluster_id and stored_cluster != self.cluster_id:
            raise StoreError(f"{self.path} belongs to cluster {stored_cluster!r}, this node is in {self.cluster_id!r}")
        return state

    def write(self, state: QuorumStateData) -> None:
        """Replace the file atomically and durably (temp file, fsync, rename, fsync dir)."""
        body = {
            "clusterId": self.cluster_id or "",
            "leaderId": state.leader_id,
            "leaderEpoch": state.leader_epoch,
            "votedId": state.voted_id,
            "appliedOffset": state.applied_offset,
            "currentVoters": [{"voterId": voter} for voter in state.current_voters],
            "data_version": DATA_VERSION,
        }
        write_atomic(self.path, json.dumps(body, separators=(",", ":")).encode())


def _state_from_json(data: Any) -> QuorumStateData:
    if not isinstance(data, dict):
        raise TypeError("not a JSON object")
    version = data.get("data_version", DATA_VERSION)
    if version != DATA_VERSION:
        raise ValueError(f"data_version {version} is not {DATA_VERSION}")

    def integer(name: str) -> int:
        value = data[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is not an integer")
        return value

    voters = tuple(sorted(int(v["voterId"]) for v in data["currentVoters"]))
    state = QuorumStateData(
        integer("leaderId"), integer("leaderEpoch"), integer("votedId"), integer("appliedOffset"), voters
    )
    if state.leader_epoch < 0:
        raise ValueError(f"leaderEpoch {state.leader_epoch} is negative")
    return state


# -- the metadata log -----------------------------------------------------------------------------


class MetadataLog:
    """The durable metadata log: ``open()`` (recovers), ``append``, ``truncate``, ``flush``.

    ``append`` writes the batches; ``flush`` makes every byte written so far durable (the core
    asks for it after each append, ``FlushLog``). ``truncate`` cuts and fsyncs at once.
    """

    def __init__(self, directory: Path, clock_ms: Callable[[], int]) -> None:
        self.directory = directory
        self.path = directory / LOG_FILE
        self._clock_ms = clock_ms
        self._fd = -1
        self.start_offset = 0  # KIP-630 log start offset: the base offset of the file
        self._positions: list[int] = []  # file position of each entry, by offset - start_offset
        self._end = 0  # file size in use
        self.recovered_bytes_dropped = 0

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self._positions)

    def open(self) -> list[Entry]:
        """Open (creating if needed), cut a torn or corrupt tail, and return the entries (from
        ``start_offset``, the base offset of the newest log file)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        bases = sorted(b for b in (_log_base_offset(p.name) for p in self.directory.iterdir()) if b is not None)
        self.start_offset = bases[-1] if bases else 0
        self.path = self.directory / log_file_name(self.start_offset)
        for stale in bases[:-1]:
            log.info("metadata log: removing %s (replaced by %s)", log_file_name(stale), self.path.name)
            (self.directory / log_file_name(stale)).unlink(missing_ok=True)
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if created or len(bases) > 1:
            fsync_dir(self.directory)
        with open(self.path, "rb") as f:
            data = f.read()
        entries, valid_end = _scan(data, self.start_offset)
        self._positions = []
        pos = 0
        for _ in entries:
            self._positions.append(pos)
            pos += read_header(data, pos).size
        self._end = valid_end
        if valid_end < len(data):
            self.recovered_bytes_dropped = len(data) - valid_end
            log.warning(
                "metadata log %s: dropped %d bytes after offset %d (torn or corrupt tail)",
                self.path,
                self.recovered_bytes_dropped,
                self.start_offset + len(entries),
            )
            os.ftruncate(self._fd, valid_end)
            os.fsync(self._fd)
        return entries

    def delete_prefix(self, start_offset: int) -> None:
        """KIP-630: remove every entry below ``start_offset`` (covered by a snapshot), durably.

        The tail is written to ``<start_offset>.log`` (temp file, fsync, rename, fsync dir), then
        the old file is removed. ``start_offset`` beyond the log end leaves an empty log that
        continues at ``start_offset`` (a replica that installed a fetched snapshot)."""
        if start_offset <= self.start_offset:
            return
        keep_from = min(start_offset, self.end_offset)
        tail = self.read_bytes(keep_from) if keep_from < self.end_offset else b""
        first = self._positions[keep_from - self.start_offset] if keep_from < self.end_offset else self._end
        new_path = self.directory / log_file_name(start_offset)
        write_atomic(new_path, tail)
        old_path, old_fd = self.path, self._fd
        self._fd = os.open(new_path, os.O_RDWR, 0o644)
        os.close(old_fd)
        old_path.unlink(missing_ok=True)
        fsync_dir(self.directory)
        self._positions = [p - first for p in self._positions[keep_from - self.start_offset :]]
        self._end -= first
        self.path = new_path
        self.start_offset = start_offset

    def first_timestamp_ms(self) -> int | None:
        """The max timestamp of the first batch in the log (None for an empty log): the age
        ``metadata.max.retention.ms`` is measured against."""
        if not self._positions:
            return None
        return read_header(os.pread(self._fd, HEADER_SIZE, self._positions[0]), 0).max_timestamp

    def size_bytes(self) -> int:
        """Bytes of the log file in use (for ``metadata.max.retention.bytes``)."""
        return self._end

    def append(self, entries: Sequence[Entry], batches: Mapping[tuple[int, int], bytes] | None = None) -> None:
        """Write ``entries`` (not yet durable: ``flush``). ``batches`` may hold the batch bytes
        a leader sent for ``(offset, epoch)``, kept as they are so replicas store the same bytes."""
        if not entries:
            return
        if entries[0].offset != self.end_offset:
            raise StoreError(f"metadata log append at {entries[0].offset}, log end offset is {self.end_offset}")
        now_ms = self._clock_ms()
        for entry in entries:
            data = (batches or {}).get((entry.offset, entry.epoch)) or encode_entry(entry, now_ms)
            view = memoryview(data)
            pos = self._end
            while view:
                written = os.pwrite(self._fd, view, pos)
                view, pos = view[written:], pos + written
            self._positions.append(self._end)
            self._end += len(data)

    def truncate(self, end_offset: int) -> None:
        """Remove every entry at ``end_offset`` or above, durably."""
        if not self.start_offset <= end_offset <= self.end_offset:
            bounds = f"[{self.start_offset}, {self.end_offset}]"
            raise StoreError(f"metadata log truncation to {end_offset} outside {bounds}")
        if end_offset == self.end_offset:
            return
        self._end = self._positions[end_offset - self.start_offset]
        del self._positions[end_offset - self.start_offset :]
        os.ftruncate(self._fd, self._end)
        os.fsync(self._fd)

    def flush(self) -> None:
        os.fsync(self._fd)

    def read_bytes(self, start_offset: int = 0, end_offset: int | None = None) -> bytes:
        """The stored batches of entries ``[start_offset, end_offset)`` (default: to the end)."""
        end_offset = self.end_offset if end_offset is None else end_offset
        base = self.start_offset
        if not base <= start_offset <= end_offset <= self.end_offset:
            raise StoreError(f"metadata log read of [{start_offset}, {end_offset}) outside [{base}, {self.end_offset}]")
        if start_offset == end_offset:
            return b""
        first = self._positions[start_offset - base]
        last = self._positions[end_offset - base] if end_offset < self.end_offset else self._end
        return os.pread(self._fd, last - first, first)

    def read_batches(self, entries: Sequence[Entry]) -> bytes:
        """The stored batches of ``entries`` (consecutive, as a Fetch response holds them).

        StoreError if the file no longer holds exactly these entries (a truncation since they
        were read from memory, or a list with gaps): every batch's base offset and leader epoch
        is checked against its entry."""
        if not entries:
            return b""
        data = self.read_bytes(entries[0].offset, entries[-1].offset + 1)
        pos = 0
        for entry in entries:
            header = read_header(data, pos) if len(data) - pos >= HEADER_SIZE else None
            if header is None or (header.base_offset, header.partition_leader_epoch) != (entry.offset, entry.epoch):
                raise StoreError(f"metadata log no longer holds entry {entry.offset} of epoch {entry.epoch}")
            pos += header.size
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _scan(data: bytes, base_offset: int = 0) -> tuple[list[Entry], int]:
    """The valid prefix of a log file starting at ``base_offset``: its entries and its length."""
    entries: list[Entry] = []
    pos = 0
    last_epoch = 0
    while len(data) - pos >= HEADER_SIZE:
        try:
            header = check_batch(data, pos)
            entry, end = decode_entry(data, pos, verify_crc=False)  # checked just above
        except CorruptRecordError:
            break
        if header.base_offset != base_offset + len(entries) or entry.epoch <= 0 or entry.epoch < last_epoch:
            break
        entries.append(entry)
        last_epoch = entry.epoch
        pos = end
    return entries, pos


# -- KIP-630 snapshot files (layout in broker.raft.snapshot) ---------------------------------------


def write_snapshot(directory: Path, snapshot_id: SnapshotId, data: bytes) -> Path:
    """Write ``data`` as snapshot ``snapshot_id`` atomically (``.part``, fsync, rename, fsync dir).

    Blocking: call it off the event loop. Returns the final path.
    """
    final = directory / snapshot_file_name(snapshot_id)
    partial = directory / (final.name[: -len(SNAPSHOT_SUFFIX)] + PARTIAL_SUFFIX)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, final)
    fsync_dir(directory)
    return final


def list_snapshots(directory: Path) -> list[SnapshotId]:
    """Ids of the ``.checkpoint`` files in ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    ids = [parse_snapshot_file_name(entry.name) for entry in directory.iterdir()]
    return sorted(i for i in ids if i is not None)


def load_newest_valid(directory: Path) -> Snapshot | None:
    """The newest snapshot that decodes whole; invalid ones are skipped with a warning.

    Removes ``.checkpoint.part`` leftovers of a write that a crash interrupted.
    """
    if not directory.is_dir():
        return None
    for entry in directory.iterdir():
        if entry.name.endswith(PARTIAL_SUFFIX):
            log.info("removing partial snapshot %s", entry)
            entry.unlink(missing_ok=True)
    for snapshot_id in reversed(list_snapshots(directory)):
        path = directory / snapshot_file_name(snapshot_id)
        try:
            return decode_snapshot(snapshot_id, path.read_bytes())
        except (CorruptSnapshotError, OSError) as exc:
            log.warning("skipping invalid snapshot %s: %s", path, exc)
    return None


def delete_snapshots_before(directory: Path, keep: SnapshotId) -> list[SnapshotId]:
    """Remove snapshot files older than ``keep`` (KIP-630: only the newest one is needed)."""
    removed = [i for i in list_snapshots(directory) if i < keep]
    for snapshot_id in removed:
        (directory / snapshot_file_name(snapshot_id)).unlink(missing_ok=True)
    if removed:
        fsync_dir(directory)
    return removed
