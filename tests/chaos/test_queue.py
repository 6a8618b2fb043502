"""The queue workload under the seeded nemesis schedule, checked (issue 31).

A 3 combined-node pylog cluster, each node in its own network namespace (tests/chaos/netns.py,
cluster.py) with a small tmpfs log dir; a topic of ``PARTITIONS`` partitions, replication factor
3, ``min.insync.replicas`` 2; idempotent acks=all writers (confluent-kafka and pylog's own
producer) append unique values and two consumers of one group read with commits, while the
scheduler (nemesis.py) injects one fault at a time: partitions (full, one-way, bridge, of the
leader, of the active controller), random packet loss, SIGKILL+restart, SIGSTOP/SIGCONT, a full
disk. Then everything is healed, the ISR waited for, every partition read from its start, and
the checkers (checker.py) must report **0 anomalies** (Kafka documentation §4.7 "Replication": an acknowledged write
survives while one in-sync replica does). A second test applies two faults at once (beyond the
budget) and checks that writes are refused rather than lost.

CI runs ``FAULTS_CI`` faults from seed ``PYLOG_CHAOS_SEED`` (default 31); a long run on demand:
``PYLOG_CHAOS_FAULTS=1000 PYLOG_CHAOS_SEED=7 .venv/bin/python -m pytest tests/chaos -s``. Needs
root (namespaces, iptables, mounts); skipped otherwise. The report (``chaos-queue.json``: history,
faults, verdicts; ``chaos-queue.png``: the timeline) is written to the test's tmp dir and the
paths printed.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos import report as chaos_report
from tests.chaos.checker import GROUP_ANOMALIES, check, check_group
from tests.chaos.cluster import NamespacedCluster
from tests.chaos.harness import create_topic, full_isr, leader_of_0, namespaced_cluster, run_schedule, wait_for
from tests.chaos.nemesis import DISK_NEMESES, Scheduler, heal_all
from tests.chaos.workload import (
    ConfluentWriter,
    GroupReader,
    History,
    PylogWriter,
    Writer,
    committed_offsets,
    read_all,
)

NODES = (1, 2, 3)
PARTITIONS = 3
FAULTS_CI = 10
FAULTS = int(os.environ.get("PYLOG_CHAOS_FAULTS", str(FAULTS_CI)))
SEED = int(os.environ.get("PYLOG_CHAOS_SEED", "31"))
# each node's log dir: a tmpfs the disk-full nemesis fills. The workload writes about 2 MB a
# minute that the final re-read needs whole (no retention), so a long run gets 1 MB more per fault:
# a 400-fault run filled 96 MB after 48 minutes and the node stopped on ENOSPC outside any fault.
DISK_MB = 96 + max(0, FAULTS - FAULTS_CI)
HOLD_OVER_BUDGET_S = 5.0
pytestmark = pytest.mark.timeout(600 + 30 * FAULTS)
OVERRIDES = {
    "broker.session.timeout.ms": "4000",
    # leaves a session lease of 0.9 * 4000 - 2000 (quorum.fetch.timeout.ms) = 1600 ms, over two
    # heartbeat intervals: group coordinators answer OffsetFetch only under it (broker_session)
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamespacedCluster]:
    with namespaced_cluster(tmp_path_factory, "chaos", NODES, OVERRIDES, disk_mb=DISK_MB) as c:
        yield c


def _full_isr(cluster: NamespacedCluster, topic: str) -> bool:
    return full_isr(cluster, topic, PARTITIONS, NODES)


def _leader_of_0(cluster: NamespacedCluster, topic: str) -> int | None:
    return leader_of_0(cluster, topic, NODES, via=NODES[:1])


def queue_writers(cluster: NamespacedCluster, prefix: str) -> tuple[str, History, list[Writer]]:
    """A new topic named from ``prefix`` (RF 3, ``min.insync.replicas`` 2) once its ISR is full,
    a history, and the queue's two idempotent acks=all writers on it (confluent-kafka and
    pylog's producer), not started yet."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, PARTITIONS)
    wait_for(lambda: _full_isr(cluster, topic), "the topic with a full ISR")
    history = History()
    writers: list[Writer] = [
        ConfluentWriter("ck", cluster.bootstrap(), topic, PARTITIONS, history),
        PylogWriter("py", cluster.bootstrap(), topic, PARTITIONS, history),
    ]
    return topic, history, writers


