"""Dashboards and alerts tested against the real thing (issue 32): a real Prometheus (Debian's
``prometheus``, tests/prometheus.py) scrapes the ``metrics.port`` of every node of a 3-node pylog
cluster every second and evaluates ops/prometheus/pylog-alerts.yml (its ``for:`` shortened).

* promtool: the rule file passes ``promtool check rules`` and its unit tests
  (``promtool test rules``), which cover every alert, firing and not firing;
* after some produce, fetch, a failed request and a committed group offset, every metric name of
  the contract (docs/operations.md) is in Prometheus;
* every rule's expression and every dashboard query (ops/grafana/pylog-dashboard.json) is
  evaluated by that Prometheus without error (the dashboard's queries also return series);
* SIGSTOP a follower: PylogUnderReplicatedPartitions becomes ``firing`` in ``/api/v1/alerts``;
  SIGCONT: it resolves.

Every wait polls Prometheus' HTTP API for a state, with a generous deadline.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import wait_for
from tests.prometheus import PROMTOOL, PrometheusError, PrometheusServer, alert_names, shorten_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "prometheus" / "pylog-alerts.yml"
RULE_TESTS = ROOT / "ops" / "prometheus" / "pylog-alerts.test.yml"
DASHBOARD = ROOT / "ops" / "grafana" / "pylog-dashboard.json"
NODES = (1, 2, 3)
WAIT_S = 120
TEST_FOR = "2s"  # every rule's `for:` in the test's copy of the rule file
# Grafana's variables in the dashboard's queries, as Grafana would expand them for Prometheus
GRAFANA_VARIABLES = {"$__rate_interval": "1m"}
OVERRIDES = {
    "replica.lag.time.max.ms": "4000",
    "broker.session.timeout.ms": "120000",  # the follower leaves the ISR by lag, not by fencing
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}

# The metric-name contract (docs/operations.md): each a selector that must match a series once the
# cluster served some produce, fetch, a failed request and a group offset commit. Histograms are
# checked as their _bucket, _sum and _count series.
HISTOGRAMS = (  # (name, labels)
    *(
        (f"kafka_network_requestmetrics_{name}", "{request='Produce'}")
        for name in (
            "totaltimems",
            "requestqueuetimems",
            "localtimems",
            "remotetimems",
            "throttletimems",
            "responsesendtimems",
        )
    ),
    ("pylog_event_loop_lag_seconds", ""),
    ("kafka_log_logflushstats_logflushrateandtimems", ""),
)
CONTRACT = (
    *(
        f"kafka_server_brokertopicmetrics_{name}_total{{topic=''}}"
        for name in (
            "messagesin",
            "bytesin",
            "bytesout",
            "bytesrejected",
            "failedproducerequests",
            "failedfetchrequests",
            "totalproducerequests",
            "totalfetchrequests",
        )
    ),
    "kafka_server_brokertopicmetrics_messagesin_total{topic='$topic'}",
    "kafka_server_brokertopicmetrics_bytesin_total{topic='$topic'}",
    "kafka_server_brokertopicmetrics_bytesout_total{topic='$topic'}",
    "kafka_network_requestmetrics_requests_total{request='Produce',version=~'[0-9]+'}",
    "kafka_network_requestmetrics_requests_total{request='Fetch',version=~'[0-9]+'}",
    "kafka_network_requestmetrics_errors_total{request='CreateTopics',error='TOPIC_ALREADY_EXISTS'}",
    *(f"{name}_{suffix}{labels}" for name, labels in HISTOGRAMS for suffix in ("bucket", "sum", "count")),
    "kafka_server_socket_server_metrics_connection_count{listener!=''}",
    "kafka_server_socket_server_metrics_connection_creation_total{listener!=''}",
    "kafka_server_socket_server_metrics_connection_close_total{listener!=''}",
    "kafka_server_socket_server_metrics_incoming_byte_total{listener!=''}",
    "kafka_server_socket_server_metrics_outgoing_byte_total{listener!=''}",
    "pylog_event_loop_busy_ratio",
    "kafka_network_socketserver_networkprocessoravgidlepercent",
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_isrshrinks_total",
    "kafka_server_replicamanager_isrexpands_total",
    "kafka_server_replicamanager_partitioncount",
    "kafka_server_replicamanager_leadercount",
    "kafka_server_replicafetchermanager_maxlag{clientid='Replica'}",
    "kafka_server_fetcherstats_bytes_total",
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_controller_kafkacontroller_globalpartitioncount",
    "kafka_controller_kafkacontroller_globaltopiccount",
    "kafka_log_logmanager_offlinelogdirectorycount",
    *(
        f"kafka_log_log_{name}{{topic='$topic',partition='0'}}"
        for name in ("size", "numlogsegments", "logstartoffset", "logendoffset")
    ),
    "kafka_consumergroup_lag{consumergroup='$group',topic='$topic',partition='0'}",
    "kafka_consumergroup_lag_sum{consumergroup='$group'}",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_open_fds",
    "python_gc_objects_collected_total",
    "python_gc_collections_total",
)


class Stack:
    """The cluster, the Prometheus scraping it, and the topic and group the tests made."""

    def __init__(self, cluster: EmbeddedCluster, prom: PrometheusServer) -> None:
        self.cluster = cluster
        self.prom = prom
        self.topic = f"prom-{uuid.uuid4().hex[:8]}"
        self.group = f"prom-group-{uuid.uuid4().hex[:8]}"

    def node_of(self, instance: str) -> int:
        return next(n for n in NODES if self.cluster.metrics_address(n) == instance)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("prometheus")
    rules = root / "pylog-alerts.yml"
    rules.write_text(shorten_for(RULES.read_text(), TEST_FOR))
    with EmbeddedCluster(root / "cluster", brokers=NODES, combined=True, metrics=True, overrides=OVERRIDES) as c:
        targets = {str(n): c.metrics_address(n) for n in NODES}
        with PrometheusServer(root / "prometheus", targets, rule_files=[rules]) as prom:
            s = Stack(c, prom)
            wait_for(
                lambda: [t["health"] for t in prom.targets()] == ["up"] * len(NODES),
                "Prometheus to scrape every node",
                WAIT_S,
            )
            traffic(s)
            yield s


def traffic(s: Stack) -> None:
    """Produce, fetch, one failed request (TOPIC_ALREADY_EXISTS) and a committed group offset."""
    admin = AdminClient({"bootstrap.servers": s.cluster.bootstrap()})
    admin.create_topics([NewTopic(s.topic, 1, 3)], operation_timeout=30)[s.topic].result(timeout=60)
    wait_for(lambda: s.cluster.partitions(s.topic), f"topic {s.topic} in the metadata", WAIT_S)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic(s.topic, 1, 3)], operation_timeout=30)[s.topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": s.cluster.bootstrap(), "acks": "all"})
    for i in range(100):
        producer.produce(s.topic, f"value-{i}".encode(), key=str(i).encode())
    assert producer.flush(60) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": s.cluster.bootstrap(),
            "group.id": s.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(s.topic, 0, 0)])
        got = 0

        def read_some() -> bool:
            nonlocal got
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                got += 1
            return got >= 40

        wait_for(read_some, "40 records consumed", WAIT_S)
        consumer.commit(offsets=[TopicPartition(s.topic, 0, 40)], asynchronous=False)  # lag 60
    finally:
        consumer.close()


def test_promtool_checks_and_unit_tests_cover_every_alert() -> None:
    check = subprocess.run(
        [PROMTOOL, "check", "rules", str(RULES)], check=False, capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    unit = subprocess.run(
        [PROMTOOL, "test", "rules", str(RULE_TESTS)], check=False, capture_output=True, text=True, timeout=120
    )
    assert unit.returncode == 0, unit.stdout + unit.stderr
    tests = RULE_TESTS.read_text()
    names = alert_names(RULES.read_text())
    assert len(names) == 9
    for name in names:  # each alert: an evaluation where it must not fire and one where it fires
        quiet = re.search(rf"alertname: {name}\n\s+exp_alerts: \[\]", tests)
        fires = re.search(rf"alertname: {name}\n\s+exp_alerts:\n\s+- exp_labels:", tests)
        assert quiet, f"{name}: no unit test where it does not fire"
        assert fires, f"{name}: no unit test where it fires"


def selector(template: str, s: Stack) -> str:
    return template.replace("$topic", s.topic).replace("$group", s.group).replace("'", '"')


def test_every_contract_metric_is_in_prometheus(stack: Stack) -> None:
    selectors = [selector(t, stack) for t in CONTRACT]
    missing: list[str] = []

    def all_present() -> bool:
        missing[:] = [sel for sel in selectors if not stack.prom.query(f"count({sel})")]
        return not missing

    try:
        wait_for(all_present, "every contract metric in Prometheus", WAIT_S)
    except AssertionError:  # wait_for's timeout: name what is missing
        pytest.fail(f"{len(missing)} of {len(selectors)} contract selectors match nothing: {missing}")
    # error="NONE" is not an error
    assert stack.prom.query('kafka_network_requestmetrics_errors_total{error="NONE"}') == []
    # one active controller in the cluster, the node leading the metadata quorum
    wait_for(
        lambda: scalar(stack.prom.query("sum(kafka_controller_kafkacontroller_activecontrollercount)")) == 1,
        "exactly one active controller",
        WAIT_S,
    )
    # the committed group's lag: 100 records, offset 40 committed
    wait_for(
        lambda: scalar(stack.prom.query(f'max(kafka_consumergroup_lag_sum{{consumergroup="{stack.group}"}})')) == 60,
        "the group's lag (60) in Prometheus",
        WAIT_S,
    )


def scalar(result: list[dict[str, Any]]) -> float | None:
    return float(result[0]["value"][1]) if result else None


def dashboard_queries() -> list[tuple[str, str]]:
    data = json.loads(DASHBOARD.read_text())
    out = []
    for panel in data["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"{panel['title']}: a Grafana variable the test does not expand: {expr}"
            out.append((panel["title"], expr))
    return out


def test_every_rule_and_dashboard_query_evaluates(stack: Stack) -> None:
    rules = stack.prom.rules()
    assert sorted(r["name"] for r in rules) == sorted(alert_names(RULES.read_text()))
    for rule in rules:
        assert rule["duration"] == 2, rule  # TEST_FOR
        stack.prom.query(rule["query"])  # raises PrometheusError when Prometheus refuses it
    wait_for(
        lambda: all(r["health"] == "ok" for r in stack.prom.rules()),
        "every rule evaluated without error",
        WAIT_S,
    )
    queries = dashboard_queries()
    assert len(queries) >= 50
    errors = []
    for title, expr in queries:
        try:
            stack.prom.query(expr)
        except PrometheusError as exc:
            errors.append(f"{title}: {exc}")
    assert errors == []
    # the series each query draws exist (wait: rates need two scrapes within their window)
    empty: list[str] = []

    def all_answer() -> bool:
        empty[:] = [f"{title}: {expr}" for title, expr in queries if not stack.prom.query(expr)]
        return not empty

    try:
        wait_for(all_answer, "every dashboard query to return series", WAIT_S)
    except pytest.fail.Exception:
        pytest.fail(f"{len(empty)} dashboard queries return nothing: {empty}")


def firing(stack: Stack, name: str) -> list[dict[str, Any]]:
    return [a for a in stack.prom.alerts() if a["labels"]["alertname"] == name and a["state"] == "firing"]


def test_under_replicated_alert_fires_on_sigstop_and_resolves_on_sigcont(stack: Stack) -> None:
    name = "PylogUnderReplicatedPartitions"
    wait_for(
        lambda: not [a for a in stack.prom.alerts() if a["labels"]["alertname"] == name],
        f"{name} not active on the healthy cluster",
        WAIT_S,
    )
    view = stack.cluster.partitions(stack.topic)[0]
    raft_leader = int(scalar(stack.prom.query("max(kafka_raft_current_leader)")) or -1)
    follower = next(n for n in view.replicas if n not in (view.leader, raft_leader))
    producer = Producer({"bootstrap.servers": stack.cluster.address(view.leader), "acks": "1"})
    stack.cluster.pause(follower)
    try:
        producer.produce(stack.topic, b"while the follower is stopped")
        assert producer.flush(60) == 0
        alerts = wait_for(lambda: firing(stack, name), f"{name} firing with node {follower} stopped", WAIT_S)
        # the topic's leader among them (others may lead internal partitions the follower replicates)
        assert stack.cluster.metrics_address(view.leader) in {a["labels"]["instance"] for a in alerts}
        assert stack.cluster.metrics_address(follower) not in {a["labels"]["instance"] for a in alerts}
    finally:
        stack.cluster.resume(follower)
    wait_for(
        lambda: not [a for a in stack.prom.alerts() if a["labels"]["alertname"] == name],
        f"{name} resolved once node {follower} runs again",
        WAIT_S,
    )
    assert set(stack.cluster.partitions(stack.topic)[0].isr) == set(view.replicas)
