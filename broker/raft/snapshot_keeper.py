"""``SnapshotKeeper``: one metadata-log replica's KIP-630 snapshot files, kept for ``RaftDriver``.

KIP-630 "Kafka Raft Snapshot": a state machine above the log registers ``set_handler(capture,
load)``. After committed entries are delivered, once ``metadata.log.max.record.bytes.between.snapshots``
bytes were delivered or ``metadata.log.max.snapshot.interval.ms`` passed since the last snapshot
(``SnapshotPolicy``), ``maybe_start`` ``capture``s the state as of the delivered offset (which is
<= the high watermark: only committed data is snapshotted) on the loop, and encodes and writes the
snapshot file in an executor (``broker.raft.store.write_snapshot``: ``.part``, fsync, rename),
one at a time. Once it is durable the driver tells the core (``created``), and the retention pass
(``metadata.max.retention.bytes/ms``, ``RetentionPolicy``: ``retention_start``) may delete the
log below it and older snapshot files (``delete_old``); the newest snapshot is never deleted; an
observer, whose log no replica fetches, drops the prefix as soon as a snapshot covers it. The
snapshot carries the VotersRecord in effect at its end offset (KIP-853).

A replica behind the leader's log start gets a snapshot with FetchSnapshot: the leader's keeper
serves its file in chunks (``read_chunk``), the follower's writes the fetched one and loads it
(``install``). A clean stop with at least ``SHUTDOWN_SNAPSHOT_MIN_BYTES`` applied since the newest
snapshot writes one more (``at_shutdown``, a pylog addition), so the next start replays almost no
tail.

The keeper owns the files and the counters; the core (``RaftCore``) stays the judge of offsets and
epochs, and the driver executes what the core returns.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from broker.raft.core import RaftCore
from broker.raft.effects import InstallSnapshot
from broker.raft.messages import ErrorCode, FetchSnapshotResponse
from broker.raft.snapshot import (
    RetentionPolicy,
    SnapshotId,
    SnapshotPolicy,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)
from broker.raft.store import MetadataLog, delete_snapshots_before, list_snapshots, voters_to_control, write_snapshot

log = logging.getLogger(__name__)

SnapshotCapture = Callable[[], Callable[[], list[bytes]]]  # on the loop; the thunk runs in an executor
SnapshotLoad = Callable[[int, Sequence[bytes]], None]  # (end offset, records)
# a clean stop writes a snapshot when at least this much was applied since the newest one: a
# smaller tail replays in a few tens of milliseconds
SHUTDOWN_SNAPSHOT_MIN_BYTES = 1 << 20


class SnapshotKeeper:
    """The snapshot files of the metadata log in ``metadata_dir`` (module docstring)."""

    def __init__(
        self,
        metadata_dir: Path,
        metadata_log: MetadataLog,
        node_id: int,
        clock_ms: Callable[[], int],
        *,
        snapshot_policy: SnapshotPolicy | None = None,
        retention_policy: RetentionPolicy | None = None,
    ) -> None:
        self.metadata_dir = metadata_dir
        self._log = metadata_log
        self._node_id = node_id
        self._clock_ms = clock_ms
        self._policy = snapshot_policy or SnapshotPolicy()
        self._retention = retention_policy or RetentionPolicy()
        self._capture: SnapshotCapture | None = None
        self._load: SnapshotLoad | None = None
        self._task: asyncio.Task[None] | None = None
        self._bytes_since = 0
        self._records_since = 0
        self._last_ms = clock_ms()
        self.written = 0

    def set_handler(self, capture: SnapshotCapture, load: SnapshotLoad) -> None:
        """``capture()`` returns, on the loop, a thunk that encodes the state as of every entry
        delivered so far into snapshot records (it runs in an executor, so it must only read what
        ``capture`` froze); ``load(end_offset, records)`` replaces the state by a snapshot's."""
        self._capture = capture
        self._load = load

    def load(self, end_offset: int, records: Sequence[bytes]) -> None:
        """Hand a snapshot's records to the state machine (at start-up)."""
        if self._load is not None:
            self._load(end_offset, records)

    def delivered(self, payload_bytes: int) -> None:
        """One committed data entry was delivered to the state machine."""
        self._bytes_since += payload_bytes
        self._records_since += 1

    # -- serving and installing a fetched snapshot (FetchSnapshot) ----------------------------------
    def read_chunk(self, message: FetchSnapshotResponse) -> FetchSnapshotResponse:
        """Up to ``max_bytes`` of the snapshot file from ``position`` (a pread of at most
        ``FETCH_SNAPSHOT_MAX_BYTES`` on the loop, like a Fetch's log read); SNAPSHOT_NOT_FOUND
        when the file is gone, POSITION_OUT_OF_RANGE past its end."""
        path = self.metadata_dir / snapshot_file_name(message.snapshot_id)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if message.position > size:
                    return replace(message, error_code=ErrorCode.POSITION_OUT_OF_RANGE)
                data = os.pread(f.fileno(), message.max_bytes, message.position)
        except FileNotFoundError:
            return replace(message, error_code=ErrorCode.SNAPSHOT_NOT_FOUND)
        return replace(message, size=size, data=data)

    def install(self, effect: InstallSnapshot, delivered: int) -> int:
        """Write a snapshot fetched from the leader, start the log at its end, and load it into
        the state machine unless ``delivered`` is already past it; returns the delivered offset
        after it. Blocking, on the loop: it happens only when this replica fell behind the
        leader's log start."""
        snapshot_id = effect.snapshot_id
        write_snapshot(self.metadata_dir, snapshot_id, effect.data)
        self._log.delete_prefix(snapshot_id.end_offset)
        if delivered < snapshot_id.end_offset:
            self.load(snapshot_id.end_offset, decode_snapshot(snapshot_id, effect.data).records)
            delivered = snapshot_id.end_offset
        self._bytes_since = 0
        self._records_since = 0
        self.delete_old()
        log.info("raft: node %d installed snapshot %s fetched from the leader", self._node_id, snapshot_id)
        return delivered

    # -- writing snapshots -------------------------------------------------------------------------
    def maybe_start(self, core: RaftCore, delivered: int, on_written: Callable[[SnapshotId], None]) -> None:
        """Start writing a snapshot at ``delivered`` when the policy says one is due (one at a
        time); ``on_written(snapshot_id)`` once the file is durable (a failed write is logged
        and retried at the next trigger)."""
        if self._capture is None or self._task is not None:
            return
        due = self._policy.should_snapshot(self._bytes_since, self._clock_ms() - self._last_ms, self._records_since)
        write = self._writer(core, delivered) if due else None
        if write is None:
            return
        snapshot_id, thunk = write

        async def run() -> None:
            try:
                await asyncio.get_running_loop().run_in_executor(None, thunk)
            except Exception:
                log.exception("raft: writing snapshot %s failed", snapshot_id)
            else:
                on_written(snapshot_id)
            finally:
                self._task = None

        self._task = asyncio.create_task(run(), name="raft-snapshot")

    def _writer(self, core: RaftCore, delivered: int) -> tuple[SnapshotId, Callable[[], None]] | None:
        """Capture the state as of ``delivered`` (on the loop) and return the snapshot's id with
        the thunk that encodes and writes it (for an executor); None when ``delivered`` is not
        past both the log start and the newest snapshot."""
        assert self._capture is not None
        latest = core.latest_snapshot
        if delivered <= core.log.start_offset or (latest is not None and delivered <= latest.end_offset):
            return None
        now_ms = self._clock_ms()
        snapshot_id = core.snapshot_id_at(delivered)
        voters = core.snapshot_voters(delivered)
        control = voters_to_control(voters) if voters is not None else None
        encode = self._capture()
        self._bytes_since = 0
        self._records_since = 0
        self._last_ms = now_ms
        directory = self.metadata_dir

        def write() -> None:
            data = encode_snapshot(snapshot_id, encode(), now_ms, timestamp_ms=now_ms, voters=control)
            write_snapshot(directory, snapshot_id, data)

        return snapshot_id, write

    def created(self, core: RaftCore, snapshot_id: SnapshotId) -> None:
        """The snapshot file is durable: the core learns of it."""
        core.snapshot_created(snapshot_id)
        self.written += 1
        log.info("raft: node %d wrote snapshot %s", self._node_id, snapshot_id)

    async def finish(self) -> None:
        """Wait for a snapshot being written (a crash would leave only a ``.part`` file)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def at_shutdown(self, core: RaftCore, delivered: int) -> None:
        """A clean stop: after the snapshot being written, one more at ``delivered`` when at least
        ``SHUTDOWN_SNAPSHOT_MIN_BYTES`` were applied since the newest (Kafka's nodes do not;
        docs/compatibility.md). Called once nothing is delivered any more."""
        await self.finish()
        if self._capture is None or self._bytes_since < SHUTDOWN_SNAPSHOT_MIN_BYTES:
            return
        write = self._writer(core, delivered)
        if write is None:
            return
        snapshot_id, thunk = write
        try:
            await asyncio.get_running_loop().run_in_executor(None, thunk)
        except Exception:  # the next start replays the tail instead
            log.exception("raft: writing snapshot %s at shutdown failed", snapshot_id)
            return
        self.written += 1
        log.info("raft: node %d wrote snapshot %s at shutdown", self._node_id, snapshot_id)

    # -- retention ---------------------------------------------------------------------------------
    def retention_start(self, core: RaftCore, now_ms: int) -> int | None:
        """The new log start offset when ``metadata.max.retention.bytes/ms`` let the log below the
        newest snapshot go (a replica behind it then fetches the snapshot), else None."""
        latest = core.latest_snapshot
        if latest is None:
            return None
        start = self._retention.new_log_start_offset(
            log_start_offset=core.log.start_offset,
            snapshot_end_offset=latest.end_offset,
            high_watermark=core.high_watermark,
            retained_bytes=self._log.size_bytes(),
            oldest_entry_timestamp_ms=self._log.first_timestamp_ms(),
            now_ms=now_ms,
            prefix_has_readers=self._node_id in core.voters,  # an observer serves no Fetch
        )
        return start if start > core.log.start_offset else None

    def delete_old(self) -> None:
        """Snapshot files older than the two newest go once the log start passed them: the
        newest is never deleted, and the one before it stays so that a replica in the middle
        of fetching it (FetchSnapshot in chunks) can finish."""
        ids = list_snapshots(self.metadata_dir)
        if len(ids) > 2:
            keep = min(ids[-2], SnapshotId(self._log.start_offset, 0))
            delete_snapshots_before(self.metadata_dir, keep)
