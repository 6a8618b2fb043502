"""Discrete-event simulation of partition replication: simulated brokers, controller, network, disks.

Everything derives from one seed (``random.Random(seed)``) and an injected clock (``Simulation.now_ms``).
Events are ordered by ``(time, sequence)``; after every event the ``ReplicationInvariants`` are checked.

What is real and what is simulated:

* **Real (imported, never reimplemented):** the ISR and high-watermark decisions
  (``broker.replication.isr``), the leader-epoch cache, the leader's divergence answer and the
  follower's truncation point (``broker.replication.leader_epoch``), the controller's partition
  changes (``broker.controller.partition_changes``: ``alter_partition``, ``fence_broker``,
  ``unfence_broker``, ``register_broker``), and the metadata records applied with
  ``image_builder.apply_payload`` and read through ``build_image`` on every broker.
* **Mirrored (the broker's glue, line for line, over an in-memory log):** ``SimPartition`` follows
  ``broker/replication/partition.py`` (``Partition``); ``SimBroker`` follows ``replica_manager.py``
  (``on_image_change``, ``append``/``wait_for_acks``, ``read_for_follower``, ``_maybe_expand_isr``,
  ``check_isr``, ``_propose_isr``/``_send_isr_change``), ``broker/api/fetch.py`` (the follower
  long-poll, OFFSET_OUT_OF_RANGE answers), ``fetcher.py`` (``replan``, ``_build_request``,
  ``_apply``, ``_truncate_on_divergence``) and the broker side of ``controller/quorum.py``
  (registration, heartbeats, ``alter_partition`` waiting for the own image). ``SimController``
  follows the active controller of ``quorum.py`` (``handle_registration``, ``handle_heartbeat``,
  ``fence_expired_brokers``, ``handle_alter_partition``); the metadata quorum itself is one
  always-available node (``tests/sim`` simulates the Raft quorum on its own).
* **Simulated:** the network (per-connection FIFO delivery with random delays, drops that break
  the request, duplicated controller requests as a client retry would send, cut links), the disks
  (a log is a list of ``(leader epoch, record id)``; ``flushed`` is what survives a machine crash;
  the leader-epoch checkpoint is rewritten without fsync, as ``LeaderEpochFile.write`` is, and
  becomes durable with the log's next flush, which also raises the recovery point; a rewrite
  lowers the recovery point to the first changed entry, as ``Log.sync_before`` does; the
  high-watermark checkpoint is written every ``hw_checkpoint_interval_ms``), and the faults:
  pauses (SIGSTOP: timers and inbound messages wait), process crashes (the page cache survives:
  the whole log, the last checkpoint written) and machine crashes (only a random prefix of the
  log above its flushed offset survives, never less than the flushed offset; the epoch
  checkpoint is its durable version, the last one written, or damaged).

One record id per appended record (global counter) makes "the same record" exact: two replicas
agree at an offset when they hold the same record id there (which implies the same epoch).
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.controller.errors import MetadataError
from broker.controller.image import MetadataImage, PartitionImage
from broker.controller.image_builder import ClusterState, apply_payload, build_image
from broker.controller.partition_changes import (
    IsrChange,
    alter_partition,
    fence_broker,
    register_broker,
    unfence_broker,
)
from broker.controller.records import (
    ClusterIdRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_records,
)
from broker.replication.isr import (
    FollowerState,
    acks_all_error,
    can_join_isr,
    high_watermark,
    on_follower_fetch,
    out_of_sync,
)
from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache, diverging_epoch, truncation_offset
from broker.replication.replica_manager import ISR_REFUSED
from pyspark_log.wire.errors import ErrorCode

CLUSTER_ID = "sim-replication-01"
TOPIC = "sim"
TOPIC_ID = uuid.UUID(int=0x5111)
CONTROLLER = -1
PRODUCER = -2
MAX_EVENTS = 300_000
RESET_NOTICE_PROBABILITY = 0.75  # a lost message usually shows as a broken connection


class SimulationFailure(AssertionError):
    pass


# -- configuration ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SimConfig:
    brokers: int = 3
    partitions: int = 1
    replication_factor: int = 3
    min_insync_replicas: int = 2
    lag_time_max_ms: int = 600  # replica.lag.time.max.ms
    fetch_wait_max_ms: int = 50  # replica.fetch.wait.max.ms
    fetch_backoff_ms: int = 50  # replica.fetch.backoff.ms
    fetch_max_records: int = 8  # replica.fetch.max.bytes, in records
    socket_timeout_ms: int = 400  # replica.socket.timeout.ms (+ fetch wait: the fetch request timeout)
    session_timeout_ms: int = 1200  # broker.session.timeout.ms
    heartbeat_interval_ms: int = 200  # broker.heartbeat.interval.ms
    request_timeout_ms: int = 800  # the controller channel's request timeout
    retry_backoff_ms: int = 50
    produce_timeout_ms: int = 1500  # the produce request's timeout (acks=all waits at most this)
    hw_checkpoint_interval_ms: int = 300  # replica.high.watermark.checkpoint.interval.ms
    flush_interval_ms: int = 200  # how often a broker fsyncs its logs
    metadata_poll_ms: int = 100  # a broker's metadata fetch cadence (besides pushes)
    min_delay_ms: int = 1
    max_delay_ms: int = 10
    drop_probability: float = 0.0
    duplicate_probability: float = 0.0  # of a registration or heartbeat (delivered again, later)
    produce_interval_ms: tuple[int, int] = (5, 30)
    acks_all_probability: float = 0.7

    @classmethod
    def random(cls, rng: random.Random, *, brokers: tuple[int, int] = (3, 3), lossy: bool = True) -> SimConfig:
        num = rng.randint(*brokers)
        rf = min(num, rng.choice((num, 3)))
        return cls(
            brokers=num,
            partitions=rng.randint(1, 3),
            replication_factor=rf,
            min_insync_replicas=rng.randint(1, min(2, rf)),
            lag_time_max_ms=rng.choice((300, 600, 1000)),
            fetch_wait_max_ms=rng.choice((20, 50, 100)),
            fetch_backoff_ms=rng.choice((20, 50, 100)),
            fetch_max_records=rng.choice((4, 16, 64)),
            session_timeout_ms=rng.choice((900, 1200, 2000)),
            heartbeat_interval_ms=rng.choice((100, 200)),
            request_timeout_ms=rng.choice((300, 800, 1500)),
            produce_timeout_ms=rng.choice((500, 1500)),
            hw_checkpoint_interval_ms=rng.choice((100, 300, 1000)),
            flush_interval_ms=rng.choice((50, 200, 1000)),
            max_delay_ms=rng.choice((2, 5, 10, 25)),
            drop_probability=rng.choice((0.0, 0.0, 0.01, 0.03)) if lossy else 0.0,
            duplicate_probability=rng.choice((0.0, 0.05, 0.2)) if lossy else 0.0,
            produce_interval_ms=rng.choice(((2, 10), (5, 30), (20, 80))),
            acks_all_probability=rng.choice((0.5, 0.8, 1.0)),
        )


# -- disks -------------------------------------------------------------------------------------------
_INFINITY = 1 << 62


class SimLog:
    """One replica's log: ``entries[offset] = (leader epoch, record id)``; ``entries[:flushed]`` is
    on disk, the rest in the page cache. A truncation is durable at once."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []
        self.flushed = 0
        self.recovery_point = 0  # ≤ flushed: lowered by an epoch checkpoint rewrite (sync_before)
        self.changed_from = _INFINITY  # lowest offset changed since the invariants last looked

    @property
    def end(self) -> int:
        return len(self.entries)

    def append(self, epoch: int, record_id: int) -> None:
        self.entries.append((epoch, record_id))

    def truncate_to(self, offset: int) -> bool:
        if offset >= len(self.entries):
            return False
        del self.entries[offset:]
        self.flushed = min(self.flushed, offset)
        self.recovery_point = min(self.recovery_point, offset)
        self.changed_from = min(self.changed_from, offset)
        return True

    def flush(self) -> None:
        self.flushed = self.recovery_point = len(self.entries)


