"""Nemeses (faults, each with its heal) and the seeded scheduler that mixes them.

Every nemesis acts on one node (``target``) and is undone by ``heal``:

- ``isolate``: a full partition, node | the other two (minority | majority); clients still reach it;
- ``isolate-leader``: the same, the target being the current leader of partition 0;
- ``isolate-controller``: the same, the target being the active controller (the quorum's leader);
- ``one-way``: the target hears nothing from its peers, its peers still hear it;
- ``bridge``: the other nodes split into two halves that cannot reach each other, the target
  (the bridge) still reaching both (Jepsen's bridge partition);
- ``loss``: packets arriving at the target (from peers and clients) dropped at random with
  probability ``LOSS_PROBABILITY`` (iptables ``statistic --mode random``);
- ``kill``: SIGKILL, healed by a restart on the same data (a crash);
- ``pause``: SIGSTOP, healed by SIGCONT;
- ``disk-full``: the target broker's log dir (a tmpfs, ``NamespacedCluster(disk_mb=...)``)
  filled with a ballast file until ENOSPC; healed by deleting it. A node the full disk stopped
  (its fatal error, printed on its output) is restarted, also when it stops only after the heal.
  Only in ``DISK_NEMESES``, for clusters with small disks;
- ``power-loss``: SIGKILL and every write not yet fsynced lost (the node's fault filesystem,
  ``NamespacedCluster(faultfs=True)``), healed by a restart on what was synced.

A fault's target is any node (a broker or, in the 3 + 3 shape, a controller), except
``disk-full``'s (a broker) and ``isolate-leader``'s (the leader of partition 0).

The scheduler applies every nemesis once in a seeded order, then draws them at random, one fault
at a time (the fault budget of RF 3 / ``min.insync.replicas`` 2:
one replica down), holds it for a seeded random while, heals it, then waits (polling, with a
generous deadline) until every partition has its whole ISR again before the next one, so two
faults never overlap in effect.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.cluster import NamespacedCluster

NEMESES = ("isolate", "isolate-leader", "isolate-controller", "one-way", "bridge", "loss", "kill", "pause")
DISK_NEMESES = (*NEMESES, "disk-full")
LOSS_PROBABILITY = 0.3


@dataclass
class Fault:
    """One applied fault, for the report: what, on which node, when (monotonic seconds)."""

    nemesis: str
    target: int
    started: float
    healed: float | None = None
    recovered: float | None = None
    observed: Any = None  # what ``Scheduler.observe`` saw just before the heal (e.g. leaders, ISRs)

    def to_json(self, origin: float) -> dict[str, Any]:
        def rel(t: float | None) -> float | None:
            return None if t is None else round(t - origin, 3)

        return {"nemesis": self.nemesis, "target": self.target, "start": rel(self.started),
                "heal": rel(self.healed), "recovered": rel(self.recovered), "observed": self.observed}  # fmt: skip


def apply(cluster: NamespacedCluster, nemesis: str, target: int) -> None:
    net = cluster.network
    others = [n for n in cluster.all_ids if n != target]
    peers = [net.address(n) for n in others]
    if nemesis.startswith("isolate"):
        net.drop(at=target, sources=peers)
        for n in others:
            net.drop(at=n, sources=[net.address(target)])
    elif nemesis == "bridge":
        half = len(others) // 2
        left, right = others[:half], others[half:]
        for a in left:
            net.drop(at=a, sources=[net.address(b) for b in right])
        for b in right:
            net.drop(at=b, sources=[net.address(a) for a in left])
    elif nemesis == "one-way":
        net.drop(at=target, sources=peers)
    elif nemesis == "loss":
        net.drop(at=target, sources=[*peers, net.client_address], probability=LOSS_PROBABILITY)
    elif nemesis == "kill":
        cluster.kill(target)
    elif nemesis == "pause":
        cluster.pause(target)
    elif nemesis == "disk-full":
        cluster.fill_disk(target)
    elif nemesis == "power-loss":
        cluster.power_loss(target)
    else:
        raise ValueError(nemesis)


def heal(cluster: NamespacedCluster, nemesis: str, target: int) -> None:
    if nemesis in ("kill", "power-loss"):
        cluster.restart(target)
    elif nemesis == "pause":
        cluster.resume(target)
    elif nemesis == "disk-full":
        cluster.free_disk(target)
        if not cluster.nodes[target].running:  # the full disk stopped it: restart on the same data
            cluster.nodes[target].start()
    else:
        cluster.network.heal()


def heal_all(cluster: NamespacedCluster) -> None:
    """Whatever is still faulted: rules flushed, paused nodes continued, dead nodes restarted."""
    cluster.network.heal()
    for n, node in cluster.nodes.items():
        if n in cluster.node_ids and cluster.disk_mb is not None:
            cluster.free_disk(n)
        cluster.resume(n)
        if not node.running:
            node.start()


@dataclass
class Scheduler:
    """``faults`` faults drawn from ``nemeses`` with ``seed``; ``hold_s`` bounds each fault's length;
    ``recovered(topic)`` is polled after each heal (see the module docstring)."""

    cluster: NamespacedCluster
    seed: int
    faults: int
    recovered: Callable[[], bool]
    nemeses: tuple[str, ...] = NEMESES
    hold_s: tuple[float, float] = (3.0, 6.0)
    recovery_timeout_s: float = 120.0
    leader_of: Callable[[], int | None] = lambda: None
    observe: Callable[[int], Any] = lambda target: None
    log: list[Fault] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(self.seed)
        try:
            # every nemesis once (in a seeded order), then drawn at random: a short schedule covers all
            first = rng.sample(self.nemeses, len(self.nemeses))
            for i in range(self.faults):
                if self.stop.is_set():
                    return
                nemesis = first[i] if i < len(first) else rng.choice(self.nemeses)
                brokers_only = nemesis in ("disk-full", "power-loss")
                target = rng.choice(self.cluster.node_ids if brokers_only else self.cluster.all_ids)
                if nemesis == "isolate-leader":
                    target = self.leader_of() or target
                elif nemesis == "isolate-controller":
                    target = self.cluster.active_controller() or target
                self._stopping_on_full_disk()  # a late stop after an earlier disk-full: restarted
                fault = Fault(nemesis, target, time.monotonic())
                self.log.append(fault)
                apply(self.cluster, nemesis, target)
                self.stop.wait(rng.uniform(*self.hold_s))  # the fault's scheduled length
                try:
                    fault.observed = self.observe(target)
                except (OSError, ValueError, KeyError) as exc:
                    fault.observed = repr(exc)
                heal(self.cluster, nemesis, target)
                fault.healed = time.monotonic()
                self._await_recovery(fault)
        except BaseException as exc:
            self.error = exc
            raise

    def _await_recovery(self, fault: Fault) -> None:
        deadline = time.monotonic() + self.recovery_timeout_s
        while self._stopping_on_full_disk() or not self._recovered():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no full ISR {self.recovery_timeout_s}s after healing {fault}")
            self.stop.wait(0.2)
        fault.recovered = time.monotonic()

    def _stopping_on_full_disk(self) -> bool:
        """A node that stopped itself on a full disk is restarted, as its supervisor would (its
        clean shutdown takes seconds, so it may exit only after the heal freed the disk, or even
        after the ISRs looked whole); True while one is still stopping: not recovered yet."""
        stopping = False
        for n in self.cluster.node_ids:
            node = self.cluster.nodes[n]
            if self.cluster.disk_mb is None or not self.cluster.stopped_on_full_disk(n):
                continue
            if node.running:
                stopping = True
            else:
                node.start()
        return stopping

    def _recovered(self) -> bool:
        try:
            return bool(self.recovered())
        except (OSError, ValueError, KeyError):
            return False
