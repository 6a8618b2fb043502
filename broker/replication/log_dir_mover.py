"""Moving a replica between this broker's own log dirs: AlterReplicaLogDirs (34, KIP-113).

Kafka's ``ReplicaManager.alterReplicaLogDirs`` and ``ReplicaAlterLogDirsThread``, in one asyncio
task per broker:

* ``alter(topic, partition, path)`` answers one partition of the request. The destination must be
  a configured log dir (LOG_DIR_NOT_FOUND otherwise) and online, with no dir of the broker offline
  (KAFKA_STORAGE_ERROR: a future log is never created while a dir is offline, as Kafka's). A
  partition not hosted here is answered REPLICA_NOT_AVAILABLE and its log will be created in that
  dir when it comes (``LogManager.prefer_dir``). A partition already in that dir, or already moving
  there, is answered NONE and left alone; a move to another dir is abandoned first.
* The accepted partition gets an empty *future log* in the destination, starting at the current
  log's start offset (``LogManager.create_future_log``). ``run`` copies whole batches from the
  current log into it as a follower appends them (same offsets, producer state, transaction
  index), up to the log end offset, at most ``replica.alter.log.dirs.io.max.bytes.per.second``
  (dynamic) for all moves together. Truncations of the current log cut the future log too
  (``Partition.truncate_to``) and a copy read before one is dropped (``Partition.log_generation``);
  retention below the copy's position restarts it at the new log start.
* When the future log holds everything the current one holds, it is flushed, then on the event
  loop, with no await between the check and the swap, the future log replaces the current one
  (``LogManager.replace_current_with_future``; ``Partition.replace_log``): no append can land in
  between. The old directory is renamed ``…-delete`` and removed ``file.delete.delay.ms`` later.

Compaction of a moving log goes on: batches the cleaner removed are simply not copied after the
swap of its segments, and the copy is cleaned on its own later.

pylog keeps no directory assignment in the metadata log (Kafka 3.7+ JBOD sends
AssignReplicasToDirs to the controller); the move is local to the broker (docs/compatibility.md).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from pathlib import Path

from broker.log.errors import KafkaStorageError, LogError, OffsetOutOfRangeError
from broker.log.files import fsync_dir
from broker.log.log import Log
from broker.log.manager import LogManager
from broker.replication.partition import Partition
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20  # one read of the current log per step: a follower fetch's size
IDLE_WAIT_S = 1.0  # with nothing to copy, look for moves that a restart resumed this often
SWAP_RETRY_S = 0.01  # a flush in flight on either log: the swap waits for it

_BASE_OFFSET = struct.Struct(">q")  # a record batch starts with its base offset (Kafka §5.3.1)

HostedPartition = Callable[[str, int], Partition | None]


class LogDirMover:
    """The broker's AlterReplicaLogDirs: ``alter`` starts moves, ``run`` (a background task)
    copies and swaps them. ``partitions()`` lists the hosted partitions; ``delay_ms()`` and
    ``record(nbytes)`` are the copy's throttle (``ReplicationThrottles.log_dir_move``)."""

    def __init__(
        self,
        logs: LogManager,
        hosted: HostedPartition,
        partitions: Callable[[], list[Partition]],
        *,
        delay_ms: Callable[[], int] = lambda: 0,
        record: Callable[[int], None] = lambda _: None,
    ) -> None:
        self._logs = logs
        self._hosted = hosted
        self._partitions = partitions
        self._delay_ms = delay_ms
        self._record = record
        self._wake = asyncio.Event()
        self.moves_completed = 0

    # -- the request ------------------------------------------------------------------------------
    def alter(self, topic: str, partition: int, path: str) -> int:
        """One partition of an AlterReplicaLogDirs request; returns its error code."""
        logs = self._logs
        directory = logs.log_dir_named(path)
        if directory is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if logs.dir_states[directory].offline or logs.offline_dir_count:
            return ErrorCode.KAFKA_STORAGE_ERROR
        moving_to = logs.future_dir_of(topic, partition)
        hosted = self._hosted(topic, partition)
        if moving_to is not None and moving_to != directory:
            self._abandon(topic, partition, hosted)
        if hosted is None or hosted.log.closed:
            logs.prefer_dir(topic, partition, directory)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if hosted.log.failure is not None:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if logs.dir_of(topic, partition) == directory or moving_to == directory:
            return ErrorCode.NONE
        try:
            future = logs.create_future_log(topic, partition, directory)
            if hosted.log.log_start_offset > 0:
                future.truncate_fully_and_start_at(hosted.log.log_start_offset)
        except (KafkaStorageError, OSError) as exc:
            log.warning("%s-%s: cannot start moving to %s: %s", topic, partition, directory, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        hosted.future_log = future
        log.info("%s-%s: moving from %s to %s", topic, partition, logs.dir_of(topic, partition), directory)
        self._wake.set()
        return ErrorCode.NONE

    def _abandon(self, topic: str, partition: int, hosted: Partition | None) -> None:
        if hosted is not None:
            hosted.future_log = None
        self._logs.delete_future_log(topic, partition)
        log.info("%s-%s: the move to another log dir is abandoned", topic, partition)

    # -- the copier ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Copy every moving partition a chunk at a time, round robin; swap the caught-up ones."""
        while True:
            moving = [p for p in self._partitions() if self._attach(p)]
            if not moving:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), IDLE_WAIT_S)
                except TimeoutError:
                    pass
                continue
            for hosted in moving:
                wait_ms = self._delay_ms()
                if wait_ms > 0:
                    await asyncio.sleep(wait_ms / 1000)
                try:
                    await self._step(hosted)
                except (LogError, OSError) as exc:  # a disk error: the dir's health took note
                    log.warning("%s-%s: moving between log dirs failed: %s", hosted.topic, hosted.partition, exc)
                    self._abandon(hosted.topic, hosted.partition, hosted)
                await asyncio.sleep(0)

    def _attach(self, hosted: Partition) -> bool:
        """True if ``hosted`` is moving: its future log (also one a restart loaded) is attached."""
        if hosted.log.closed:
            return False
        future = self._logs.future_log(hosted.topic, hosted.partition)
        if future is None or future.closed:
            hosted.future_log = None
            return False
        hosted.future_log = future
        return True

    async def _step(self, hosted: Partition) -> None:
        current, future = hosted.log, hosted.future_log
        assert future is not None
        if future.log_end_offset < current.log_start_offset or future.log_end_offset > current.log_end_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)  # retention overtook the copy
            return
        if future.log_end_offset == current.log_end_offset:
            await self._swap_when_caught_up(hosted, current, future)
            return
        generation, position = hosted.log_generation, future.log_end_offset
        try:
            chunk = current.read(position, CHUNK_BYTES)
        except OffsetOutOfRangeError:
            return  # retention moved the start meanwhile: the next step restarts the copy
        try:
            data = await asyncio.to_thread(chunk.read_bytes)
        finally:
            chunk.close()
        if hosted.future_log is not future or hosted.log_generation != generation or future.log_end_offset != position:
            return  # truncated or abandoned while reading: read again
        if not data:
            return
        base_offset = _BASE_OFFSET.unpack_from(data)[0]
        if base_offset < position:  # the log start is inside a batch (DeleteRecords): copy it whole
            future.truncate_fully_and_start_at(base_offset)
            future.append_as_follower(data)
            future.delete_records_before(position)
        else:
            future.append_as_follower(data)
        self._record(len(data))

    async def _swap_when_caught_up(self, hosted: Partition, current: Log, future: Log) -> None:
        """Flush the future log, then swap it in if it still holds all of the current one."""
        await future.flusher.flush_async(future.log_end_offset)
        if hosted.future_log is not future or future.closed or current.closed:
            return
        if future.log_end_offset != current.log_end_offset:
            return  # appends meanwhile: copy them first
        if future.flusher.in_flight is not None or current.flusher.in_flight is not None:
            await asyncio.sleep(SWAP_RETRY_S)
            return
        if current.log_start_offset > future.log_start_offset:  # retention or DeleteRecords meanwhile
            future.delete_records_before(current.log_start_offset)
        old_dir = self._logs.dir_of(hosted.topic, hosted.partition)
        new_dir = self._logs.future_dir_of(hosted.topic, hosted.partition)
        assert old_dir is not None
        assert new_dir is not None
        moved = self._logs.replace_current_with_future(hosted.topic, hosted.partition)
        hosted.replace_log(moved)
        self.moves_completed += 1
        log.info("%s-%s: moved from %s to %s at offset %d", hosted.topic, hosted.partition, old_dir, new_dir,
                 moved.log_end_offset)  # fmt: skip
        await asyncio.to_thread(_sync_dirs, old_dir, new_dir)


def _sync_dirs(*directories: Path) -> None:
    for directory in directories:
        fsync_dir(directory)
