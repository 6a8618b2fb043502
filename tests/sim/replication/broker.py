"""``SimBroker``: a driver of the real replication core over simulated disks and network (see ``model``).

The decisions are the broker's own code: ``ReplicaState`` (roles, high watermark, ISR proposals,
acks=all) through ``SimPartition``, and the delayed produces and follower long-polls in a real
``DelayedOperationPurgatory`` (``DelayedProduce``, ``DelayedFetch``) completed by the partition's
listener, as ``ReplicaManager`` drives them. What remains here is the I/O a driver does: the
metadata fetches, the controller requests, the follower fetch loop and the network answers."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.controller.partition_changes import IsrChange
from broker.metadata.cluster_state import ClusterState, build_image
from broker.metadata.image import MetadataImage
from broker.metadata.replay import apply_payload
from broker.replication.leader_epoch import diverging_epoch, truncation_offset
from broker.replication.purgatory import DelayedFetch, DelayedOperationPurgatory, DelayedProduce
from pyspark_log.wire.errors import ErrorCode
from tests.sim.replication.config import CLUSTER_ID, CONTROLLER, TOPIC, TOPIC_ID
from tests.sim.replication.partition import SimPartition
from tests.sim.replication.storage import SimDisk

if TYPE_CHECKING:
    from tests.sim.replication.model import Simulation


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
        self.delayed_produce: DelayedOperationPurgatory[int] = DelayedOperationPurgatory("Produce")
        self.delayed_fetch: DelayedOperationPurgatory[int] = DelayedOperationPurgatory("Fetch")
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
        self.delayed_produce = DelayedOperationPurgatory("Produce")
        self.delayed_fetch = DelayedOperationPurgatory("Fetch")
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
            self.serving = True  # ``BrokerSession.wait_registration_applied`` returned
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
                elif self.node_id in part.replicas:
                    hosted = self._hosted(part.partition)
                    if hosted.become_follower(part):
                        followers_changed = True
        brokers_moved = old is None or old.brokers != new.brokers
        if followers_changed or brokers_moved:
            self.replan()

    def _hosted(self, partition: int) -> SimPartition:
        hosted = self.partitions.get(partition)
        if hosted is None:
            hosted = self.partitions[partition] = SimPartition(self.node_id, partition, self.disk)
            hosted.listener = lambda: self._try_complete_delayed(partition)
        return hosted

    def _try_complete_delayed(self, partition: int) -> None:
        """``ReplicaManager._try_complete_delayed`` (Kafka's ``Partition.tryCompleteDelayedRequests``)."""
        self.delayed_produce.check_and_complete(partition)
        self.delayed_fetch.check_and_complete(partition)

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

    # -- produce (ReplicaManager.append_records) -----------------------------------------------------------
    def handle_produce(self, partition: int, record_ids: list[int], acks: int, respond: Callable[[Any], None]) -> None:
        hosted = self.partitions.get(partition)
        if hosted is None or not hosted.is_leader or not self.serving:
            respond((ErrorCode.NOT_LEADER_OR_FOLLOWER, -1))
            return
        min_isr = self.sim.config.min_insync_replicas
        if acks == -1:
            code = hosted.state.acks_all_refusal(min_isr)
            if code:
                respond((code, -1))
                return
        first, last = hosted.append_as_leader(record_ids)
        epoch = hosted.leader_epoch
        if acks == 1:
            self.sim.invariants.on_ack(self, partition, first, last, epoch, acks)
            respond((ErrorCode.NONE, first))
            return

        def done(codes: list[int]) -> None:
            (code,) = codes
            if code == ErrorCode.NONE:
                self.sim.invariants.on_ack(self, partition, first, last, epoch, acks)
            respond((code, first))

        operation = DelayedProduce(
            [(partition, last + 1)], lambda _, required: hosted.state.acks_status(required, min_isr), done
        )
        if not self.delayed_produce.try_complete_else_watch(operation, (partition,)):
            self.sim.after(self, self.sim.config.produce_timeout_ms, operation.expire)

    # -- follower reads at the leader (ReplicaManager.read_for_follower + api/fetch long-poll) -----------
    def handle_fetch(self, replica_id: int, request: dict[str, int], respond: Callable[[Any], None]) -> None:
        deadline = self.sim.now_ms + self.sim.config.fetch_wait_max_ms
        partition = request["partition"]
        answered = False
        first_read = True

        def attempt() -> None:
            nonlocal answered, first_read
            if answered:
                return
            result = self._read_for_follower(replica_id, request, record_position=first_read)
            first_read = False
            if result["error_code"] or result["records"] or self.sim.now_ms >= deadline:
                answered = True
                respond(result)
                return
            seen = self._follower_position(partition)  # ReplicaManager.wait_for_data (follower)
            waiting = DelayedFetch(lambda: self._follower_position(partition) != seen, attempt)
            self.delayed_fetch.try_complete_else_watch(waiting, (partition,))

        self.sim.after(self, self.sim.config.fetch_wait_max_ms, attempt)
        attempt()

    def _follower_position(self, partition: int) -> tuple[object, ...]:
        hosted = self.partitions.get(partition)
        return () if hosted is None else (hosted, hosted.role, hosted.log.end, hosted.high_watermark)

    def _read_for_follower(self, replica_id: int, request: dict[str, int], *, record_position: bool) -> dict[str, Any]:
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
        if record_position:  # once per request, as ReplicaManager.read_for_follower
            hosted.record_follower_fetch(replica_id, fetch_offset, self.sim.now_ms)
            self._maybe_expand_isr(hosted, replica_id)
        records = target.entries[fetch_offset : fetch_offset + self.sim.config.fetch_max_records]
        return {**out, "error_code": ErrorCode.NONE, "high_watermark": hosted.high_watermark, "records": records,
                "diverging_epoch": None}  # fmt: skip

    # -- ISR changes (ReplicaManager over ReplicaState) -------------------------------------------------
    def _maybe_expand_isr(self, hosted: SimPartition, replica_id: int) -> None:
        new_isr = hosted.state.isr_expansion(replica_id, self.sim.now_ms)
        if new_isr is not None:
            self._propose_isr(hosted, new_isr, "expand")

    def check_isr(self) -> None:
        now = self.sim.now_ms
        for hosted in list(self.partitions.values()):
            proposal = hosted.state.isr_check(now, hosted.log.end, self.sim.config.lag_time_max_ms)
            if proposal is not None:
                self._propose_isr(hosted, *proposal)

    def _propose_isr(self, hosted: SimPartition, new_isr: tuple[int, ...], kind: str) -> None:
        key = hosted.partition
        image = self.image
        state = hosted.state
        if image is None or TOPIC not in image.topics or state.role is None or not state.may_propose(self.sim.now_ms):
            return
        change = IsrChange(TOPIC_ID, key, state.leader_epoch, new_isr, state.role.partition_epoch)
        state.propose_isr(new_isr)
        self.sim.trace(f"{self} proposes ISR {kind} {list(new_isr)} for p{key} (epoch {state.leader_epoch})")
        self._alter_partition(change, lambda code: self._isr_change_done(hosted, change, code))

    def _isr_change_done(self, hosted: SimPartition, change: IsrChange, code: int) -> None:
        """The end of ``_send_isr_change``."""
        self.sim.trace(f"{self} ISR change {list(change.new_isr)} for p{change.partition}: code {code}")
        if hosted.state.on_isr_answer(
            change.new_isr, code, self.sim.now_ms, self.sim.config.fetch_backoff_ms, hosted.log.end
        ):
            self._try_complete_delayed(hosted.partition)

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