def _observe(cluster: NamespacedCluster, topic: str, target: int) -> dict[str, list[int]]:
    """Leader and ISR of each partition, as a node other than ``target`` sees them."""
    via = next(n for n in NODES if n != target)
    return {str(p): [v.leader, *sorted(v.isr)] for p, v in cluster.partitions(topic, via).items()}


def _bit(fault: dict) -> bool:
    """The fault showed in the metadata: its target out of some ISR, or leading nothing."""
    seen = fault["observed"]
    return isinstance(seen, dict) and any(fault["target"] not in v[1:] for v in seen.values())


def test_queue_under_nemeses_loses_nothing(cluster: NamespacedCluster, tmp_path: Path) -> None:
    topic, history, writers = queue_writers(cluster, "chaos-queue")
    group = f"chaos-group-{topic}"
    readers = [GroupReader(f"g{i}", cluster.bootstrap(), topic, PARTITIONS, group, history.origin) for i in (1, 2)]
    scheduler = Scheduler(
        cluster, SEED, FAULTS, recovered=lambda: _full_isr(cluster, topic),
        leader_of=lambda: _leader_of_0(cluster, topic), observe=lambda target: _observe(cluster, topic, target),
        nemeses=DISK_NEMESES,
    )  # fmt: skip
    started = time.monotonic()
    report: dict = {"seed": SEED, "faults_planned": FAULTS, "topic": topic}
    run_schedule(cluster, scheduler, [*writers, *readers], lambda: all(w.acked >= 50 for w in writers),
                 "the first acknowledgements of every writer")  # fmt: skip
    report["schedule_s"] = round(time.monotonic() - started, 1)
    wait_for(lambda: _full_isr(cluster, topic), "a full ISR after healing everything", timeout_s=180)
    final = read_all(cluster.bootstrap(), topic, PARTITIONS)
    ops = history.snapshot()
    verdict = check(ops, final)
    committed = wait_for(
        lambda: committed_offsets(cluster.bootstrap(), topic, PARTITIONS, group), "the group's offsets"
    )
    group_anomalies = check_group(
        [x for r in readers for x in r.reads], [x for r in readers for x in r.commits],
        [x for r in readers for x in r.observations], ops, final, committed,
    )  # fmt: skip
    origin = history.origin
    ok_times = sorted(op.time for op in ops if op.type == "ok")
    report.update(
        longest_ack_gap_s=round(max((b - a for a, b in itertools.pairwise(ok_times)), default=0.0), 3),
        acks_per_s=round(len(ok_times) / max(ok_times[-1] - ok_times[0], 1e-9), 1) if ok_times else 0.0,
        faults_that_showed_in_isr=sum(_bit(f) for f in (x.to_json(origin) for x in scheduler.log)),
        faults=[f.to_json(origin) for f in scheduler.log],
        writers={w.name: {"acked": w.acked, "error": repr(w.error) if w.error else None} for w in writers},
        verdict=verdict.summary(),
        group={
            "readers": {
                r.name: {
                    "reads": len(r.reads),
                    "commits_ok": sum(c.ok for c in r.commits),
                    "commits_failed": sum(not c.ok for c in r.commits),
                    "observations": len(r.observations),
                    "error": repr(r.error) if r.error else None,
                }
                for r in readers
            },
            "committed": committed,
            "anomaly_counts": {a: len(v) for a, v in group_anomalies.items()},
            "anomaly_examples": {a: v[:20] for a, v in group_anomalies.items() if v},
        },
        final_read_counts={p: len(v) for p, v in final.items()},
        history=[op.to_json() for op in ops],
    )
    anomalies = {**verdict.anomalies, **group_anomalies}
    report["scheduler_error"] = repr(scheduler.error) if scheduler.error is not None else None
    chaos_report.write(tmp_path, "chaos-queue", report, ops, anomalies)
    counts = {kind: len(found) for kind, found in anomalies.items() if found}
    assert scheduler.error is None, f"liveness: {scheduler.error!r}; safety anomalies found: {counts}"
    assert all(w.error is None for w in writers), report["writers"]
    assert all(r.error is None for r in readers), report["group"]["readers"]
    assert len(scheduler.log) == FAULTS
    assert verdict.acknowledged > 0
    assert all(r.reads for r in readers), report["group"]["readers"]
    if FAULTS >= 5:  # the schedule is not a no-op: some fault took its target out of an ISR
        assert any(_bit(f) for f in report["faults"]), report["faults"]
    assert verdict.valid, json.dumps(verdict.summary(), indent=1)
    assert not any(group_anomalies[a] for a in GROUP_ANOMALIES), json.dumps(report["group"], indent=1)


