"""A broker process reports its garbage-collection pauses on ``/metrics`` (``metrics.port``), and
``gc.freeze.enable`` (default on) freezes its start-up heap while the collector keeps running.

Project rule: "Nothing that can take more than a millisecond runs on the broker's event loop
between requests: measure the loop's stalls." A confluent-kafka producer sends records until the
page shows young-generation collections; the page is polled, never waited for blindly.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import free_port
from tests.integration.compat import Rec, confluent_producer_config, confluent_send, confluent_wait
from tests.waiting import wait_until

_SAMPLE = re.compile(r"^(?P<key>python_gc_[a-z_]+(?:\{[^}]*\})?) (?P<value>\S+)$")


def gc_samples(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {m["key"]: float(m["value"]) for line in text.splitlines() if (m := _SAMPLE.match(line))}


@pytest.mark.parametrize("freeze", [True, False], ids=["freeze-on", "freeze-off"])
def test_broker_reports_collection_pauses_per_generation(tmp_path: Path, topic_name: str, freeze: bool) -> None:
    port = free_port()
    overrides = {"metrics.port": str(port), "gc.freeze.enable": str(freeze).lower()}
    with EmbeddedBroker(tmp_path / "broker", overrides=overrides) as broker:
        first = gc_samples(port)
        for g in "012":
            assert f'python_gc_collections_total{{generation="{g}"}}' in first
            assert f'python_gc_pause_seconds{{generation="{g}",quantile="0.99"}}' in first
        if freeze:
            assert first["python_gc_frozen_objects"] > 1000  # modules, classes, the loaded logs
        else:
            assert first["python_gc_frozen_objects"] == 0

        producer = Producer(confluent_producer_config(broker.bootstrap_servers, **{"linger.ms": 0}))
        young = 'python_gc_pause_seconds_count{generation="0"}'  # collections since ready (pylog's)

        def collected() -> dict[str, float] | None:
            confluent_wait(producer, confluent_send(producer, topic_name, [Rec(None, b"v" * 100)] * 50))
            samples = gc_samples(port)
            return samples if samples[young] >= 1 else None

        page = wait_until(collected, "a young-generation collection on /metrics", timeout_s=120)
        # prometheus-client's GCCollector counts since the process started, pylog's pauses since ready
        assert page['python_gc_collections_total{generation="0"}'] >= page[young]
        assert page['python_gc_pause_seconds_max{generation="0"}'] > 0
        assert (
            page['python_gc_pause_seconds_sum{generation="0"}'] >= page['python_gc_pause_seconds_max{generation="0"}']
        )
        assert broker.running
