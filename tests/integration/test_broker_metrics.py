"""``/metrics`` of real broker processes against the metric-name contract of issue #32
(docs/operations.md, "Metrics"), scraped over HTTP while confluent-kafka (librdkafka) produces,
consumes and asks for a topic that does not exist.

Every name of the contract must be on the page, with values that follow from the traffic:
MessagesIn of a topic grows by exactly the records produced, the log end offset is that count,
an UNKNOWN_TOPIC_OR_PARTITION answer is counted in ``errors_total``, a committed group's lag is 0,
and over a 3-node combined KRaft cluster exactly one node reports an active controller. The page
is parsed with prometheus-client's own parser. Only states are polled (with generous deadlines).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import EmbeddedCluster, free_port
from tests.integration.compat import TIMEOUT_S
from tests.waiting import wait_until

# the contract (names the alert rules and dashboard use); histograms are checked by _count
CONTRACT = [
    *(
        f"kafka_server_brokertopicmetrics_{m}_total"
        for m in (
            "messagesin", "bytesin", "bytesout", "bytesrejected", "failedproducerequests",
            "failedfetchrequests", "totalproducerequests", "totalfetchrequests",
        )
    ),
    "kafka_network_requestmetrics_requests_total",
    "kafka_network_requestmetrics_errors_total",
    *(
        f"kafka_network_requestmetrics_{t}_count"
        for t in (
            "totaltimems", "requestqueuetimems", "localtimems", "remotetimems", "throttletimems",
            "responsesendtimems",
        )
    ),
    "kafka_server_socket_server_metrics_connection_count",
    "kafka_server_socket_server_metrics_connection_creation_total",
    "kafka_server_socket_server_metrics_connection_close_total",
    "kafka_server_socket_server_metrics_incoming_byte_total",
    "kafka_server_socket_server_metrics_outgoing_byte_total",
    "pylog_event_loop_lag_seconds_count",
    "pylog_event_loop_busy_ratio",
    "kafka_network_socketserver_networkprocessoravgidlepercent",
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_isrshrinks_total",
    "kafka_server_replicamanager_isrexpands_total",
    "kafka_server_replicamanager_partitioncount",
    "kafka_server_replicamanager_leadercount",
    "kafka_server_replicafetchermanager_maxlag",
    "kafka_server_fetcherstats_bytes_total",
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_controller_kafkacontroller_globalpartitioncount",
    "kafka_controller_kafkacontroller_globaltopiccount",
    "kafka_log_logmanager_offlinelogdirectorycount",
    "kafka_log_log_size",
    "kafka_log_log_numlogsegments",
    "kafka_log_log_logstartoffset",
    "kafka_log_log_logendoffset",
    "kafka_log_logflushstats_logflushrateandtimems_count",
    "kafka_consumergroup_lag",
    "kafka_consumergroup_lag_sum",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "python_gc_collections_total",
]  # fmt: skip
RECORDS = 500


def scrape(address: str) -> dict[str, float]:
    """``name{k="v",…}`` (labels sorted) -> value; also ``name`` -> the sum over its samples."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    out: dict[str, float] = {}
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
            sums[s.name] = sums.get(s.name, 0.0) + s.value
    return {**sums, **out}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, str]]:
    port = free_port()
    overrides = {"metrics.port": str(port), "auto.create.topics.enable": "false"}
    with EmbeddedBroker(Path(tmp_path_factory.mktemp("metrics-broker")), overrides=overrides) as b:
        yield b, f"127.0.0.1:{port}"