def test_over_budget_refuses_writes_rather_than_losing_them(cluster: NamespacedCluster, tmp_path: Path) -> None:
    """Two faults at once, beyond the budget of RF 3 / ``min.insync.replicas`` 2: first two of the
    three nodes killed (one left: no quorum, an ISR of one), then every node partitioned from every
    other (clients still reach each). While it lasts, after its first second, no write may be
    acknowledged (Kafka documentation §4.7: acks=all needs ``min.insync.replicas`` in-sync
    replicas, else NOT_ENOUGH_REPLICAS); once healed, nothing acknowledged before is lost."""
    topic, history, writers = queue_writers(cluster, "chaos-over")
    windows: list[dict] = []
    net = cluster.network
    try:
        for w in writers:
            w.start()
        wait_for(lambda: all(w.acked >= 50 for w in writers), "the first acknowledgements of every writer")
        for nemesis in ("kill-two", "partition-all"):
            start = time.monotonic() - history.origin
            if nemesis == "kill-two":
                for n in NODES[:2]:
                    cluster.kill(n)
            else:
                for n in NODES:
                    net.drop(at=n, sources=[net.address(m) for m in NODES if m != n])
            acked_at_start = sum(w.acked for w in writers)
            threading.Event().wait(HOLD_OVER_BUDGET_S)  # the double fault's length (not a synchronisation)
            end = time.monotonic() - history.origin
            acked = sum(w.acked for w in writers) - acked_at_start
            heal_all(cluster)
            windows.append({"nemesis": "over-budget", "target": 0, "start": round(start, 3), "heal": round(end, 3),
                            "what": nemesis, "acked_during": acked})  # fmt: skip
            wait_for(lambda: _full_isr(cluster, topic), "a full ISR after the double fault", timeout_s=180)
            windows[-1]["recovered"] = round(time.monotonic() - history.origin, 3)
    finally:
        heal_all(cluster)
        for w in writers:
            w.join()
    final = read_all(cluster.bootstrap(), topic, PARTITIONS)
    ops = history.snapshot()
    verdict = check(ops, final)
    # a write already replicated when the double fault began may still be answered in its first
    # second; after that nothing can reach min.insync.replicas until the heal
    refused_not = [
        {"value": op.value, "ok": op.time, "window": w["what"]}
        for w in windows
        for op in ops
        if op.type == "ok" and w["start"] + 1 < op.time < w["heal"]
    ]
    report = {"seed": SEED, "topic": topic, "faults": windows, "verdict": verdict.summary(),
              "acknowledged_during_double_fault": refused_not, "history": [op.to_json() for op in ops]}  # fmt: skip
    chaos_report.write(
        tmp_path, "chaos-over-budget", report, ops, {**verdict.anomalies, "acked_in_window": refused_not}
    )
    assert all(w.error is None for w in writers), [repr(w.error) for w in writers]
    blocking = {kind: found for kind, found in verdict.anomalies.items() if found and not _librdkafka_4953(kind, found)}
    assert not blocking, json.dumps(verdict.summary(), indent=1)
    assert refused_not == [], refused_not[:10]


def _librdkafka_4953(kind: str, found: list[dict]) -> bool:
    """Anomalies the over-budget test reports but does not fail on: records of the librdkafka
    writer (``ck``) written twice across the leader changes of a double fault. librdkafka's
    idempotent producer bumps its epoch when OUT_OF_ORDER_SEQUENCE_NUMBER answers an in-flight
    batch that is not its first, and sends again what may have been written (librdkafka#4953,
    reported against Apache Kafka too). This test's guarantee is "refused rather than lost";
    pylog's own producer (``py``) gets no such allowance, and neither does any loss."""
    if kind not in ("duplicated", "offset_order"):
        return False
    return all(str(x.get("value", "")).startswith("ck-") or x.get("process") == "ck" for x in found)
