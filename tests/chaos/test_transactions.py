"""Transactions and metadata changes under the seeded nemesis schedule, on 3 controllers + 3
brokers, each of the six in its own network namespace (issue 31).

The KRaft controllers (``process.roles=controller``, nodes 1-3) and the brokers (nodes 4-6) are
separate processes: a fault can cut a broker from the controllers but not from clients, or isolate
the active controller alone. Two workloads run at once while the scheduler (nemesis.py) injects
one fault at a time, every kind once first (any node may be the target):

- transactions (txn.py): two confluent-kafka transactional producers write each transaction to
  every partition of a topic (RF 3, ``min.insync.replicas`` 2) and commit an input offset with
  ``send_offsets_to_transaction``; every fifth is aborted on purpose; a read_committed group
  consumer reads during the run; after heal a read_committed read of everything — checked for
  atomicity, no aborted or uncommitted record visible, commit order, offsets atomic with records;
- metadata (metadata.py): topic create/delete/partition increase, an invalid create, ACL
  create/delete through AdminClient; after heal every broker's own Metadata/DescribeAcls view must
  hold every acknowledged change and no failed one.

CI runs ``FAULTS_CI`` faults (``PYLOG_CHAOS_FAULTS`` for more; seed ``PYLOG_CHAOS_SEED``); the
report (JSON + timeline PNG) is written to the test's tmp dir and its paths printed.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos import report as chaos_report
from tests.chaos.cluster import NamespacedCluster
from tests.chaos.harness import create_topic, full_isr, leader_of_0, namespaced_cluster, run_schedule, wait_for
from tests.chaos.metadata import METADATA_ANOMALIES, MetadataWriter, check_metadata, converged_views
from tests.chaos.nemesis import Scheduler
from tests.chaos.txn import TXN_ANOMALIES, TxnWriter, check_txn, probe, read_committed
from tests.chaos.workload import GroupReader, History, committed_offsets

CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5, 6)
PARTITIONS = 2
FAULTS_CI = 9
FAULTS = int(os.environ.get("PYLOG_CHAOS_FAULTS", str(FAULTS_CI)))
SEED = int(os.environ.get("PYLOG_CHAOS_SEED", "31"))
pytestmark = [
    pytest.mark.timeout(600 + 30 * FAULTS),
]
OVERRIDES = {
    "broker.session.timeout.ms": "4000",
    # leaves a session lease of 0.9 * 4000 - 2000 (quorum.fetch.timeout.ms) = 1600 ms, over two
    # heartbeat intervals: group coordinators answer OffsetFetch only under it (broker_session)
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamespacedCluster]:
    with namespaced_cluster(
        tmp_path_factory, "chaos-txn", (*CONTROLLERS, *BROKERS), OVERRIDES, controllers=CONTROLLERS
    ) as c:
        yield c


def _full_isr(cluster: NamespacedCluster, topic: str) -> bool:
    return full_isr(cluster, topic, PARTITIONS, BROKERS)


def _leader_of_0(cluster: NamespacedCluster, topic: str) -> int | None:
    return leader_of_0(cluster, topic, BROKERS, via=BROKERS)


def test_transactions_and_metadata_under_nemeses(cluster: NamespacedCluster, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:6]
    topic, input_topic, prefix = f"chaos-txn-{run}", f"chaos-txn-in-{run}", f"chaos-meta-{run}"
    for name, count in ((topic, PARTITIONS), (input_topic, 1)):
        create_topic(cluster, name, count)
    wait_for(lambda: _full_isr(cluster, topic), "the topic with a full ISR")

    history = History()
    meta_history = History()
    meta_history.origin = history.origin
    writers = [
        TxnWriter(f"tx{i}-{run}", cluster.bootstrap(), topic, PARTITIONS, input_topic, f"chaos-txn-g{i}-{run}", history)
        for i in (1, 2)
    ]
    reader = GroupReader("rc", cluster.bootstrap(), topic, PARTITIONS, f"chaos-txn-rc-{run}", history.origin,
                         isolation="read_committed")  # fmt: skip
    meta = MetadataWriter("meta", cluster.bootstrap(), prefix, meta_history)
    scheduler = Scheduler(cluster, SEED, FAULTS, recovered=lambda: _full_isr(cluster, topic),
                          leader_of=lambda: _leader_of_0(cluster, topic))  # fmt: skip
    started = time.monotonic()
    report: dict = {"seed": SEED, "faults_planned": FAULTS, "topic": topic, "shape": "3 controllers + 3 brokers"}
    run_schedule(cluster, scheduler, [*writers, reader, meta], lambda: all(w.committed >= 3 for w in writers),
                 "the first commits of every transactional writer")  # fmt: skip
    report["schedule_s"] = round(time.monotonic() - started, 1)
    wait_for(lambda: _full_isr(cluster, topic), "a full ISR after healing everything", timeout_s=180)
    # liveness after heal: a fresh transactional producer commits (on the input topic, not read)
    report["probe_errors"] = probe(cluster.bootstrap(), input_topic, f"chaos-probe-{run}")
    final = read_committed(cluster.bootstrap(), topic, PARTITIONS)
    ops = history.snapshot()
    committed = {
        w.name: wait_for(lambda w=w: committed_offsets(cluster.bootstrap(), input_topic, 1, w.group), "offsets", 180)[0]
        for w in writers
    }
    txn_anomalies = check_txn(ops, final, reader.reads, PARTITIONS, committed)
    meta_ops = meta_history.snapshot()
    views = converged_views({b: cluster.address(b) for b in BROKERS}, prefix, meta_ops)
    meta_anomalies = check_metadata(meta_ops, views)
    outcomes = {k: sum(1 for op in ops if op.type == k) for k in ("invoke", "ok", "fail", "info")}
    meta_outcomes = {k: sum(1 for op in meta_ops if op.type == k) for k in ("invoke", "ok", "fail", "info")}
    report.update(
        faults=[f.to_json(history.origin) for f in scheduler.log],
        transactions={"outcomes": outcomes, "committed_input": committed, "reads_during_run": len(reader.reads),
                      "replaced_producers": {w.name: w.replaced for w in writers},
                      "init_errors": {w.name: w.init_errors[-5:] for w in writers},
                      "final_read_counts": {p: len(v) for p, v in final.items()},
                      "anomaly_counts": {a: len(v) for a, v in txn_anomalies.items()},
                      "anomaly_examples": {a: v[:20] for a, v in txn_anomalies.items() if v}},
        metadata={"outcomes": meta_outcomes, "views": {b: {"topics": len(v["topics"]), "acls": len(v["acls"])}
                                                       for b, v in views.items()},
                  "anomaly_counts": {a: len(v) for a, v in meta_anomalies.items()},
                  "anomaly_examples": {a: v[:20] for a, v in meta_anomalies.items() if v}},
        history=[op.to_json() for op in ops],
        metadata_history=[op.to_json() for op in meta_ops],
    )  # fmt: skip
    anomalies = {**txn_anomalies, **meta_anomalies}
    report["scheduler_error"] = repr(scheduler.error) if scheduler.error is not None else None
    report["stuck_in_librdkafka"] = [w.stuck for w in writers if w.stuck]
    chaos_report.write(tmp_path, "chaos-transactions", report, [*ops, *meta_ops], anomalies)
    counts = {kind: len(found) for kind, found in anomalies.items() if found}
    assert scheduler.error is None, f"liveness: {scheduler.error!r}; safety anomalies found: {counts}"
    assert all(w.error is None for w in (*writers, reader, meta)), [repr(w.error) for w in (*writers, reader, meta)]
    assert len(scheduler.log) == FAULTS
    assert outcomes["ok"] > 0
    assert meta_outcomes["ok"] > 0
    assert not any(txn_anomalies[a] for a in TXN_ANOMALIES), _found(txn_anomalies)
    assert not any(meta_anomalies[a] for a in METADATA_ANOMALIES), _found(meta_anomalies)


def _found(anomalies: dict[str, list]) -> str:
    """The anomalies found, with a few examples each: short enough for a CI log's excerpt."""
    return json.dumps({a: {"count": len(v), "examples": v[:3]} for a, v in anomalies.items() if v}, default=str)
