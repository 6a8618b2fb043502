"""``pylog perf produce`` / ``pylog perf consume`` beside Kafka 4.1's kafka-producer-perf-test and
kafka-consumer-perf-test against one pylog broker (issue #32): the same flags, output lines that
parse with the same expressions, ``--throughput`` pacing, transactions, ``--print-metrics`` with
the client metrics (``pyspark_log.client.metrics``). Nothing is asserted on wall time: the rates
checked are the ones the tools print."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.client import AdminClient, NewTopic
from pyspark_log.client.sync import Consumer
from pyspark_log.client.types import TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from tests.apache_kafka import kafka_tool

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# Kafka's ProducerPerformance lines (Stats.printWindow / printTotal)
WINDOW = re.compile(
    r"^(?P<n>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency\.$"
)
TOTAL = re.compile(
    r"^(?P<n>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th\.$"
)
# ToolsUtils.printMetrics
METRIC = re.compile(r"^(?P<group>[\w-]+):(?P<name>[\w.-]+):\{client-id=(?P<client>[^}]*)\}\s+: (?P<value>\S+)$")
# ConsumerPerformance
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DETAILED_HEADER = HEADER.replace("start.time, end.time", "time, threadId")
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
SUMMARY = re.compile(
    rf"^(?P<start>{DATE}), (?P<end>{DATE}), (?P<mb>[\d.]+), [\d.]+, (?P<n>\d+), [\d.]+, \d+, -?\d+, [\d.]+, [\d.]+$"
)
DETAILED = re.compile(rf"^{DATE}, 0, (?P<mb>[\d.]+), [\d.]+, (?P<n>\d+), [\d.]+, \d+, -?\d+, -?[\d.]+, -?[\d.]+$")

PRODUCER_METRICS = (
    "record-send-rate", "record-send-total", "record-error-rate", "record-error-total", "record-retry-total",
    "outgoing-byte-total", "request-rate", "request-latency-avg", "request-latency-max",
    "batch-size-avg", "batch-size-max", "records-per-request-avg", "compression-rate-avg",
    "buffer-available-bytes", "buffer-total-bytes", "requests-in-flight", "produce-throttle-time-avg",
    "produce-throttle-time-max",
)  # fmt: skip
FETCH_METRICS = (
    "records-consumed-rate", "records-consumed-total", "bytes-consumed-rate", "bytes-consumed-total",
    "fetch-latency-avg", "fetch-latency-max", "fetch-rate", "records-lag-max", "records-per-request-avg",
)  # fmt: skip
COORDINATOR_METRICS = ("commit-latency-avg", "commit-rate", "assigned-partitions", "rebalance-total")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("perf"), python=sys.executable) as b:
        yield b


def new_topic(broker: EmbeddedBroker, partitions: int = 3) -> str:
    name = f"perf-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def pylog_perf(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """The installed ``pylog`` console script (next to this interpreter), else ``-m``."""
    script = Path(sys.executable).parent / "pylog"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "pyspark_log.cli"]
    done = subprocess.run([*argv, "perf", *args], capture_output=True, text=True, timeout=300, check=False)
    if ok:
        assert done.returncode == 0, f"pylog perf {args} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def metrics_of(stdout: str) -> dict[tuple[str, str], str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Metric Name"))
    out = {}
    for line in lines[start + 1 :]:
        m = METRIC.match(line)
        assert m, f"not a metric line: {line!r}"
        out[(m["group"], m["name"])] = m["value"]
    return out


def test_perf_produce_lines_and_metrics_match_kafkas_tool(broker: EmbeddedBroker) -> None:
    topic = new_topic(broker)
    bootstrap = broker.bootstrap_servers
    kafka = kafka_tool("kafka-producer-perf-test", "--topic", topic, "--num-records", "2000", "--throughput", "-1",
                       "--record-size", "100", "--producer-props", f"bootstrap.servers={bootstrap}",
                       "--print-metrics")  # fmt: skip
    assert kafka.returncode == 0, kafka.stderr
    ours = pylog_perf("produce", "--topic", topic, "--num-records", "20000", "--throughput", "-1", "--record-size",
                      "100", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
                      "--print-metrics")  # fmt: skip
    for done, n in ((kafka, 2000), (ours, 20000)):
        lines = done.stdout.splitlines()
        end = lines.index("")  # the metrics follow a blank line
        *windows, total = lines[:end]
        assert all(WINDOW.match(line) for line in windows), windows
        m = TOTAL.match(total)
        assert m, total
        assert int(m["n"]) == n
        metrics = metrics_of(done.stdout)
        assert {name for group, name in metrics if group == "producer-metrics"} >= set(PRODUCER_METRICS)
        assert float(metrics[("producer-metrics", "record-send-total")]) == n
        assert float(metrics[("producer-metrics", "record-error-total")]) == 0
    ours_metrics = metrics_of(ours.stdout)
    # Kafka has byte-rate per topic only (producer-topic-metrics); pylog gives it for all topics
    assert float(ours_metrics[("producer-metrics", "byte-total")]) > 20000 * 100
    assert float(ours_metrics[("producer-metrics", "outgoing-byte-total")]) > 20000 * 100
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(3)])
    assert sum(ends.values()) == 22000


def test_perf_produce_throughput_and_transactions(broker: EmbeddedBroker, tmp_path: Path) -> None:
    """--throughput paces the sends (the rate the tool prints stays at the target); with a
    transaction duration every record is committed (read_committed sees them all)."""
    topic = new_topic(broker, 1)
    bootstrap = broker.bootstrap_servers
    done = pylog_perf("produce", "--topic", topic, "--num-records", "1500", "--throughput", "500", "--record-size",
                      "10", "--bootstrap-server", bootstrap)  # fmt: skip
    *windows, total = done.stdout.splitlines()
    m = TOTAL.match(total)
    assert m, total
    assert int(m["n"]) == 1500
    assert float(m["rate"]) <= 500 * 1.05  # paced: never ahead of --throughput
    for line in windows:  # a 5 s window holds at most what 5 s at the target allow
        w = WINDOW.match(line)
        assert w, line
        assert int(w["n"]) <= 500 * 5 * 1.1

    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\ngamma\n", encoding="utf-8")
    config = tmp_path / "producer.properties"
    config.write_text(f"bootstrap.servers={bootstrap}\nacks=all\n", encoding="utf-8")
    done = pylog_perf("produce", "--topic", topic, "--num-records", "3000", "--throughput", "-1", "--payload-file",
                      str(payloads), "--producer.config", str(config), "--transactional-id", f"perf-{topic}",
                      "--transaction-duration-ms", "100")  # fmt: skip
    assert TOTAL.match(done.stdout.splitlines()[-1])
    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 1500)
        values: list[bytes] = []
        while len(values) < 3000:
            values += [r.value for r in consumer.poll(5000)]
        assert set(values) == {b"alpha", b"beta", b"gamma"}
        assert len(values) == 3000
    finally:
        consumer.close()


def test_perf_consume_lines_and_metrics_match_kafkas_tool(broker: EmbeddedBroker) -> None:
    topic = new_topic(broker)
    bootstrap = broker.bootstrap_servers
    pylog_perf("produce", "--topic", topic, "--num-records", "30000", "--throughput", "-1", "--record-size", "100",
               "--bootstrap-server", bootstrap)  # fmt: skip
    kafka = kafka_tool("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                       "--messages", "30000", "--timeout", "60000")  # fmt: skip
    assert kafka.returncode == 0, kafka.stderr
    group = f"perf-group-{topic}"
    ours = pylog_perf("consume", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", "30000",
                      "--timeout", "60000", "--group", group, "--print-metrics")  # fmt: skip
    for done in (kafka, ours):
        header, summary = done.stdout.splitlines()[:2]
        assert header == HEADER
        m = SUMMARY.match(summary)
        assert m, summary
        assert int(m["n"]) == 30000
        assert float(m["mb"]) == pytest.approx(30000 * 100 / 1024 / 1024, abs=1e-4)
    metrics = metrics_of(ours.stdout)
    assert {name for group_, name in metrics if group_ == "consumer-fetch-manager-metrics"} >= set(FETCH_METRICS)
    assert {name for group_, name in metrics if group_ == "consumer-coordinator-metrics"} >= set(COORDINATOR_METRICS)
    assert float(metrics[("consumer-fetch-manager-metrics", "records-consumed-total")]) == 30000
    assert float(metrics[("consumer-fetch-manager-metrics", "bytes-consumed-total")]) > 30000 * 100
    assert float(metrics[("consumer-coordinator-metrics", "commit-total")]) == 1

    # the group's offsets were committed where the run stopped: the next run of the group finds
    # nothing left and says so as Kafka's tool does; detailed stats lines and --hide-header
    again = pylog_perf("consume", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", "10",
                       "--timeout", "1000", "--group", group, "--hide-header")  # fmt: skip
    warning, summary = again.stdout.splitlines()
    assert warning.startswith("WARNING: Exiting before consuming the expected number of messages: timeout (1000 ms)")
    m = SUMMARY.match(summary)
    assert m
    assert int(m["n"]) == 0
    detailed = pylog_perf("consume", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", "30000",
                          "--timeout", "60000", "--show-detailed-stats", "--reporting-interval", "1")  # fmt: skip
    header, *lines = detailed.stdout.splitlines()
    assert header == DETAILED_HEADER
    assert lines
    parsed = [DETAILED.match(line) for line in lines]
    assert all(parsed), lines
    counts = [int(m["n"]) for m in parsed if m]
    assert counts == sorted(counts)
    assert counts[-1] <= 30000


def test_perf_consume_resets_a_committed_offset_below_the_log_start(broker: EmbeddedBroker) -> None:
    """The group's committed offset was deleted (DeleteRecords): the run starts at the log start,
    as Kafka's consumer does under auto.offset.reset=earliest."""
    topic = new_topic(broker, 1)
    bootstrap = broker.bootstrap_servers
    pylog_perf("produce", "--topic", topic, "--num-records", "100", "--throughput", "-1", "--payload-monotonic",
               "--bootstrap-server", bootstrap)  # fmt: skip
    group = f"perf-reset-{topic}"
    tp = TopicPartition(topic, 0)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets(group, {tp: 10})
        admin.delete_records({tp: 60})
    done = pylog_perf("consume", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", "40",
                      "--timeout", "60000", "--group", group)  # fmt: skip
    m = SUMMARY.match(done.stdout.splitlines()[1])
    assert m
    assert int(m["n"]) == 40
    assert float(m["mb"]) == pytest.approx(sum(len(str(i)) for i in range(60, 100)) / 1024 / 1024, abs=1e-4)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_consumer_group_offsets(group)[tp].offset == 100
