"""Discrete-event simulation of partition replication: simulated brokers, controller, network, disks.

Everything derives from one seed (``random.Random(seed)``) and an injected clock (``Simulation.now_ms``).
Events are ordered by ``(time, sequence)``; after every event the ``ReplicationInvariants`` are checked.

What is real and what is simulated:

* **Real (imported, never reimplemented):** the replica core ``broker.replication.replica_state``
  (``ReplicaState``: roles from the image, the high watermark, follower progress, the leader-epoch
  cache updates, ISR expansion/shrink proposals and their answers, the acks=all judgement), the
  delayed-operation purgatory ``broker.replication.purgatory`` (``DelayedProduce`` for acks=all,
  ``DelayedFetch`` for the follower long-poll), the ISR and high-watermark rules
  (``broker.replication.isr``), the leader's divergence answer and the follower's truncation point
  (``broker.replication.leader_epoch``), the controller's partition changes
  (``broker.controller.partition_changes``: ``alter_partition``, ``fence_broker``,
  ``unfence_broker``, ``register_broker``), and the metadata records applied with
  ``broker.metadata.replay.apply_payload`` and read through ``build_image`` on every broker.
* **Driven here (the I/O a driver does, over simulated logs and network):** ``SimPartition``
  feeds a ``SimLog``'s appends and truncations to the real ``ReplicaState`` as ``Partition`` feeds
  a real log's; ``SimBroker`` is the driver ``ReplicaManager`` is (which events reach the core,
  the purgatories completed by each partition's listener, AlterPartition requests), plus the
  follower fetch loop of ``fetcher.py`` and the broker side of ``controller/quorum.py``
  (registration, heartbeats, ``alter_partition`` waiting for the own image). ``SimController``
  follows the active controller of ``quorum.py`` (``handle_registration``, ``handle_heartbeat``,
  ``fence_expired_brokers``, ``handle_alter_partition``); the metadata quorum itself is one
  always-available node (``tests/sim`` simulates the Raft quorum on its own).
* **Simulated:** the network (per-connection FIFO delivery with random delays, drops that break
  the request, duplicated controller requests as a client retry would send, cut links), the disks
  (a log is a list of ``(leader epoch, record id)``; ``flushed`` is what survives a machine crash;
  the leader-epoch checkpoint is rewritten without fsync, as ``LeaderEpochFile.write`` is, and
  becomes durable with the log's next flush, which also raises the recovery point; a rewrite
  lowers the recovery point to the first changed entry, as ``LogFlusher.sync_before`` does; the
  high-watermark checkpoint is written every ``hw_checkpoint_interval_ms``), and the faults:
  pauses (SIGSTOP: timers and inbound messages wait), process crashes (the page cache survives:
  the whole log, the last checkpoint written) and machine crashes (only a random prefix of the
  log above its flushed offset survives, never less than the flushed offset; the epoch
  checkpoint is its durable version, the last one written, or damaged).

One record id per appended record (global counter) makes "the same record" exact: two replicas
agree at an offset when they hold the same record id there (which implies the same epoch).

Layout: ``config`` (settings), ``storage`` (``SimLog``, ``SimDisk``), ``partition``
(``SimPartition``), ``broker`` (``SimBroker``), ``controller`` (``SimController``); this module holds
the event queue, the network and the faults (``Simulation``).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable
from typing import Any

from broker.metadata.records import (
    ClusterIdRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from tests.sim.replication.broker import SimBroker
from tests.sim.replication.config import (
    CLUSTER_ID,
    CONTROLLER,
    MAX_EVENTS,
    PRODUCER,
    RESET_NOTICE_PROBABILITY,
    TOPIC,
    TOPIC_ID,
    SimConfig,
    SimulationFailure,
)
from tests.sim.replication.controller import SimController


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