@dataclass
class SimDisk:
    logs: dict[int, SimLog] = field(default_factory=dict)
    epoch_checkpoints: dict[int, list[EpochEntry] | None] = field(default_factory=dict)  # None: damaged
    durable_epoch_checkpoints: dict[int, list[EpochEntry]] = field(default_factory=dict)  # as last fsynced
    hw_checkpoint: dict[int, int] = field(default_factory=dict)  # replication-offset-checkpoint

    def log(self, partition: int) -> SimLog:
        return self.logs.setdefault(partition, SimLog())


# -- Partition (broker/replication/partition.py) -----------------------------------------------------
Waiter = Callable[[int], None]  # called with an error code (NONE: the high watermark reached it)


def load_epochs(disk: SimDisk, partition: int) -> LeaderEpochCache:
    """``partition._load_epochs`` + ``LeaderEpochFile.load``: the checkpoint's entries below the log
    end, then the epochs of the batches from the recovery point (the flushed offset) on."""
    target = disk.log(partition)
    checked = disk.epoch_checkpoints.get(partition, [])
    if checked is None:  # damaged: rebuilt from every batch (``read_checked`` returned None)
        stored: list[EpochEntry] = []
        scan_from = 0
    else:
        stored = list(checked)
        scan_from = max(stored[-1].start_offset if stored else 0, target.recovery_point)
    cache = LeaderEpochCache(e for e in stored if e.start_offset < target.end)
    for offset in range(scan_from, target.end):
        cache.assign(target.entries[offset][0], offset)

    def write(entries: list[EpochEntry]) -> None:
        previous = disk.epoch_checkpoints.get(partition) or []
        disk.epoch_checkpoints[partition] = list(entries)
        changed = set(previous).symmetric_difference(entries)
        if changed:  # Log.sync_before: durable before the recovery point passes the change
            target.recovery_point = min(target.recovery_point, *(e.start_offset for e in changed))

    cache._on_change = write  # as LeaderEpochFile.load does
    if cache.entries != stored:
        write(cache.entries)
    return cache


class SimPartition:
    """``Partition`` over a ``SimLog`` (same methods, same rules)."""

    def __init__(self, node_id: int, partition: int, disk: SimDisk) -> None:
        self.node_id = node_id
        self.partition = partition
        self.log = disk.log(partition)
        self.epochs = load_epochs(disk, partition)
        self.high_watermark = max(min(disk.hw_checkpoint.get(partition, 0), self.log.end), 0)
        self.role: PartitionImage | None = None
        self.pending_isr: tuple[int, ...] | None = None
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = 0
        self.waiters: list[tuple[int, Waiter]] = []

    @property
    def is_leader(self) -> bool:
        return self.role is not None and self.role.leader == self.node_id

    @property
    def leader_epoch(self) -> int:
        return self.role.leader_epoch if self.role is not None else -1

    @property
    def isr(self) -> tuple[int, ...]:
        return self.role.isr if self.role is not None else ()

    @property
    def maximal_isr(self) -> set[int]:
        return set(self.isr) | set(self.pending_isr or ())

    def become_leader(self, image: PartitionImage, now_ms: int) -> bool:
        if self.is_leader and self.role is not None and self.role.leader_epoch == image.leader_epoch:
            self.update_from_image(image)
            return False
        self.role = image
        self.pending_isr = None
        end = self.log.end
        self.epochs.assign(image.leader_epoch, end)
        self.leader_epoch_start_offset = end
        self.followers = {
            b: FollowerState(last_caught_up_ms=now_ms if b in image.isr else 0)
            for b in image.replicas
            if b != self.node_id
        }
        self.maybe_advance_high_watermark()
        return True

    def become_follower(self, image: PartitionImage) -> bool:
        was = self.role
        self.role = image
        self.pending_isr = None
        self.followers = {}
        self.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return was is None or was.leader != image.leader or was.leader_epoch != image.leader_epoch

    def update_from_image(self, image: PartitionImage) -> None:
        if self.role is None or image.partition_epoch < self.role.partition_epoch:
            return
        if image.partition_epoch > self.role.partition_epoch:
            self.pending_isr = None
        self.role = image
        if self.is_leader:
            self.maybe_advance_high_watermark()
            self._complete_waiters()

    def append_as_leader(self, record_ids: list[int]) -> tuple[int, int]:
        first = self.log.end
        for record_id in record_ids:
            self.log.append(self.leader_epoch, record_id)
        self.maybe_advance_high_watermark()
        return first, self.log.end - 1

    def append_as_follower(self, base_offset: int, records: list[tuple[int, int]]) -> bool:
        """False when the batches do not start at the log end (``LogError`` in the broker)."""
        if base_offset != self.log.end:
            return False
        for index, (epoch, record_id) in enumerate(records):
            self.log.append(epoch, record_id)
            if epoch > self.epochs.latest_epoch:
                self.epochs.assign(epoch, base_offset + index)
        return True

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.epochs.truncate_from_end(self.log.end)
        self.high_watermark = min(self.high_watermark, self.log.end)

    def restart_at(self, offset: int) -> None:  # pragma: no cover - the log start never moves here
        raise AssertionError(f"log start moved to {offset}: retention is not simulated")

    def follower_learns(self, leader_high_watermark: int) -> None:
        self.high_watermark = max(0, min(leader_high_watermark, self.log.end))

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        state = self.followers.get(replica_id, FollowerState())
        self.followers[replica_id] = on_follower_fetch(state, fetch_offset, self.log.end, now_ms)
        self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        new = high_watermark(self.high_watermark, self.node_id, self.log.end, self.maximal_isr, self.followers)
        if new == self.high_watermark:
            return False
        self.high_watermark = new
        self._complete_waiters()
        return True

    def wait_for_high_watermark(self, offset: int, waiter: Waiter) -> None:
        if self.high_watermark >= offset:
            waiter(ErrorCode.NONE)
        else:
            self.waiters.append((offset, waiter))

    def _complete_waiters(self) -> None:
        if not self.waiters:
            return
        hw = self.high_watermark
        done = [w for offset, w in self.waiters if offset <= hw]
        self.waiters = [(offset, w) for offset, w in self.waiters if offset > hw]
        for waiter in done:
            waiter(ErrorCode.NONE)

    def fail_waiters(self, code: int) -> None:
        waiters, self.waiters = self.waiters, []
        for _, waiter in waiters:
            waiter(code)


