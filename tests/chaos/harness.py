"""What the chaos tests (test_queue.py, test_power_loss.py, test_transactions.py) share: the
namespaced cluster of a module fixture, topic creation, the "full ISR" and "leader of partition 0"
probes the scheduler polls, and the run of a seeded fault schedule against running workloads.

- ``namespaced_cluster`` skips without root/namespaces (``netns.available``, plus any extra
  check such as ``faultfs.available``), sweeps what a killed run left, creates the network, starts
  the cluster and always closes both.
- ``wait_for`` polls a probe (tests/waiting.py) with the chaos tier's deadline: a probe that
  reaches a node being faulted may fail with a socket error, which counts as "not yet".
- ``run_schedule`` starts the workloads, waits until they are under way, runs the scheduler
  (nemesis.py) in a thread with a deadline of 30 s per fault plus 300 s, and in every case stops
  it, heals everything and joins the workloads (Kafka documentation §4.7 "Replication" is what
  the checkers then hold the history to).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos import netns
from tests.chaos.cluster import NamespacedCluster
from tests.chaos.nemesis import Scheduler, heal_all
from tests.chaos.netns import Network
from tests.waiting import wait_until

T = TypeVar("T")

WAIT_S = 120.0
RETRY_ON: tuple[type[BaseException], ...] = (OSError, ValueError, KeyError, ConnectionError)
"""Errors of a probe that reached a faulted node: "not yet", not a failure."""


class Workload(Protocol):
    """A writer or reader thread of workload.py, txn.py or metadata.py."""

    def start(self) -> None: ...

    def join(self) -> None: ...


def wait_for(condition: Callable[[], T], what: str, timeout_s: float = WAIT_S) -> T:
    """``condition()``'s first true value, polled every 0.2 s for up to ``timeout_s``."""
    return wait_until(condition, what, timeout_s=timeout_s, interval_s=0.2, retry_on=RETRY_ON)


@contextmanager
def namespaced_cluster(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    nodes: Sequence[int],
    overrides: Mapping[str, str],
    *,
    unavailable: Callable[[], str | None] = lambda: None,
    **options: Any,
) -> Iterator[NamespacedCluster]:
    """A started ``NamespacedCluster`` of ``nodes`` (each in its own namespace) for a module
    fixture; ``options`` go to ``NamespacedCluster`` (``controllers``, ``disk_mb``, ``faultfs``).
    Skips the module when namespaces (or what ``unavailable`` names) are missing."""
    why = netns.available() or unavailable()
    if why:
        pytest.skip(why)
    netns.sweep_stale()
    network = Network(tuple(nodes))
    network.create()
    try:
        cluster = NamespacedCluster(tmp_path_factory.mktemp(name), network, overrides=dict(overrides), **options)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.close()
    finally:
        network.close()


def create_topic(cluster: NamespacedCluster, topic: str, partitions: int) -> None:
    """``topic`` with replication factor 3 and ``min.insync.replicas`` 2."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result(60)


def full_isr(cluster: NamespacedCluster, topic: str, partitions: int, brokers: Sequence[int]) -> bool:
    """Every partition of ``topic`` led by one of ``brokers`` with all of them in its ISR, as the
    first running broker sees it."""
    for via in brokers:
        if not cluster.nodes[via].running:
            continue
        view = cluster.partitions(topic, via)
        return len(view) == partitions and all(
            v.leader in brokers and set(v.isr) == set(brokers) for v in view.values()
        )
    return False


def leader_of_0(cluster: NamespacedCluster, topic: str, brokers: Sequence[int], via: Sequence[int]) -> int | None:
    """The leader of partition 0 as the first of ``via`` that answers sees it (None: no answer,
    or no leader among ``brokers``)."""
    for node in via:
        try:
            leader = cluster.partitions(topic, node).get(0)
        except (OSError, ConnectionError):
            continue
        return leader.leader if leader is not None and leader.leader in brokers else None
    return None


def run_schedule(
    cluster: NamespacedCluster,
    scheduler: Scheduler,
    workloads: Sequence[Workload],
    under_way: Callable[[], bool],
    what: str,
) -> None:
    """Start ``workloads``, wait for ``under_way`` (named ``what``), run ``scheduler`` to its end;
    then, whatever happened, stop it, heal everything and join the workloads.

    A scheduler that failed (a fault after which the cluster did not recover in time: liveness)
    leaves its error in ``scheduler.error`` for the caller, which checks the history first (safety)
    and fails on it after writing the report; a scheduler that never finishes fails here."""
    try:
        for w in workloads:
            w.start()
        wait_for(under_way, what)
        thread = threading.Thread(target=scheduler.run, name="chaos-scheduler", daemon=True)
        thread.start()
        thread.join(30 * scheduler.faults + 300)
        assert not thread.is_alive(), "the scheduler did not finish"
        if scheduler.error is not None:
            print(f"chaos: the schedule stopped early: {scheduler.error!r}\n{cluster.outputs()}", flush=True)
    finally:
        scheduler.stop.set()
        heal_all(cluster)
        for w in workloads:
            w.join()
