"""Discrete-event simulation of a KIP-595 quorum: real ``RaftCore``s, simulated clock, network, disks.

Everything derives from one seed. Events are ordered by ``(time, sequence)``; after every event the
``Invariants`` are checked. The driver here honours the ordering contract of ``StepResult``: persist
effects are applied to the ``SimDisk`` first (a *torn* crash may stop a step part-way through them,
and then nothing of that step is sent), then messages go to the network.

A message is tagged with the incarnation of its destination (a connection): it is dropped if that
node restarted meanwhile, as a TCP connection would have broken.

KIP-630 (``snapshot_every`` > 0): a node's state machine is the list of committed data payloads.
Whenever its high watermark is ``snapshot_every`` entries past its newest snapshot, the node writes
a snapshot (as ``RaftDriver`` does: the payloads, the VotersRecord in effect) and, with some
probability, deletes its log below it (retention). A FetchSnapshot answer gets its bytes from the
leader's disk when it leaves (as the driver reads the file), so a lagging replica fetches and
installs the snapshot; every snapshot written or installed is checked against the committed data.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from broker.raft.config import RaftConfig
from broker.raft.core import RaftCore
from broker.raft.effects import DeleteLogPrefix, FatalError, InstallSnapshot, StepResult
from broker.raft.invariants import RaftInvariantError
from broker.raft.messages import ErrorCode, FetchSnapshotResponse, Inbound, Message, is_response
from broker.raft.snapshot import decode_snapshot, encode_snapshot
from broker.raft.store import voters_from_control, voters_to_control
from tests.sim.disk import SimDisk
from tests.sim.invariants import Invariants, InvariantViolation
from tests.sim.network import NetworkConfig, SimNetwork

CLUSTER_ID = "sim-cluster-0001"
MAX_EVENTS = 400_000
MAX_UNCOMMITTED = 8
DISCONNECT_PROBABILITY = 0.75  # of a randomly lost message; partitions always lose silently


class SimulationFailure(AssertionError):
    pass


@dataclass(slots=True)
class SimNode:
    node_id: int
    config: RaftConfig
    disk: SimDisk = field(default_factory=SimDisk)
    core: RaftCore | None = None
    incarnation: int = 0
    tick_due: int | None = None
    torn_crash_pending: bool = False
    appended: int = 0
    origins: dict[tuple[int, int], int] = field(default_factory=dict)  # (src, corr) -> src incarnation

    @property
    def running(self) -> bool:
        return self.core is not None


class Cluster:
    def __init__(
        self,
        seed: int,
        num_voters: int,
        num_observers: int = 0,
        *,
        network: NetworkConfig | None = None,
        append_interval_ms: tuple[int, int] = (20, 80),
        snapshot_every: int = 0,
        snapshot_chunk_bytes: int = 1 << 20,
        prefix_delete_probability: float = 0.7,
        **config_overrides: int,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.snapshot_every = snapshot_every
        self.snapshot_chunk_bytes = snapshot_chunk_bytes
        self.prefix_delete_probability = prefix_delete_probability
        self.snapshots_written = 0
        self.now_ms = 0
        self.voters = frozenset(range(num_voters))
        self.nodes: dict[int, SimNode] = {}
        for node_id in range(num_voters + num_observers):
            config = RaftConfig(node_id=node_id, voters=self.voters, **config_overrides)
            self.nodes[node_id] = SimNode(node_id, config)
        self.network = SimNetwork(random.Random(self.rng.getrandbits(64)), network or NetworkConfig())
        self.invariants = Invariants(self.nodes, self.voters)
        self._queue: list[tuple[int, int, str, Any]] = []
        self._sequence = 0
        self._append_interval_ms = append_interval_ms
        self.events = 0
        self.trace: deque[str] = deque(maxlen=40)
        self._schedule(self.rng.randint(*append_interval_ms), "append", None)

    # -- event queue -------------------------------------------------------------------------------
    def _schedule(self, at_ms: int, kind: str, data: Any) -> None:
        self._sequence += 1
        heapq.heappush(self._queue, (at_ms, self._sequence, kind, data))

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
        at_ms, _, kind, data = heapq.heappop(self._queue)
        self.now_ms = max(self.now_ms, at_ms)
        self.events += 1
        if self.events > MAX_EVENTS:
            self.fail("too many events")
        try:
            if kind == "deliver":
                self._deliver(*data)
            elif kind == "tick":
                self._tick(*data)
            elif kind == "failed":
                self._request_failed(*data)
            elif kind == "append":
                self._client_append()
            self.invariants.check()
        except (InvariantViolation, RaftInvariantError) as exc:  # the simulation's checks or the core's own
            self.fail(f"invariant violated: {exc}")

    def fail(self, message: str) -> None:
        trace = "\n  ".join(self.trace)
        raise SimulationFailure(f"seed={self.seed} t={self.now_ms}ms: {message}\n  recent events:\n  {trace}")

    # -- driver --------------------------------------------------------------------------------------
    def _execute(self, node: SimNode, result: StepResult) -> None:
        """Apply a step's effects in the contract's order: persist (durably), send, notify."""
        torn_at = self.rng.randint(0, len(result.persist)) if node.torn_crash_pending else None
        for index, effect in enumerate(result.persist):
            if index == torn_at:
                break
            self.invariants.before_persist(node, effect)
            if isinstance(effect, InstallSnapshot):
                self.invariants.check_snapshot(node, effect.snapshot_id, effect.data)
                self.trace.append(f"{self.now_ms} node {node.node_id} installs snapshot {effect.snapshot_id}")
            node.disk.apply(effect)
        if torn_at is not None:
            self.trace.append(f"{self.now_ms} node {node.node_id} torn crash after {torn_at} effects")
            self._crash(node)
            return
        self.invariants.after_persist(node)
        for send in result.send:
            self.invariants.on_send(node, send)
            self._send(node, send.destination, send.correlation_id, send.message)
        for item in result.notify:
            if isinstance(item, FatalError):
                self.fail(f"node {node.node_id} fatal error: {item}")
        self._maybe_snapshot(node)
        self._schedule_tick(node)

    # -- KIP-630 snapshots -------------------------------------------------------------------------
    def _state_payloads(self, node: SimNode, end: int) -> list[bytes]:
        """The node's state machine below ``end``: its newest snapshot's records, then the data
        payloads of its log up to ``end``."""
        core = node.core
        assert core is not None
        latest = node.disk.latest_snapshot()
        payloads: list[bytes] = []
        base = 0
        if latest is not None:
            payloads = list(decode_snapshot(latest, node.disk.snapshots[latest]).records)
            base = latest.end_offset
        elif core.log.start_offset > 0:
            self.fail(f"node {node.node_id}: log starts at {core.log.start_offset} without a snapshot")
        for entry in core.log.entries():
            if base <= entry.offset < end and isinstance(entry.payload, bytes):
                payloads.append(entry.payload)
        return payloads

    def _maybe_snapshot(self, node: SimNode) -> None:
        core = node.core
        if not self.snapshot_every or core is None or core.fatal_error is not None:
            return
        end = core.high_watermark
        latest = node.disk.latest_snapshot()
        base = latest.end_offset if latest is not None else 0
        if end - base < self.snapshot_every or end <= core.log.start_offset:
            return
        snapshot_id = core.snapshot_id_at(end)
        voters = core.snapshot_voters(end)
        data = encode_snapshot(
            snapshot_id,
            self._state_payloads(node, end),
            self.now_ms,
            timestamp_ms=self.now_ms,
            max_batch_records=7,
            voters=voters_to_control(voters) if voters is not None else None,
        )
        self.invariants.check_snapshot(node, snapshot_id, data)
        node.disk.write_snapshot(snapshot_id, data)
        core.snapshot_created(snapshot_id)
        self.snapshots_written += 1
        self.trace.append(f"{self.now_ms} node {node.node_id} snapshot {snapshot_id}")
        if self.rng.random() < self.prefix_delete_probability:
            start = self.rng.randint(core.log.start_offset + 1, end)
            self._execute(node, core.delete_log_prefix(start))

    def _fill_snapshot_chunk(self, node: SimNode, message: FetchSnapshotResponse) -> FetchSnapshotResponse:
        """What the driver does when a FetchSnapshot answer leaves: read the file."""
        data = node.disk.snapshots.get(message.snapshot_id)
        if data is None:
            return replace(message, error_code=ErrorCode.SNAPSHOT_NOT_FOUND)
        if message.position > len(data):
            return replace(message, error_code=ErrorCode.POSITION_OUT_OF_RANGE)
        chunk = data[message.position : message.position + message.max_bytes]
        return replace(message, size=len(data), data=chunk)

    def _send(self, node: SimNode, destination: int, correlation_id: int, message: Message) -> None:
        if isinstance(message, FetchSnapshotResponse) and message.error_code == ErrorCode.NONE and message.size < 0:
            message = self._fill_snapshot_chunk(node, message)
        target = self.nodes.get(destination)
        if target is None or not target.running:
            return
        if is_response(message):
            incarnation = node.origins.pop((destination, correlation_id), None)
            if incarnation is None:
                return
        else:
            incarnation = target.incarnation
        if self.network.is_cut(node.node_id, destination):
            return  # a partition: silent loss, the request times out
        delays = self.network.delivery_delays(node.node_id, destination)
        for delay in delays:
            packet = (node.node_id, destination, incarnation, correlation_id, message)
            self._schedule(self.now_ms + delay, "deliver", packet)
        if not delays and self.rng.random() < DISCONNECT_PROBABILITY:
            # A lost message usually shows as a broken connection that the requester notices.
            requester, requester_incarnation = (
                (destination, incarnation) if is_response(message) else (node.node_id, node.incarnation)
            )
            failure = (requester, requester_incarnation, node.node_id if is_response(message) else destination)
            self._schedule(self.now_ms + self.rng.randint(1, 50), "failed", (*failure, correlation_id))

    def _deliver(self, source: int, destination: int, incarnation: int, correlation_id: int, message: Message) -> None:
        node = self.nodes[destination]
        if node.core is None or node.incarnation != incarnation:
            return
        if not is_response(message):
            node.origins[(source, correlation_id)] = self.nodes[source].incarnation
        self.trace.append(f"{self.now_ms} {source}->{destination} {message}")
        self._execute(node, node.core.handle(Inbound(source, correlation_id, message), self.now_ms))

    def _request_failed(self, node_id: int, incarnation: int, peer: int, correlation_id: int) -> None:
        node = self.nodes[node_id]
        if node.core is None or node.incarnation != incarnation:
            return
        self.trace.append(f"{self.now_ms} node {node_id}: request {correlation_id} to {peer} failed")
        self._execute(node, node.core.request_failed(peer, correlation_id, self.now_ms))

    def _tick(self, node_id: int, incarnation: int, due_ms: int) -> None:
        node = self.nodes[node_id]
        if node.core is None or node.incarnation != incarnation or node.tick_due != due_ms:
            return
        node.tick_due = None
        self._execute(node, node.core.tick(self.now_ms))

    def _schedule_tick(self, node: SimNode) -> None:
        if node.core is None:
            return
        deadline = node.core.next_deadline_ms(self.now_ms)
        if deadline is not None and (node.tick_due is None or deadline < node.tick_due):
            node.tick_due = deadline
            self._schedule(deadline, "tick", (node.node_id, node.incarnation, deadline))

    def _client_append(self) -> None:
        for node in self.nodes.values():
            core = node.core
            # Like a controller with back-pressure, a leader takes no more than a few writes
            # beyond its high watermark.
            if core is not None and core.is_leader and core.log.end_offset - core.high_watermark < MAX_UNCOMMITTED:
                node.appended += 1
                payload = f"n{node.node_id}.i{node.incarnation}.r{node.appended}".encode()
                self._execute(node, core.append([payload], self.now_ms).step)
        self._schedule(self.now_ms + self.rng.randint(*self._append_interval_ms), "append", None)

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.core is not None:
            raise RuntimeError(f"node {node_id} is running")
        node.incarnation += 1
        node.tick_due = None
        node.torn_crash_pending = False
        node.origins.clear()
        snapshot_id = node.disk.latest_snapshot()
        snapshot_voters = None
        if snapshot_id is not None:
            # Start-up as the driver does it: the newest snapshot, then only the tail of the log.
            if node.disk.log_start < snapshot_id.end_offset:
                node.disk.apply(DeleteLogPrefix(snapshot_id.end_offset, snapshot_id.epoch))
            carried = decode_snapshot(snapshot_id, node.disk.snapshots[snapshot_id]).voters
            snapshot_voters = voters_from_control(carried) if carried is not None else None
        node.core = RaftCore(
            node.config,
            stored_state=node.disk.quorum_state,
            log_entries=node.disk.durable_log,
            cluster_id=CLUSTER_ID,
            rng=random.Random(self.rng.getrandbits(64)),
            now_ms=self.now_ms,
            snapshot_id=snapshot_id,
            snapshot_voters=snapshot_voters,
        )
        node.core.snapshot_chunk_bytes = self.snapshot_chunk_bytes
        self.invariants.on_restart(node)
        self.trace.append(f"{self.now_ms} start node {node_id} (incarnation {node.incarnation})")
        self._execute(node, node.core.start(self.now_ms))

    def start_all(self) -> None:
        for node_id in self.nodes:
            self.start(node_id)

    def _crash(self, node: SimNode) -> None:
        node.core = None
        node.tick_due = None
        node.torn_crash_pending = False
        node.disk.crash()

    def kill(self, node_id: int, *, torn: bool = False) -> None:
        """Hard stop; with ``torn`` the node dies part-way through its next step instead."""
        node = self.nodes[node_id]
        self.trace.append(f"{self.now_ms} kill node {node_id} torn={torn}")
        if torn:
            node.torn_crash_pending = True
        else:
            self._crash(node)

    def kill_and_wipe(self, node_id: int) -> None:
        self.kill(node_id)
        self.nodes[node_id].disk.wipe()

    def shutdown(self, node_id: int) -> None:
        """Graceful: the leader resigns (EndQuorumEpoch is sent), then the node stops."""
        node = self.nodes[node_id]
        assert node.core is not None
        self._execute(node, node.core.resign(self.now_ms))
        self._crash(node)

    # -- observations --------------------------------------------------------------------------------
    def running(self, node_ids: Iterable[int] | None = None) -> list[SimNode]:
        ids = self.nodes if node_ids is None else node_ids
        return [self.nodes[i] for i in ids if self.nodes[i].running]

    def latest_leader(self) -> int | None:
        best: tuple[int, int] | None = None
        for node in self.running():
            assert node.core is not None
            if node.core.is_leader and (best is None or node.core.epoch > best[0]):
                best = (node.core.epoch, node.node_id)
        return None if best is None else best[1]

    def has_consistent_leader(self) -> bool:
        """Every running node's durable quorum state names the same leader and epoch."""
        states = {
            (n.disk.quorum_state.leader_id, n.disk.quorum_state.leader_epoch)
            for n in self.running()
            if n.disk.quorum_state is not None
        }
        return len(states) == 1 and next(iter(states))[0] >= 0 and all(n.disk.quorum_state for n in self.running())

    def high_watermark(self, node_id: int) -> int:
        core = self.nodes[node_id].core
        return core.high_watermark if core is not None else -1

    def max_high_watermark(self, node_ids: Iterable[int] | None = None) -> int:
        values = [self.high_watermark(n.node_id) for n in self.running(node_ids)]
        return max(values, default=0)

    def all_reached(self, high_watermark: int, node_ids: Iterable[int] | None = None) -> bool:
        nodes = self.running(node_ids)
        return bool(nodes) and all(self.high_watermark(n.node_id) >= high_watermark for n in nodes)

    def any_reached(self, high_watermark: int) -> bool:
        return self.max_high_watermark() >= high_watermark