# -- a broker ------------------------------------------------------------------------------------------
@dataclass
class _Fetching:
    """One followed partition's fetch loop (``fetcher._Fetching`` plus the in-flight request)."""

    leader_id: int
    leader_epoch: int
    generation: int
    in_flight: bool = False


class SimBroker:
    def __init__(self, sim: Simulation, node_id: int) -> None:
        self.sim = sim
        self.node_id = node_id
        self.disk = SimDisk()
        self.running = False
        self.paused = False
        self.incarnation = 0
        self.incarnation_id = ""
        self.deferred: list[Callable[[], object]] = []
        self.meta_state = ClusterState()  # the local metadata log, replayed at start
        self.meta_applied = -1
        self.image: MetadataImage | None = None
        self.broker_epoch = -1
        self.serving = False  # ``ReplicaManager.serving``: False until the own registration is applied
        self.partitions: dict[int, SimPartition] = {}
        self.fetching: dict[int, _Fetching] = {}
        self.fetch_generation = 0
        self.isr_in_flight: set[int] = set()
        self.isr_retry_at: dict[int, int] = {}
        self.data_waiters: dict[int, list[Callable[[], None]]] = {}
        self.image_waiters: list[Callable[[], bool]] = []
        self.lost_tail: dict[int, int] = {}  # partition -> records lost in the last machine crash

    def __repr__(self) -> str:
        return f"broker {self.node_id}"

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        """A new process: logs and checkpoints from the disk, roles from the local metadata log,
        then registration (a new incarnation id), heartbeats, and the background loops."""
        sim = self.sim
        self.running = True
        self.paused = False
        self.incarnation += 1
        self.incarnation_id = f"{self.node_id}-{self.incarnation}"
        self.deferred = []
        self.partitions = {}
        self.fetching = {}
        self.isr_in_flight = set()
        self.isr_retry_at = {}
        self.data_waiters = {}
        self.image_waiters = []
        self.broker_epoch = -1
        self.serving = False
        self.image = None
        sim.after(self, 0, self._follow_metadata)  # roles from the local metadata log (before registering)
        self._register()
        cfg = sim.config
        sim.every(self, max(cfg.lag_time_max_ms // 2, 1), self.check_isr)
        sim.every(self, cfg.hw_checkpoint_interval_ms, self._checkpoint_high_watermarks, quiet=True)
        sim.every(self, cfg.flush_interval_ms, self._flush, quiet=True)
        sim.every(self, cfg.metadata_poll_ms, self._poll_metadata, quiet=True)

    def crash(self, *, machine: bool, rng: random.Random) -> None:
        """Process crash: memory is gone, the page cache (the whole log) survives. Machine crash:
        each log keeps its flushed prefix plus a random part of the unflushed tail."""
        self.running = False
        self.paused = False
        self.deferred = []
        self.incarnation += 1  # in-flight messages to the old process are dropped
        if machine:
            for partition, target in sorted(self.disk.logs.items()):
                keep = rng.randint(target.flushed, target.end)
                if keep < target.end:
                    lost = target.entries[keep:]
                    target.truncate_to(keep)
                    target.flushed = keep
                    self.lost_tail[partition] = len(lost)
                    self.sim.invariants.on_lost_tail(self, partition, keep, lost)
            for partition in sorted(self.disk.epoch_checkpoints):
                written = self.disk.epoch_checkpoints[partition]
                durable = self.disk.durable_epoch_checkpoints.get(partition, [])
                if written != durable:  # a rewrite not yet fsynced: old, new, or damaged
                    self.disk.epoch_checkpoints[partition] = rng.choice((list(durable), written, None))

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        deferred, self.deferred = self.deferred, []
        for work in deferred:
            if not self.running or self.paused:
                break
            work()

    # -- metadata -------------------------------------------------------------------------------------
    def _poll_metadata(self) -> None:
        sim = self.sim
        sim.send(self.node_id, CONTROLLER, lambda: sim.controller.serve_metadata(self.node_id))

    def catch_up(self, target_offset: int) -> None:
        """Apply the controller's log entries up to ``target_offset`` in order (a metadata fetch)."""
        if target_offset > self.meta_applied:
            self.replay(target_offset)
            self._follow_metadata()

    def replay(self, target_offset: int) -> None:
        log = self.sim.controller.log
        for offset in range(self.meta_applied + 1, min(target_offset, len(log) - 1) + 1):
            self.meta_state = apply_payload(self.meta_state, offset, log[offset])
            self.meta_applied = offset

    def _follow_metadata(self) -> None:
        reg = self.meta_state.registrations.get(self.node_id)
        if self.broker_epoch >= 0 and reg is not None and reg.epoch >= self.broker_epoch:
            self.serving = True  # ``QuorumController._wait_registration_applied`` returned
        new = build_image(self.meta_state, cluster_id=CLUSTER_ID, local_broker_id=self.node_id)
        old, self.image = self.image, new
        self.on_image_change(old, new)
        waiting, self.image_waiters = self.image_waiters, []
        remaining = [w for w in waiting if not w()]
        self.image_waiters = remaining + self.image_waiters

    def on_image_change(self, old: MetadataImage | None, new: MetadataImage) -> None:
        """``ReplicaManager.on_image_change`` (no topic deletion here)."""
        now = self.sim.now_ms
        followers_changed = False
        topic = new.topics.get(TOPIC)
        if topic is not None:
            before = old.topics.get(TOPIC) if old is not None else None
            for part in topic.partitions.values():
                previous = before.partitions.get(part.partition) if before is not None else None
                if previous == part and part.partition in self.partitions:
                    continue
                if part.leader == self.node_id:
                    hosted = self._hosted(part.partition)
                    if hosted.become_leader(part, now):
                        followers_changed = True
                    self._wake(part.partition)
                elif self.node_id in part.replicas:
                    hosted = self._hosted(part.partition)
                    if hosted.become_follower(part):
                        followers_changed = True
                    self._wake(part.partition)
        brokers_moved = old is None or old.brokers != new.brokers
        if followers_changed or brokers_moved:
            self.replan()

    def _hosted(self, partition: int) -> SimPartition:
        hosted = self.partitions.get(partition)
        if hosted is None:
            hosted = self.partitions[partition] = SimPartition(self.node_id, partition, self.disk)
        return hosted

    # -- controller requests (quorum.py, broker side) --------------------------------------------------
    def _register(self) -> None:
        sim = self.sim
        incarnation_id = self.incarnation_id

        def handle(respond: Callable[[Any], None]) -> None:
            respond(sim.controller.handle_registration(self.node_id, incarnation_id))

        def answered(result: tuple[int, int]) -> None:
            code, epoch = result
            if code != ErrorCode.NONE:
                sim.after(self, sim.config.retry_backoff_ms * 4, self._register)
                return
            self.broker_epoch = epoch
            sim.after(self, sim.config.heartbeat_interval_ms, self._heartbeat)
            self._follow_metadata()  # the registration may already be applied here

        def failed() -> None:
            sim.after(self, sim.config.retry_backoff_ms * 4, self._register)

        sim.request(self, CONTROLLER, handle, answered, failed, sim.config.request_timeout_ms, duplicable=True)

    def _heartbeat(self) -> None:
        sim = self.sim
        epoch = self.broker_epoch

        def handle(respond: Callable[[Any], None]) -> None:
            respond(sim.controller.handle_heartbeat(self.node_id, epoch))

        def answered(code: int) -> None:
            if code == ErrorCode.STALE_BROKER_EPOCH:
                self._register()
                return
            delay = sim.config.heartbeat_interval_ms if code == ErrorCode.NONE else sim.config.retry_backoff_ms * 4
            sim.after(self, delay, self._heartbeat)

        def failed() -> None:
            sim.after(self, sim.config.retry_backoff_ms * 4, self._heartbeat)

        sim.request(self, CONTROLLER, handle, answered, failed, sim.config.heartbeat_interval_ms * 2, duplicable=True)

    # -- produce (ReplicaManager.append / wait_for_acks) -------------------------------------------------
    def handle_produce(self, partition: int, record_ids: list[int], acks: int, respond: Callable[[Any], None]) -> None:
        hosted = self.partitions.get(partition)
        if hosted is None or not hosted.is_leader or not self.serving:
            respond((ErrorCode.NOT_LEADER_OR_FOLLOWER, -1))
            return
        min_isr = self.sim.config.min_insync_replicas
        if acks == -1:
            code = acks_all_error(len(hosted.isr), min_isr, after_append=False)
            if code:
                respond((code, -1))
                return
        before = hosted.high_watermark
        first, last = hosted.append_as_leader(record_ids)
        epoch = hosted.leader_epoch
        self._wake_appended(partition)
        if hosted.high_watermark != before:
            self._wake(partition)
        if acks == 1:
            self.sim.invariants.on_ack(self, partition, first, last, epoch, acks)
            respond((ErrorCode.NONE, first))
            return
        finished = False

        def done(code: int) -> None:
            nonlocal finished
            if finished:
                return
            finished = True
            if code == ErrorCode.NONE:
                code = acks_all_error(len(hosted.isr), min_isr, after_append=True)
            if code == ErrorCode.NONE:
                self.sim.invariants.on_ack(self, partition, first, last, epoch, acks)
            respond((code, first))

        self.sim.after(self, self.sim.config.produce_timeout_ms, lambda: done(ErrorCode.REQUEST_TIMED_OUT))
        hosted.wait_for_high_watermark(last + 1, done)

    # -- follower reads at the leader (ReplicaManager.read_for_follower + api/fetch long-poll) -----------
    def handle_fetch(self, replica_id: int, request: dict[str, int], respond: Callable[[Any], None]) -> None:
        deadline = self.sim.now_ms + self.sim.config.fetch_wait_max_ms
        answered = False

        def attempt() -> None:
            nonlocal answered
            if answered:
                return
            result = self._read_for_follower(replica_id, request)
            if result["error_code"] or result["records"] or self.sim.now_ms >= deadline:
                answered = True
                respond(result)
                return
            self.data_waiters.setdefault(request["partition"], []).append(attempt)

        self.sim.after(self, self.sim.config.fetch_wait_max_ms, attempt)
        attempt()

    def _read_for_follower(self, replica_id: int, request: dict[str, int]) -> dict[str, Any]:
        partition = request["partition"]
        fetch_offset = request["fetch_offset"]
        hosted = self.partitions.get(partition)
        out: dict[str, Any] = {"partition": partition, "records": [], "base_offset": fetch_offset}
        if hosted is None or not hosted.is_leader or not self.serving:
            return {**out, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER}
        current = request["current_leader_epoch"]
        if current >= 0 and current < hosted.leader_epoch:
            return {**out, "error_code": ErrorCode.FENCED_LEADER_EPOCH}
        if current >= 0 and current > hosted.leader_epoch:
            return {**out, "error_code": ErrorCode.UNKNOWN_LEADER_EPOCH}
        if replica_id not in (hosted.role.replicas if hosted.role else ()):
            return {**out, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER}
        target = hosted.log
        diverging = diverging_epoch(hosted.epochs, target.end, request["last_fetched_epoch"], fetch_offset)
        if diverging is not None:
            return {**out, "error_code": ErrorCode.NONE, "high_watermark": hosted.high_watermark,
                    "diverging_epoch": diverging}  # fmt: skip
        if fetch_offset > target.end or fetch_offset < 0:
            return {**out, "error_code": ErrorCode.OFFSET_OUT_OF_RANGE, "high_watermark": target.end}
        before = hosted.high_watermark
        hosted.record_follower_fetch(replica_id, fetch_offset, self.sim.now_ms)
        if hosted.high_watermark != before:
            self._wake(partition)
        self._maybe_expand_isr(hosted, replica_id)
        records = target.entries[fetch_offset : fetch_offset + self.sim.config.fetch_max_records]
        return {**out, "error_code": ErrorCode.NONE, "high_watermark": hosted.high_watermark, "records": records,
                "diverging_epoch": None}  # fmt: skip

    def _wake(self, partition: int) -> None:
        self._wake_appended(partition)

    def _wake_appended(self, partition: int) -> None:
        for waiter in self.data_waiters.pop(partition, ()):
            waiter()

    # -- ISR changes (ReplicaManager) ------------------------------------------------------------------
    def _maybe_expand_isr(self, hosted: SimPartition, replica_id: int) -> None:
        if replica_id in hosted.isr or hosted.pending_isr is not None:
            return
        state = hosted.followers.get(replica_id)
        if state is None or not can_join_isr(state, hosted.high_watermark, hosted.leader_epoch_start_offset):
            return
        self._propose_isr(hosted, (*hosted.isr, replica_id), "expand")

    def check_isr(self) -> None:
        now = self.sim.now_ms
        for hosted in list(self.partitions.values()):
            if not hosted.is_leader:
                continue
            if hosted.pending_isr is not None:
                if self.isr_retry_at.get(hosted.partition, 0) <= now:
                    self._propose_isr(hosted, hosted.pending_isr, "retry")
                continue
            slow = out_of_sync(
                hosted.isr, self.node_id, hosted.log.end, hosted.followers,
                now_ms=now, lag_time_max_ms=self.sim.config.lag_time_max_ms,
            )  # fmt: skip
            if slow:
                self._propose_isr(hosted, tuple(b for b in hosted.isr if b not in slow), "shrink")

    def _propose_isr(self, hosted: SimPartition, new_isr: tuple[int, ...], kind: str) -> None:
        key = hosted.partition
        image = self.image
        if image is None or TOPIC not in image.topics or hosted.role is None or key in self.isr_in_flight:
            return
        if self.isr_retry_at.get(key, 0) > self.sim.now_ms:
            return
        change = IsrChange(TOPIC_ID, key, hosted.leader_epoch, new_isr, hosted.role.partition_epoch)
        hosted.pending_isr = new_isr
        self.isr_in_flight.add(key)
        self.sim.trace(f"{self} proposes ISR {kind} {list(new_isr)} for p{key} (epoch {hosted.leader_epoch})")
        self._alter_partition(change, lambda code: self._isr_change_done(hosted, change, code))

    def _isr_change_done(self, hosted: SimPartition, change: IsrChange, code: int) -> None:
        """The end of ``_send_isr_change``."""
        self.isr_in_flight.discard(change.partition)
        if code in ISR_REFUSED and hosted.pending_isr == change.new_isr:
            hosted.pending_isr = None
        elif code != ErrorCode.NONE:  # unknown outcome: stays in the maximal ISR, proposed again
            self.isr_retry_at[change.partition] = self.sim.now_ms + self.sim.config.fetch_backoff_ms
        else:
            self.isr_retry_at.pop(change.partition, None)
        self.sim.trace(f"{self} ISR change {list(change.new_isr)} for p{change.partition}: code {code}")
        hosted.maybe_advance_high_watermark()

    def _alter_partition(self, change: IsrChange, finished: Callable[[int], None]) -> None:
        """``QuorumController.alter_partition`` on a broker: send, then wait until the own image
        shows the accepted change (REQUEST_TIMED_OUT after the request timeout)."""
        sim = self.sim
        epoch = self.broker_epoch
        timeout = sim.config.request_timeout_ms

        def handle(respond: Callable[[Any], None]) -> None:
            respond(sim.controller.handle_alter_partition(self.node_id, epoch, [change]))

        def answered(result: tuple[int, list[tuple[IsrChange, int]]]) -> None:
            code, results = result
            if code != ErrorCode.NONE:
                finished(code)
                return
            accepted = [c for c, err in results if err == ErrorCode.NONE]
            codes = {c.partition: err for c, err in results}
            outcome = codes.get(change.partition, ErrorCode.UNKNOWN_SERVER_ERROR)
            waiting = True

            def applied() -> bool:
                nonlocal waiting
                if not waiting:
                    return True
                if all(self._isr_applied(c) for c in accepted):
                    waiting = False
                    finished(outcome)
                    return True
                return False

            def timed_out() -> None:
                nonlocal waiting
                if waiting:
                    waiting = False
                    finished(ErrorCode.REQUEST_TIMED_OUT)

            if not applied():
                self.image_waiters.append(applied)
                sim.after(self, timeout, timed_out)

        # not duplicable: the channel sends an AlterPartition once (no retry of the same request)
        sim.request(self, CONTROLLER, handle, answered, lambda: finished(ErrorCode.REQUEST_TIMED_OUT), timeout)

    def _isr_applied(self, change: IsrChange) -> bool:
        image = self.image
        topic = image.topics.get(TOPIC) if image is not None else None
        part = topic.partitions.get(change.partition) if topic is not None else None
        return part is None or part.partition_epoch > change.partition_epoch or set(part.isr) == set(change.new_isr)

    # -- follower fetchers (fetcher.py) -----------------------------------------------------------------
    def replan(self) -> None:
        """``ReplicaFetchers.replan``: fetch every followed partition whose leader is live. The
        same leader at a new epoch keeps its in-flight request (its answer is dropped when its epoch
        is no longer the partition's); a new leader starts a new fetcher at once."""
        brokers = self.image.brokers if self.image is not None else {}
        for partition, hosted in sorted(self.partitions.items()):
            role = hosted.role
            current = self.fetching.get(partition)
            if role is None or hosted.is_leader or role.leader < 0 or role.leader not in brokers:
                if current is not None:
                    del self.fetching[partition]
                continue
            if current is not None and current.leader_id == role.leader:
                if current.leader_epoch != role.leader_epoch:
                    current.leader_epoch = role.leader_epoch
                    if not current.in_flight:
                        self._fetch(partition, current)
                continue
            self.fetch_generation += 1
            state = self.fetching[partition] = _Fetching(role.leader, role.leader_epoch, self.fetch_generation)
            self._fetch(partition, state)

    def _fetch(self, partition: int, state: _Fetching) -> None:
        """``_build_request`` for one partition and send it; ``_run``'s handling of the answer."""
        sim = self.sim
        hosted = self.partitions.get(partition)
        if self.fetching.get(partition) is not state or hosted is None or hosted.is_leader or state.in_flight:
            return
        request = {
            "partition": partition,
            "current_leader_epoch": state.leader_epoch,
            "fetch_offset": hosted.log.end,
            "last_fetched_epoch": hosted.epochs.latest_epoch,
        }
        sent_epoch = state.leader_epoch
        state.in_flight = True
        leader = sim.brokers[state.leader_id]

        def handle(respond: Callable[[Any], None]) -> None:
            leader.handle_fetch(self.node_id, request, respond)

        def answered(part: dict[str, Any]) -> None:
            state.in_flight = False
            if self.fetching.get(partition) is not state:
                return  # this fetcher was stopped
            target = self.partitions.get(partition)
            if target is None or sent_epoch != target.leader_epoch:
                self._fetch(partition, state)  # leadership moved while the fetch was in flight
                return
            if self._apply(state.leader_id, target, part):
                self._fetch(partition, state)
            else:
                sim.after(self, sim.config.fetch_backoff_ms, lambda: self._fetch(partition, state))

        def failed() -> None:
            state.in_flight = False
            sim.after(self, sim.config.fetch_backoff_ms, lambda: self._fetch(partition, state))

        timeout = sim.config.socket_timeout_ms + sim.config.fetch_wait_max_ms
        sim.request(self, state.leader_id, handle, answered, failed, timeout)

    def _apply(self, source_id: int, hosted: SimPartition, part: dict[str, Any]) -> bool:
        """``ReplicaFetchers._apply``: one partition's answer; False when it should back off."""
        code = part["error_code"]
        if code == ErrorCode.NONE:
            diverging = part.get("diverging_epoch")
            if diverging is not None and diverging[1] >= 0:
                self._truncate_on_divergence(hosted, diverging[0], diverging[1])
                return True
            records = part["records"]
            if records and not hosted.append_as_follower(part["base_offset"], records):
                return False
            hosted.follower_learns(part["high_watermark"])
            self._wake(hosted.partition)
            return True
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_end = part["high_watermark"]
            if 0 <= leader_end < hosted.log.end:
                self.sim.trace(f"{self} p{hosted.partition}: leader {source_id} ends at {leader_end}: truncating")
                hosted.truncate_to(leader_end)
            return True
        return False

    def _truncate_on_divergence(self, hosted: SimPartition, leader_epoch: int, leader_end_offset: int) -> None:
        offset = truncation_offset(
            hosted.epochs, hosted.log.end, hosted.high_watermark, leader_epoch, leader_end_offset
        )
        offset = max(offset, 0)
        self.sim.trace(f"{self} p{hosted.partition}: diverges at epoch {leader_epoch} end {leader_end_offset}: "
                       f"truncating {hosted.log.end} -> {offset}")  # fmt: skip
        hosted.truncate_to(offset)

    # -- background ----------------------------------------------------------------------------------------
    def _checkpoint_high_watermarks(self) -> None:
        for partition, hosted in self.partitions.items():
            self.disk.hw_checkpoint[partition] = hosted.high_watermark

    def _flush(self) -> None:
        """The background flush: the epoch checkpoint and the log durable, then the recovery point."""
        for partition, written in self.disk.epoch_checkpoints.items():
            if written is not None:
                self.disk.durable_epoch_checkpoints[partition] = list(written)
        for target in self.disk.logs.values():
            target.flush()


# -- the active controller (quorum.py, controller side) ------------------------------------------------
class SimController:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.state = ClusterState()
        self.log: list[bytes] = []
        self.last_heartbeat_ms: dict[int, int] = {}

    def append(self, records: list[MetadataRecord]) -> int:
        offset = len(self.log)
        payload = encode_records(records)
        self.log.append(payload)
        self.state = apply_payload(self.state, offset, payload)
        self.sim.trace(f"controller appends {offset}: {records}")
        self.sim.invariants.on_metadata(self.state)
        for broker in self.sim.brokers.values():  # the brokers' metadata fetches are answered at once
            if broker.running:
                self.serve_metadata(broker.node_id)
        return offset

    def serve_metadata(self, broker_id: int) -> None:
        target = len(self.log) - 1
        broker = self.sim.brokers[broker_id]
        if broker.meta_applied < target:
            self.sim.send(CONTROLLER, broker_id, lambda: broker.catch_up(target))

    def handle_registration(self, broker_id: int, incarnation_id: str) -> tuple[int, int]:
        current = self.state.registrations.get(broker_id)
        if current is not None and current.incarnation_id == incarnation_id:
            epoch = current.epoch
        else:
            record = RegisterBrokerRecord(broker_id, incarnation_id, "sim", 9092 + broker_id)
            epoch = self.append(register_broker(self.state, record))
        self.last_heartbeat_ms[broker_id] = self.sim.now_ms
        return ErrorCode.NONE, epoch

    def handle_heartbeat(self, broker_id: int, broker_epoch: int) -> int:
        current = self.state.registrations.get(broker_id)
        if current is None or current.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        self.last_heartbeat_ms[broker_id] = self.sim.now_ms
        if current.fenced:
            self.append(unfence_broker(self.state, broker_id))
        return ErrorCode.NONE

    def fence_expired_brokers(self) -> None:
        now = self.sim.now_ms
        for broker_id, reg in sorted(self.state.registrations.items()):
            last = self.last_heartbeat_ms.setdefault(broker_id, now)
            if not reg.fenced and now - last >= self.sim.config.session_timeout_ms:
                self.append(fence_broker(self.state, broker_id))

    def handle_alter_partition(
        self, broker_id: int, broker_epoch: int, changes: list[IsrChange]
    ) -> tuple[int, list[tuple[IsrChange, int]]]:
        reg = self.state.registrations.get(broker_id)
        if reg is None or reg.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        records: list[MetadataRecord] = []
        results: list[tuple[IsrChange, int]] = []
        for change in changes:
            try:
                records.extend(alter_partition(self.state, broker_id, change))
                results.append((change, ErrorCode.NONE))
            except MetadataError as exc:
                results.append((change, exc.code))
        if records:
            self.append(records)
        return ErrorCode.NONE, results


# -- the simulation ---------------------------------------------------------------------------------------
class Simulation:
    def __init__(self, seed: int, config: SimConfig, *, max_events: int = MAX_EVENTS) -> None:
        from tests.sim.replication.invariants import ReplicationInvariants

        self.seed = seed
        self.config = config
        self.rng = random.Random(seed)
        self.net_rng = random.Random(self.rng.getrandbits(64))
        self.now_ms = 0
        self.events = 0
        self.max_events = max_events
        self._queue: list[tuple[int, int, Callable[[], object]]] = []
        self._sequence = 0
        self._correlation = 0
        self._pending: dict[int, tuple[int, int]] = {}
        self._link_clock: dict[tuple[int, int], int] = {}
        self.cut: set[tuple[int, int]] = set()
        self.recent: deque[str] = deque(maxlen=60)
        self.brokers = {b: SimBroker(self, b) for b in range(config.brokers)}
        self.invariants = ReplicationInvariants(self)
        self.controller = SimController(self)
        self.next_record_id = 1
        self.producing = True
        self.produced = {"acks1": 0, "acksall": 0, "errors": 0}
        self._bootstrap()

    # -- set-up -----------------------------------------------------------------------------------------
    def _bootstrap(self) -> None:
        cfg = self.config
        controller = self.controller
        controller.append([ClusterIdRecord(CLUSTER_ID)])
        for broker in self.brokers.values():
            broker.incarnation_id = f"{broker.node_id}-1"  # the id its first start() takes
            controller.append(
                [RegisterBrokerRecord(broker.node_id, broker.incarnation_id, "sim", 9092 + broker.node_id)]
            )
        ids = sorted(self.brokers)
        records: list[MetadataRecord] = [TopicRecord(TOPIC, TOPIC_ID)]
        for partition in range(cfg.partitions):
            replicas = tuple(ids[(partition + i) % len(ids)] for i in range(cfg.replication_factor))
            records.append(PartitionRecord(TOPIC_ID, partition, replicas, replicas, replicas[0]))
        controller.append(records)
        for broker in self.brokers.values():
            broker.replay(len(controller.log) - 1)
            broker.start()
        self.every(None, min(cfg.heartbeat_interval_ms, 500), controller.fence_expired_brokers)
        self.after(None, self.rng.randint(*cfg.produce_interval_ms), self._produce)

    # -- events -----------------------------------------------------------------------------------------
    def _schedule(self, at_ms: int, work: Callable[[], object]) -> None:
        self._sequence += 1
        heapq.heappush(self._queue, (at_ms, self._sequence, work))

    def after(self, node: SimBroker | None, delay_ms: int, work: Callable[[], None], *, quiet: bool = False) -> None:
        """Run ``work`` after ``delay_ms`` on ``node`` (dropped if it crashed, held while paused).
        ``quiet``: it changes nothing the invariants look at (no check after it)."""
        self._schedule(self.now_ms + delay_ms, self._bound(node, work, quiet=quiet))

    def every(self, node: SimBroker | None, interval_ms: int, work: Callable[[], None], *, quiet: bool = False) -> None:
        def tick() -> None:
            work()
            self.after(node, interval_ms, tick, quiet=quiet)

        self.after(node, self.rng.randint(1, interval_ms), tick, quiet=quiet)

    def _bound(self, node: SimBroker | None, work: Callable[[], None], *, quiet: bool = False) -> Callable[[], bool]:
        """The event: False when it did nothing an invariant could see."""
        incarnation = node.incarnation if node is not None else 0

        def run() -> bool:
            if node is not None:
                if not node.running or node.incarnation != incarnation:
                    return False
                if node.paused:
                    node.deferred.append(run)
                    return False
            work()
            return not quiet

        return run

    def run_for(self, duration_ms: int) -> None:
        self.run_until(lambda: False, duration_ms, "time", allow_timeout=True)

    def run_until(
        self, condition: Callable[[], bool], timeout_ms: int, what: str, *, allow_timeout: bool = False
    ) -> None:
        deadline = self.now_ms + timeout_ms
        while not condition():
            if not self._queue or self._queue[0][0] > deadline:
                self.now_ms = max(self.now_ms, deadline)
                if allow_timeout:
                    return
                self.fail(f"'{what}' not reached within {timeout_ms} ms")
            self._step()

    def _step(self) -> None:
        at_ms, _, work = heapq.heappop(self._queue)
        self.now_ms = max(self.now_ms, at_ms)
        self.events += 1
        if self.events > self.max_events:
            self.fail("too many events")
        if work() is False:
            return
        violation = self.invariants.check()
        if violation is not None:
            self.fail(f"invariant violated: {violation}")

    def trace(self, line: str) -> None:
        self.recent.append(f"{self.now_ms} {line}")

    def fail(self, message: str) -> None:
        trace = "\n  ".join(self.recent)
        raise SimulationFailure(
            f"seed={self.seed} t={self.now_ms}ms: {message}\n  config: {self.config}\n  recent events:\n  {trace}"
            f"\n  state:\n{self.describe()}"
        )

    # -- network ----------------------------------------------------------------------------------------
    def _incarnation(self, node_id: int) -> int:
        broker = self.brokers.get(node_id)
        return broker.incarnation if broker is not None else 0

    def send(self, source: int, destination: int, deliver: Callable[[], None], *, duplicable: bool = False) -> bool:
        """One message on the (source, destination) connection: FIFO, random delay; False if lost."""
        cfg = self.config
        if (source, destination) in self.cut:
            return False
        if cfg.drop_probability and self.net_rng.random() < cfg.drop_probability:
            return False
        at = max(self.now_ms + self.net_rng.randint(cfg.min_delay_ms, cfg.max_delay_ms),
                 self._link_clock.get((source, destination), 0))  # fmt: skip
        self._link_clock[(source, destination)] = at
        target = self.brokers.get(destination)
        incarnation = self._incarnation(destination)

        def arrive() -> bool:
            if target is not None:
                if not target.running or target.incarnation != incarnation:
                    return False  # the connection broke with the process
                if target.paused:
                    target.deferred.append(arrive)
                    return False
            deliver()
            return True

        self._schedule(at, arrive)
        if duplicable and cfg.duplicate_probability and self.net_rng.random() < cfg.duplicate_probability:
            self._schedule(self.now_ms + self.net_rng.randint(cfg.min_delay_ms, cfg.max_delay_ms * 10), arrive)
        return True

    def request(
        self,
        source: SimBroker | None,
        destination: int,
        handle: Callable[[Callable[[Any], None]], None],
        on_response: Callable[[Any], None],
        on_failure: Callable[[], None],
        timeout_ms: int,
        *,
        duplicable: bool = False,
    ) -> None:
        """A request/response exchange; ``on_failure`` once on a timeout or a noticed reset."""
        self._correlation += 1
        correlation = self._correlation
        source_id = source.node_id if source is not None else PRODUCER
        self._pending[correlation] = (source_id, self._incarnation(source_id))

        def fail() -> None:
            if self._pending.pop(correlation, None) is not None:
                on_failure()

        def answer(payload: Any) -> None:
            if self._pending.pop(correlation, None) is not None:
                on_response(payload)

        def respond(payload: Any) -> None:
            delivered = self.send(destination, source_id, self._bound(source, lambda: answer(payload)))
            if not delivered and self.net_rng.random() < RESET_NOTICE_PROBABILITY:
                self.after(source, self.net_rng.randint(1, 50), fail)

        sent = self.send(source_id, destination, lambda: handle(respond), duplicable=duplicable)
        if not sent and self.net_rng.random() < RESET_NOTICE_PROBABILITY:
            self.after(source, self.net_rng.randint(1, 50), fail)
        self.after(source, timeout_ms, fail)

    def isolate(self, node_id: int, *, from_controller: bool = True, from_peers: bool = True) -> None:
        others: list[int] = []
        if from_controller:
            others.append(CONTROLLER)
        if from_peers:
            others.extend(b for b in self.brokers if b != node_id)
        for other in others:
            self.cut.add((node_id, other))
            self.cut.add((other, node_id))

    def heal(self) -> None:
        self.cut.clear()

    # -- producers ----------------------------------------------------------------------------------------
    def _produce(self) -> None:
        cfg = self.config
        if self.producing:
            partition = self.rng.randrange(cfg.partitions)
            acks = -1 if self.rng.random() < cfg.acks_all_probability else 1
            count = self.rng.randint(1, 3)
            record_ids = list(range(self.next_record_id, self.next_record_id + count))
            self.next_record_id += count
            part = self.controller.state.topics[TOPIC].partitions[partition]  # fresh metadata
            leader = part.leader
            if leader >= 0:
                broker = self.brokers[leader]

                def handle(respond: Callable[[Any], None]) -> None:
                    broker.handle_produce(partition, record_ids, acks, respond)

                def answered(result: tuple[int, int]) -> None:
                    if result[0]:
                        self.produced["errors"] += 1
                    else:
                        self.produced["acks1" if acks == 1 else "acksall"] += 1

                self.request(None, leader, handle, answered, lambda: None, cfg.produce_timeout_ms + 1000)
        self.after(None, self.rng.randint(*cfg.produce_interval_ms), self._produce)

    # -- faults ---------------------------------------------------------------------------------------------
    def crash(self, node_id: int, *, machine: bool) -> None:
        self.trace(f"broker {node_id} {'machine' if machine else 'process'} crash")
        self.brokers[node_id].crash(machine=machine, rng=self.rng)

    def restart(self, node_id: int) -> None:
        self.trace(f"broker {node_id} restarts")
        self.brokers[node_id].start()

    def pause(self, node_id: int) -> None:
        self.trace(f"broker {node_id} paused")
        self.brokers[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.trace(f"broker {node_id} resumed")
        self.brokers[node_id].resume()

    # -- convergence ---------------------------------------------------------------------------------------
    def converged(self) -> bool:
        """Every partition led, its ISR all replicas, every replica holding the leader's log with
        the high watermark at the log end, every broker's metadata current."""
        state = self.controller.state
        last = len(self.controller.log) - 1
        for broker in self.brokers.values():
            if not broker.running or broker.paused or broker.meta_applied != last:
                return False
        for index, part in state.topics[TOPIC].partitions.items():
            if part.leader < 0 or set(part.isr) != set(part.replicas):
                return False
            leader = self.brokers[part.leader].partitions.get(index)
            if leader is None or not leader.is_leader or leader.high_watermark != leader.log.end:
                return False
            for replica in part.replicas:
                hosted = self.brokers[replica].partitions.get(index)
                if hosted is None or hosted.log.entries != leader.log.entries:
                    return False
                if hosted.high_watermark != leader.high_watermark:
                    return False
        return True

    def describe(self) -> str:
        lines = [f"metadata log end {len(self.controller.log) - 1}, cut links {sorted(self.cut)}"]
        for broker in self.brokers.values():
            lines.append(f"broker {broker.node_id}: running={broker.running} paused={broker.paused} "
                         f"metadata applied {broker.meta_applied} epoch {broker.broker_epoch}")  # fmt: skip
        for index, part in sorted(self.controller.state.topics[TOPIC].partitions.items()):
            lines.append(f"p{index}: leader {part.leader} epoch {part.leader_epoch} isr {list(part.isr)}")
            for replica in part.replicas:
                broker = self.brokers[replica]
                hosted = broker.partitions.get(index)
                if hosted is None:
                    lines.append(f"  broker {replica}: not hosted (running={broker.running})")
                    continue
                lines.append(
                    f"  broker {replica}: running={broker.running} paused={broker.paused} "
                    f"role={hosted.role} end={hosted.log.end} hw={hosted.high_watermark} "
                    f"epochs={[(e.epoch, e.start_offset) for e in hosted.epochs.entries]} "
                    f"head={hosted.log.entries[:4]} tail={hosted.log.entries[-4:]} pending={hosted.pending_isr}"
                )
        return "\n".join(lines)
