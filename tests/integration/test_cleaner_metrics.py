"""The log cleaner's metrics on ``/metrics`` (``metrics.port``), with Kafka's names (issue 13).

Kafka's ``kafka.log:type=LogCleaner`` gauges max-dirty-percent, max-clean-time-secs,
max-compaction-delay-secs, cleaner-recopy-percent and ``kafka.log:type=LogCleanerManager``
uncleanable-partitions-count (per log dir), as the Prometheus JMX exporter names them. A
compacted topic with small segments is overwritten with confluent-kafka; the page is polled until
it reports a completed clean.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import free_port
from tests.integration.compat import TIMEOUT_S, Rec, confluent_producer_config, confluent_send, confluent_wait
from tests.waiting import wait_until

_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


@pytest.fixture
def metered_broker(tmp_path: Path) -> Iterator[tuple[EmbeddedBroker, int]]:
    port = free_port()
    overrides = {
        "metrics.port": str(port),
        "log.cleaner.backoff.ms": "50",
        "log.cleaner.min.cleanable.ratio": "0.01",
    }
    with EmbeddedBroker(tmp_path / "broker", overrides=overrides) as broker:
        yield broker, port


def samples(port: int) -> dict[str, float]:
    """``name{labels}`` -> value of every sample on the page."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is not None:
            labels = found["labels"]
            out[found["name"] + (f"{{{labels}}}" if labels else "")] = float(found["value"])
    return out


def test_cleaner_metrics_have_kafkas_names(metered_broker: tuple[EmbeddedBroker, int], topic_name: str) -> None:
    broker, port = metered_broker
    before = samples(port)
    assert before["kafka_log_logcleaner_cleaned_logs_total"] == 0
    uncleanable = [k for k in before if k.startswith("kafka_log_logcleanermanager_uncleanable_partitions_count{")]
    assert len(uncleanable) == 1  # one log dir
    assert 'logDirectory="' in uncleanable[0]
    assert before[uncleanable[0]] == 0

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    config = {"cleanup.policy": "compact", "segment.bytes": "2048"}
    admin.create_topics([NewTopic(topic_name, 1, 1, config=config)], operation_timeout=TIMEOUT_S)[topic_name].result(
        TIMEOUT_S
    )
    producer = Producer(confluent_producer_config(broker.bootstrap_servers, **{"linger.ms": 0}))
    for round_ in range(10):
        records = [Rec(f"k{k}".encode(), f"{round_}-{k}-".encode() + b"z" * 80) for k in range(8)]
        confluent_wait(producer, confluent_send(producer, topic_name, records))

    page = wait_until(
        lambda: (s := samples(port))["kafka_log_logcleaner_cleaned_logs_total"] >= 1 and s,
        "a completed clean on /metrics",
        timeout_s=60,
    )
    # Overwritten records were dropped: the clean wrote less than it read.
    assert 0 < page["kafka_log_logcleaner_cleaner_recopy_percent"] < 100
    assert page["kafka_log_logcleaner_max_clean_time_secs"] > 0
    assert 0 <= page["kafka_log_logcleaner_max_dirty_percent"] <= 100
    assert page["kafka_log_logcleaner_max_compaction_delay_secs"] == 0  # max.compaction.lag.ms is unbounded
    assert page[uncleanable[0]] == 0
