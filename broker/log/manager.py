"""``LogManager``: every partition log of the broker's ``log.dirs`` (Kafka ``LogManager``).

Kafka documentation §5.4.3 "Deletes": "the log manager allows pluggable delete policies to choose which files are
eligible for deletion" — here retention by time and size (``retention.py``); Kafka documentation §5.4.1 "Writes":
flushes by ``flush.messages`` (in ``Log.append``) and ``flush.ms`` (``run_flush_once``).

Each log dir holds ``<topic>-<partition>`` directories, a ``.lock`` (``dir_lock.py``), the
``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` files
(``checkpoint.py``), and after a clean shutdown a ``.kafka_cleanshutdown`` marker, which lets
the next start-up skip re-validating batches; it is removed as soon as the logs are loaded, so
a crash after that is recovered. A deleted partition's directory is renamed to
``<topic>-<partition>.<uuid>-delete`` at once and removed ``file.delete.delay.ms`` later.

Future logs (AlterReplicaLogDirs, KIP-113): a partition moving to another log dir of this broker
has a second log there, ``<topic>-<partition>.<uuid>-future``, filled from the current one
(``broker.replication.log_dir_mover``) and swapped in by ``replace_current_with_future``: the
current directory becomes ``…-delete``, the future one takes the partition's name. A start-up
loads future logs again (the move resumes) and completes a swap that a crash interrupted (a
future log without a current one becomes the current one).

Log-dir failures (``dir_health.py``): an I/O error in a dir takes it offline (one ERROR log);
its logs refuse appends until ``run_dir_probe_once`` finds that a probe write succeeds and that
every log's files still match its memory; a log left inconsistent stays failed until a restart.
New partitions go to online dirs only.

Threading: one asyncio loop calls every method. The ``run_*_once`` coroutines are the bodies of
the background tasks; the broker schedules them (intervals in ``LogManagerConfig``) and passes
its clock's ``now_ms``. They yield to the loop between partitions. With ``flush_in_background``
(the broker) the logs' fsyncs (rolls, ``flush.messages``, ``flush.ms``, leader-epoch checkpoints)
run in ``FLUSH_THREADS`` worker threads owned here (``flush.py``, ``flush_job.py``); ``shutdown``
waits for them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from broker.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from broker.log.config import Clock, LogConfig, LogManagerConfig, system_clock_ms
from broker.log.dir_health import LogDirState, probe_dir
from broker.log.dir_lock import DirLock
from broker.log.errors import KafkaStorageError
from broker.log.files import (
    fsync_dir,
    future_dir_name,
    parse_future_dir_name,
    parse_partition_dir_name,
    partition_dir_name,
    remove_tree,
    write_atomic,
)
from broker.log.log import Log
from broker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from broker.log.recovery import load_log
from broker.log.recovery_progress import RecoveryProgress

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
METADATA_DIR_NAME = "__cluster_metadata-0"  # the KRaft metadata log, owned by broker.raft
LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
FLUSH_THREADS = 2  # fsyncs are I/O waits: two threads keep one slow file from delaying every log

TopicPartition = tuple[str, int]


class LogManager:
    """Creates, loads, deletes and maintains the partition logs of ``config.log_dirs``.

    ``startup()`` locks every dir (LogDirLockedError if another broker has one) and loads the
    logs found there; ``shutdown()`` flushes, checkpoints, marks the dirs clean and unlocks.
    ``high_watermark(topic, partition)`` (optional) bounds retention to replicated data.
    ``producer_id_expiration_ms`` is ``producer.id.expiration.ms`` for every log's producer state.
    ``flush_in_background``: the logs' flushes run in worker threads started by ``startup`` (the
    broker; must then run on its event loop); otherwise synchronously (tools, tests).
    """

    def __init__(
        self,
        config: LogManagerConfig,
        default_log_config: LogConfig | None = None,
        clock: Clock = system_clock_ms,
        *,
        high_watermark: Callable[[str, int], int | None] | None = None,
        ignored_dir_names: tuple[str, ...] = (METADATA_DIR_NAME,),
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        flush_in_background: bool = False,
    ) -> None:
        self.config = config
        self.flush_in_background = flush_in_background
        self._flush_executor: ThreadPoolExecutor | None = None
        self.default_log_config = default_log_config or LogConfig()
        self._clock = clock
        self._high_watermark = high_watermark
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._ignored = set(ignored_dir_names)
        self.log_dirs = [Path(d) for d in config.log_dirs]
        self.dir_states: dict[Path, LogDirState] = {d: LogDirState(d) for d in self.log_dirs}
        self._locks: list[DirLock] = []
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._futures: dict[TopicPartition, Log] = {}  # AlterReplicaLogDirs: the moving copies
        self._future_dir_of: dict[TopicPartition, Path] = {}
        # AlterReplicaLogDirs for a partition not hosted yet: where its log will be created
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._pending_dir_deletes: list[tuple[int, Path]] = []
        self.started = False
        # start-up load progress, logged every few seconds (broker.log.recovery_progress)
        self.recovery_progress = RecoveryProgress(interval_ms=config.recovery_progress_interval_ms)

    # -- lifecycle -----------------------------------------------------------------------------
    def startup(self, topic_configs: dict[str, LogConfig] | None = None) -> None:
        """Lock the dirs, then load every partition in them (recovering after a crash)."""
        self._topic_configs.update(topic_configs or {})
        if self.flush_in_background:
            self._flush_executor = ThreadPoolExecutor(FLUSH_THREADS, thread_name_prefix="log-flush")
        try:
            for directory in self.log_dirs:
                directory.mkdir(parents=True, exist_ok=True)
                self._locks.append(DirLock(directory).acquire())
            self.recovery_progress.measure(d for directory in self.log_dirs for d in self._partition_dirs(directory))
            for directory in self.log_dirs:
                self._load_dir(directory)
            self._complete_interrupted_swaps()
            self.recovery_progress.finish()
        except BaseException:
            for loaded in (*self._logs.values(), *self._futures.values()):
                loaded.close(flush=False)
            self._logs.clear()
            self._futures.clear()
            self._release_locks()
            self._stop_flush_threads()
            raise
        self.started = True

    def _load_dir(self, directory: Path) -> None:
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_checkpoint(directory / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_checkpoint(directory / LOG_START_OFFSET_CHECKPOINT)
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if not entry.is_dir() or entry.name in self._ignored:
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                remove_tree(Path(entry.path))
                continue
            future = parse_future_dir_name(entry.name)
            parsed = future or parse_partition_dir_name(entry.name)
            if parsed is None:
                continue
            if future is not None:
                if future in self._futures:
                    raise KafkaStorageError(
                        f"partition {entry.name} has two future logs: {self._future_dir_of[future]} and {directory}"
                    )
            elif parsed in self._logs:
                raise KafkaStorageError(
                    f"partition {entry.name} is in two log dirs: {self._dir_of[parsed]} and {directory}"
                )
            topic, partition = parsed
            try:
                loaded = load_log(
                    Path(entry.path),
                    topic,
                    partition,
                    self.log_config(topic),
                    self._clock,
                    recovery_point=recovery_points.get(parsed, 0),
                    log_start_offset=start_offsets.get(parsed, 0),
                    clean_shutdown=clean,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                    on_segment=self.recovery_progress.segment_done,
                )
            except OSError as exc:
                raise KafkaStorageError(f"cannot load {entry.path}: {exc}") from exc
            if future is not None:
                self._adopt_future(future, loaded, directory)
            else:
                self._adopt(parsed, loaded, directory)
            self.recovery_progress.partition_done(Path(entry.path))
        if clean:
            marker.unlink()
            fsync_dir(directory)

    def _complete_interrupted_swaps(self) -> None:
        """A future log without a current one: the broker died between the two renames of
        ``replace_current_with_future``; the future log is the partition's log now."""
        for tp in [tp for tp in self._futures if tp not in self._logs]:
            log.info("%s-%s: completing a log dir move interrupted by a restart", *tp)
            self._swap_in_future(tp)

    def _partition_dirs(self, directory: Path) -> list[Path]:
        """The partition directories ``_load_dir`` will load (for the progress totals)."""
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return []
        return [
            Path(e.path) for e in entries
            if e.is_dir() and e.name not in self._ignored and not e.name.endswith(DELETE_DIR_SUFFIX)
            and (parse_partition_dir_name(e.name) or parse_future_dir_name(e.name)) is not None
        ]  # fmt: skip

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown markers
        (not in a dir holding a failed log: its next start-up must recover it)."""
        failed_dirs = {self._dir_of[tp] for tp, current in self._logs.items() if current.failure is not None}
        failed_dirs |= {d for d, state in self.dir_states.items() if state.offline}
        failed_dirs |= {self._future_dir_of[tp] for tp, f in self._futures.items() if f.failure is not None}
        closing = [(current, self._dir_of[tp]) for tp, current in self._logs.items()]
        closing += [(future, self._future_dir_of[tp]) for tp, future in self._futures.items()]
        for current, directory in closing:
            try:  # an offline dir's logs close without flushing: the dir is recovered at start-up
                current.close(flush=directory not in failed_dirs)
            except (OSError, KafkaStorageError) as exc:
                log.warning("%s: closing without a flush after an I/O error: %s", current.name, exc)
                failed_dirs.add(directory)
                current.close(flush=False)
        self.write_checkpoints()
        for _, path in self._pending_dir_deletes:
            if path.exists():
                remove_tree(path)
        self._pending_dir_deletes.clear()
        for directory in self.log_dirs:
            if directory in failed_dirs:
                log.warning("%s: not marked clean: it or a log in it failed", directory)
                continue
            try:
                write_atomic(directory / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": -1}).encode())
            except OSError as exc:  # the next start-up recovers the dir's logs, which is safe
                log.warning("%s: cannot mark it clean: %s", directory, exc)
        self._logs.clear()
        self._dir_of.clear()
        self._futures.clear()
        self._future_dir_of.clear()
        self._stop_flush_threads()
        self._release_locks()
        self.started = False

    def _stop_flush_threads(self) -> None:
        """Wait for the flushes in flight (of logs closed without a flush), stop the threads."""
        if self._flush_executor is not None:
            self._flush_executor.shutdown(wait=True)
            self._flush_executor = None

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks.clear()

    # -- partitions ----------------------------------------------------------------------------
    def log_config(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_log_config)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        """Use ``config`` for the topic's existing and future partitions."""
        self._topic_configs[topic] = config
        for (name, _), current in self._logs.items():
            if name == topic:
                current.config = config
                for segment in current.segments:
                    segment.config = config

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> Iterator[Log]:
        return iter(list(self._logs.values()))

    def set_high_watermarks(self, high_watermark: Callable[[str, int], int | None]) -> None:
        """Bound retention and cleaning by ``high_watermark(topic, partition)`` from now on (the
        replica manager, built after the logs are loaded)."""
        self._high_watermark = high_watermark

    def high_watermark_of(self, current: Log) -> int | None:
        """The partition's high watermark when replication reports one (retention and the log
        cleaner stay below it), else None."""
        return self._high_watermark(current.topic, current.partition) if self._high_watermark else None

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created empty in the log dir holding the fewest partitions."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if not self.started:
            raise KafkaStorageError("the log manager is not started")
        if not LEGAL_TOPIC.fullmatch(topic) or topic in (".", "..") or partition < 0:
            raise ValueError(f"illegal topic-partition {topic!r}-{partition}")
        if config is not None:
            self._topic_configs[topic] = config
        online = [d for d in self.log_dirs if not self.dir_states[d].offline]
        if not online:
            raise KafkaStorageError(f"every log dir is offline: {', '.join(map(str, self.log_dirs))}")
        counts = dict.fromkeys(online, 0)
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        preferred = self._preferred_dirs.pop((topic, partition), None)
        directory = preferred if preferred in counts else min(online, key=lambda d: counts[d])
        path = directory / partition_dir_name(topic, partition)
        try:
            if path.exists():
                created = load_log(
                    path,
                    topic,
                    partition,
                    self.log_config(topic),
                    self._clock,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                )
            else:
                path.mkdir()
                fsync_dir(directory)
                created = Log.create(
                    path,
                    topic,
                    partition,
                    self.log_config(topic),
                    self._clock,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                )
        except OSError as exc:
            self.dir_states[directory].fail(f"creating the log of {topic}-{partition}", exc, self._clock())
            raise KafkaStorageError(f"cannot create {path}: {exc}") from exc
        self._adopt((topic, partition), created, directory)
        return created

    def _adopt(self, tp: TopicPartition, current: Log, directory: Path) -> None:
        current.dir_state = self.dir_states[directory]
        current.flusher.executor = self._flush_executor
        self._logs[tp] = current
        self._dir_of[tp] = directory

    def _adopt_future(self, tp: TopicPartition, future: Log, directory: Path) -> None:
        future.dir_state = self.dir_states[directory]
        future.flusher.executor = self._flush_executor
        self._futures[tp] = future
        self._future_dir_of[tp] = directory

    # -- AlterReplicaLogDirs (KIP-113): future logs ----------------------------------------------
    def log_dir_named(self, path: str) -> Path | None:
        """The configured log dir whose absolute path is ``path`` (AlterReplicaLogDirs names dirs
        by absolute path, as DescribeLogDirs reports them); None when there is none."""
        wanted = os.path.normpath(os.path.abspath(path))
        for directory in self.log_dirs:
            if os.path.normpath(str(directory.absolute())) == wanted:
                return directory
        return None

    def prefer_dir(self, topic: str, partition: int, directory: Path) -> None:
        """Create the partition's log in ``directory`` when it comes (Kafka's
        ``LogManager.maybeUpdatePreferredLogDir``: AlterReplicaLogDirs before the replica exists)."""
        self._preferred_dirs[(topic, partition)] = directory

    def future_log(self, topic: str, partition: int) -> Log | None:
        return self._futures.get((topic, partition))

    def future_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._future_dir_of.get((topic, partition))

    def futures_in(self, directory: Path) -> list[Log]:
        return [f for tp, f in self._futures.items() if self._future_dir_of[tp] == directory]

    def create_future_log(self, topic: str, partition: int, directory: Path) -> Log:
        """An empty future log of the partition in ``directory`` (the caller checked that the
        dir is online and differs from the current one); KafkaStorageError on I/O."""
        tp = (topic, partition)
        if tp in self._futures:
            raise KafkaStorageError(f"{topic}-{partition} already has a future log in {self._future_dir_of[tp]}")
        path = directory / future_dir_name(topic, partition, uuid.uuid4().hex)
        try:
            path.mkdir()
            fsync_dir(directory)
            created = Log.create(
                path, topic, partition, self.log_config(topic), self._clock,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )  # fmt: skip
        except OSError as exc:
            self.dir_states[directory].fail(f"creating the future log of {topic}-{partition}", exc, self._clock())
            raise KafkaStorageError(f"cannot create {path}: {exc}") from exc
        self._adopt_future(tp, created, directory)
        return created

    def delete_future_log(self, topic: str, partition: int) -> bool:
        """Abandon the partition's move: close its future log and delete it like a deleted log."""
        future = self._futures.pop((topic, partition), None)
        if future is None:
            return False
        directory = self._future_dir_of.pop((topic, partition))
        self._retire(future, directory)
        return True

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """Swap the future log in (Kafka's ``LogManager.replaceCurrentWithFutureLog``): the current
        log is closed and its directory renamed ``…-delete``, then the future directory takes the
        partition's name. The caller checked that the future log holds what the current one
        holds and that neither has a flush in flight. Returns the new current log. The two
        directories' fsyncs are left to the caller (``fsync_dir`` in a worker thread)."""
        tp = (topic, partition)
        current = self._logs.pop(tp)
        self._retire(current, self._dir_of.pop(tp), sync=False)
        return self._swap_in_future(tp)

    def _swap_in_future(self, tp: TopicPartition) -> Log:
        future = self._futures.pop(tp)
        directory = self._future_dir_of.pop(tp)
        future.rename_directory(directory / partition_dir_name(*tp))
        self._adopt(tp, future, directory)
        return future

    def _retire(self, retired: Log, directory: Path, *, sync: bool = True) -> None:
        """Close a log no longer used and rename its directory ``…-delete`` (removed after
        ``file.delete.delay.ms``; open slices keep reading their files meanwhile)."""
        retired.close(flush=False)
        name = partition_dir_name(retired.topic, retired.partition)
        target = retired.directory.with_name(f"{name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(retired.directory, target)
        if sync:
            fsync_dir(directory)
        self._pending_dir_deletes.append((self._clock() + retired.config.file_delete_delay_ms, target))

    def dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding the partition's log (None: not hosted here)."""
        return self._dir_of.get((topic, partition))

    def logs_in(self, directory: Path) -> list[Log]:
        return [lg for tp, lg in self._logs.items() if self._dir_of[tp] == directory]

    @property
    def offline_dir_count(self) -> int:
        """Kafka's ``OfflineLogDirectoryCount``."""
        return sum(1 for state in self.dir_states.values() if state.offline)

    async def run_dir_probe_once(self) -> int:
        """Bring offline dirs back (``log.dir.failure.probe.interval.ms``): a dir whose probe write
        succeeds and whose logs are consistent on disk is online again. The probe and the checks
        run in a worker thread (the dir's logs take no appends meanwhile). Returns dirs recovered."""
        recovered = 0
        for directory, state in self.dir_states.items():
            if not state.offline:
                continue
            members = self.logs_in(directory)
            error, inconsistent = await asyncio.to_thread(_probe_and_check, directory, members)
            if error is not None:
                state.fail("the recovery probe write", error, self._clock())
                continue
            for bad in inconsistent:
                if bad.failure is None:
                    bad.failure = "its active segment lost bytes while the dir was offline"
                log.error("%s: stays offline until a restart recovers it: %s", bad.name, bad.failure)
            state.recover(self._clock())
            recovered += 1
        return recovered

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and rename its directory to ``…-delete``; its removal follows after
        ``file.delete.delay.ms`` (``run_file_deletion_once``). False if there is no such log."""
        self.delete_future_log(topic, partition)
        self._preferred_dirs.pop((topic, partition), None)
        current = self._logs.pop((topic, partition), None)
        if current is None:
            return False
        self._retire(current, self._dir_of.pop((topic, partition)))
        return True

    # -- background work -----------------------------------------------------------------------
    async def run_retention_once(self, now_ms: int | None = None) -> int:
        """Retention for every log (``log.retention.check.interval.ms``); returns segments deleted."""
        now = self._clock() if now_ms is None else now_ms
        deleted = 0
        for current in self.logs():
            if current.closed or current.failure is not None:
                continue
            hw = self._high_watermark(current.topic, current.partition) if self._high_watermark else None
            deleted += current.delete_old_segments(now, hw)
            await asyncio.sleep(0)
        return deleted

    async def run_flush_once(self, now_ms: int | None = None) -> int:
        """``flush.ms`` for every log (``log.flush.scheduler.interval.ms``); returns the logs whose
        flush it started (they complete in the background with ``flush_in_background``)."""
        now = self._clock() if now_ms is None else now_ms
        flushed = 0
        for current in self.logs():
            if not current.closed and current.flusher.flush_if_due(now):
                flushed += 1
            await asyncio.sleep(0)
        return flushed

    async def run_file_deletion_once(self, now_ms: int | None = None) -> int:
        """Remove ``*.deleted`` segment files and ``-delete`` dirs whose delay has passed."""
        now = self._clock() if now_ms is None else now_ms
        removed = 0
        for current in self.logs():
            removed += current.delete_pending_files(now)
        due = [path for t, path in self._pending_dir_deletes if t <= now]
        self._pending_dir_deletes = [(t, p) for t, p in self._pending_dir_deletes if t > now]
        for path in due:
            if path.exists():
                remove_tree(path)
            removed += 1
            await asyncio.sleep(0)
        return removed

    async def run_checkpoints_once(self) -> None:
        """Write both checkpoint files of every dir (``log.flush.offset.checkpoint.interval.ms``)."""
        self.write_checkpoints()

    def write_checkpoints(self) -> None:
        """Write ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` per dir
        (not in an offline dir; a failing write takes the dir offline: the previous files stay)."""
        for directory in self.log_dirs:
            state = self.dir_states[directory]
            if state.offline:
                continue
            members = {tp: lg for tp, lg in self._logs.items() if self._dir_of[tp] == directory}
            members.update((tp, f) for tp, f in self._futures.items() if self._future_dir_of[tp] == directory)
            try:
                write_checkpoint(
                    directory / RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in members.items()}
                )
                write_checkpoint(
                    directory / LOG_START_OFFSET_CHECKPOINT,
                    {tp: lg.log_start_offset for tp, lg in members.items()},
                )
            except OSError as exc:
                state.fail("writing the offset checkpoints", exc, self._clock())


def _probe_and_check(directory: Path, members: list[Log]) -> tuple[OSError | None, list[Log]]:
    """The probe's blocking part: the probe write's error (None: it succeeded), then the logs
    whose files no longer match their memory."""
    error = probe_dir(directory)
    if error is not None:
        return error, []
    return None, [lg for lg in members if not _consistent_on_disk(lg)]


def _consistent_on_disk(current: Log) -> bool:
    """Whether the log's active segment file holds exactly what memory says (a failed append
    truncated it back; a longer file is cut back here). Blocking: the dir is offline meanwhile, so
    no append changes the log."""
    return current.failure is None and not current.closed and current.segments.active.trim_to_size()
