"""Power loss under load: every broker's log dir is a fault filesystem (tests/chaos/faultfs.py,
FUSE) that keeps writes in memory until fsync; the ``power-loss`` nemesis SIGKILLs a node and
drops everything it had not fsynced, then restarts it (issue 31: fsync discipline tested, not
assumed). The queue workload and checker of test_queue.py, on 3 combined nodes in their own
network namespaces, one fault at a time.

What must hold (Kafka documentation §4.7 "Replication"): pylog, as Kafka, does not fsync each
acknowledged write (``flush.messages`` unset); durability comes from replication. A node that
loses its unsynced tail recovers to what it synced, truncates or re-fetches from the leader, and
no acks=all write acknowledged by ``min.insync.replicas`` = 2 replicas is lost while the other
replicas survive. The metadata quorum's state and log are on the same filesystem: a voter that
loses unsynced Raft state must not break the quorum's safety (KIP-595: persist before replying).

Skipped without /dev/fuse, libfuse 3 (``fuse3``) or ``mfusepy``. ``FAULTS_CI`` faults in CI;
``PYLOG_CHAOS_FAULTS`` for more.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos import faultfs
from tests.chaos import report as chaos_report
from tests.chaos.checker import check
from tests.chaos.cluster import NamespacedCluster
from tests.chaos.harness import namespaced_cluster, run_schedule, wait_for
from tests.chaos.nemesis import Scheduler
from tests.chaos.test_queue import NODES, OVERRIDES, PARTITIONS, SEED, _full_isr, _leader_of_0, queue_writers
from tests.chaos.workload import read_all

FAULTS_CI = 3
FAULTS = int(os.environ.get("PYLOG_CHAOS_FAULTS", str(FAULTS_CI)))
pytestmark = pytest.mark.timeout(600 + 30 * FAULTS)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamespacedCluster]:
    with namespaced_cluster(
        tmp_path_factory, "chaos-power", NODES, OVERRIDES, unavailable=faultfs.available, faultfs=True
    ) as c:
        yield c


def test_power_loss_loses_no_acknowledged_write(cluster: NamespacedCluster, tmp_path: Path) -> None:
    topic, history, writers = queue_writers(cluster, "chaos-power")
    scheduler = Scheduler(cluster, SEED, FAULTS, recovered=lambda: _full_isr(cluster, topic),
                          leader_of=lambda: _leader_of_0(cluster, topic), nemeses=("power-loss",))  # fmt: skip
    started = time.monotonic()
    run_schedule(cluster, scheduler, writers, lambda: all(w.acked >= 50 for w in writers),
                 "the first acknowledgements of every writer")  # fmt: skip
    wait_for(lambda: _full_isr(cluster, topic), "a full ISR after healing everything", timeout_s=180)
    final = read_all(cluster.bootstrap(), topic, PARTITIONS)
    ops = history.snapshot()
    verdict = check(ops, final)
    report = {
        "seed": SEED, "faults_planned": FAULTS, "topic": topic, "schedule_s": round(time.monotonic() - started, 1),
        "faults": [f.to_json(history.origin) for f in scheduler.log], "verdict": verdict.summary(),
        "writers": {w.name: {"acked": w.acked, "error": repr(w.error) if w.error else None} for w in writers},
        "history": [op.to_json() for op in ops],
    }  # fmt: skip
    anomalies = verdict.anomalies
    report["scheduler_error"] = repr(scheduler.error) if scheduler.error is not None else None
    chaos_report.write(tmp_path, "chaos-power-loss", report, ops, anomalies)
    counts = {kind: len(found) for kind, found in anomalies.items() if found}
    assert scheduler.error is None, f"liveness: {scheduler.error!r}; safety anomalies found: {counts}"
    assert all(w.error is None for w in writers), report["writers"]
    assert len(scheduler.log) == FAULTS
    assert verdict.acknowledged > 0
    assert verdict.valid, json.dumps(verdict.summary(), indent=1)