def test_single_broker_serves_the_contract_with_plausible_values(broker: tuple[EmbeddedBroker, str]) -> None:
    b, address = broker
    bootstrap = b.bootstrap_servers
    topic = "metered"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    wait_until(lambda: f'kafka_log_log_logendoffset{{partition="0",topic="{topic}"}}' in scrape(address), "log")
    before = scrape(address)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, value=b"v" * 100, key=str(i).encode())
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "metered-group", "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        while got < RECORDS:
            got += sum(1 for m in consumer.consume(500, timeout=5) if m.error() is None)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    missing = admin.list_topics(topic="no-such-topic", timeout=30).topics["no-such-topic"]
    assert missing.error is not None  # UNKNOWN_TOPIC_OR_PARTITION (auto.create.topics.enable=false)

    lag = f'kafka_consumergroup_lag{{consumergroup="metered-group",partition="0",topic="{topic}"}}'
    page = wait_until(
        lambda: (
            (p := scrape(address)).get(lag) == 0
            and p.get(
                'kafka_network_requestmetrics_errors_total{error="UNKNOWN_TOPIC_OR_PARTITION",request="Metadata"}'
            )
            and p
        ),
        "the group's lag and the Metadata error on /metrics",
    )
    absent = [name for name in CONTRACT if name not in page]
    assert not absent, f"contract names missing from /metrics: {absent}"

    key = f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}}'
    assert page[key] - before.get(key, 0) == RECORDS
    assert page["kafka_server_brokertopicmetrics_messagesin_total"] - before[
        "kafka_server_brokertopicmetrics_messagesin_total"
    ] >= RECORDS  # fmt: skip
    assert page[f'kafka_server_brokertopicmetrics_bytesin_total{{topic="{topic}"}}'] > RECORDS * 100
    assert page[f'kafka_server_brokertopicmetrics_bytesout_total{{topic="{topic}"}}'] > RECORDS * 100
    assert page[f'kafka_log_log_logendoffset{{partition="0",topic="{topic}"}}'] == RECORDS
    assert page[f'kafka_log_log_size{{partition="0",topic="{topic}"}}'] > RECORDS * 100
    assert page[f'kafka_log_log_numlogsegments{{partition="0",topic="{topic}"}}'] >= 1
    assert page['kafka_network_requestmetrics_totaltimems_count{request="Produce"}'] >= 1
    assert page['kafka_network_requestmetrics_totaltimems_count{request="FetchConsumer"}'] >= 1
    produce = 'kafka_network_requestmetrics_requests_total{request="Produce",'
    assert sum(v for k, v in page.items() if k.startswith(produce)) >= 1
    assert page['kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}'] >= 0
    creations = page['kafka_server_socket_server_metrics_connection_creation_total{listener="PLAINTEXT"}']
    assert creations >= page['kafka_server_socket_server_metrics_connection_close_total{listener="PLAINTEXT"}']
    assert page['kafka_server_socket_server_metrics_incoming_byte_total{listener="PLAINTEXT"}'] > RECORDS * 100
    assert 0 <= page["pylog_event_loop_busy_ratio"] <= 1
    assert page["kafka_network_socketserver_networkprocessoravgidlepercent"] == pytest.approx(
        1 - page["pylog_event_loop_busy_ratio"]
    )
    assert page["kafka_server_group_coordinator_metrics_offset_commit_total"] >= 1
    assert page["kafka_controller_kafkacontroller_activecontrollercount"] == 1  # its own controller
    assert page["kafka_controller_kafkacontroller_globaltopiccount"] >= 1
    assert page["kafka_server_replicamanager_leadercount"] == page["kafka_server_replicamanager_partitioncount"]
    assert b.running


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(Path(tmp_path_factory.mktemp("metrics-cluster")), combined=True, metrics=True) as c:
        yield c


def test_one_active_controller_and_replication_figures_over_three_nodes(cluster: EmbeddedCluster) -> None:
    nodes = cluster.broker_ids

    def controllers() -> list[float] | None:
        counts = [
            scrape(cluster.metrics_address(n))["kafka_controller_kafkacontroller_activecontrollercount"] for n in nodes
        ]
        return counts if sum(counts) == 1 else None

    counts = wait_until(controllers, "exactly one active controller")
    assert sorted(counts) == [0, 0, 1]
    leader = nodes[counts.index(1)]
    assert scrape(cluster.metrics_address(leader))['kafka_raft_current_state{state="leader"}'] == 1

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
    for _ in range(100):
        producer.produce("replicated", value=b"r" * 100)
    assert producer.flush(TIMEOUT_S) == 0

    def replicated() -> list[dict[str, float]] | None:
        pages = [scrape(cluster.metrics_address(n)) for n in nodes]
        fetched = sum(p["kafka_server_fetcherstats_bytes_total"] for p in pages)
        ends = [p.get('kafka_log_log_logendoffset{partition="0",topic="replicated"}') for p in pages]
        return pages if fetched > 0 and ends == [100, 100, 100] else None

    pages = wait_until(replicated, "the followers' fetched bytes and log ends")
    for page in pages:
        # consumer-group lag needs a group; errors_total counts codes other than NONE, so a node that
        # answered no error yet has no sample of it (the single-broker test checks both)
        optional = ("kafka_consumergroup", "kafka_network_requestmetrics_errors_total")
        absent = [name for name in CONTRACT if name not in page and not name.startswith(optional)]
        assert not absent, f"contract names missing from /metrics: {absent}"
        assert page["kafka_controller_kafkacontroller_globalpartitioncount"] >= 1
        assert page["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
        assert page['kafka_server_replicafetchermanager_maxlag{clientid="Replica"}'] >= 0
    assert sum(p["kafka_server_replicamanager_leadercount"] for p in pages) >= 1
