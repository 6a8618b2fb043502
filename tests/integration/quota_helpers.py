"""What the quota tests (test_quotas.py, test_quota_rates.py) share: a broker with a metrics port,
quota changes through pylog's admin client, /metrics reads, librdkafka's throttle statistics
and a measured librdkafka producer."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer as CKProducer

from pyspark_log.client import AdminClient, ClientQuotaAlteration
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import free_port

MB = 1_000_000
QUOTA = 1_048_576  # producer_byte_rate=1 MB/s
PAYLOAD = b"q" * 10_000


def start_broker(path: Path, **overrides: str) -> tuple[EmbeddedBroker, int]:
    metrics_port = free_port()
    settings = {"quota.window.num": "3", "metrics.port": str(metrics_port), **overrides}
    broker = EmbeddedBroker(path, python=sys.executable, overrides=settings).start()
    return broker, metrics_port


def set_quota(bootstrap: str, entity: dict[str, str | None], **ops: float | None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)])
    finally:
        admin.close()


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def metric_value(text: str, name: str, client_id: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'client_id="{client_id}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


class Stats:
    """librdkafka's per-broker throttle statistics (``brokers.*.throttle``, ms)."""

    def __init__(self) -> None:
        self.throttle_max_ms = 0

    def __call__(self, text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            self.throttle_max_ms = max(self.throttle_max_ms, int(broker.get("throttle", {}).get("max", 0)))


def produce_measured(
    bootstrap: str,
    topic: str,
    client_id: str,
    *,
    warmup_s: float,
    measure_s: float,
    offered: float | None = None,
    **extra: object,
) -> tuple[float, int]:
    """A librdkafka producer sending ``PAYLOAD`` records for ``warmup_s + measure_s``: (bytes/s
    delivered in the ``measure_s`` after ``warmup_s``, librdkafka's largest throttle time).
    ``offered`` None: as fast as the client can (its queue kept full); else paced to that many
    bytes/s. ``extra``: more librdkafka settings (a SASL login, ``batch.size``)."""
    stats = Stats()
    producer = CKProducer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 1024,
            "statistics.interval.ms": 200,
            "stats_cb": stats,
            **extra,
        }
    )
    delivered: list[float] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is None:
            delivered.append(time.monotonic())

    start = time.monotonic()
    end = start + warmup_s + measure_s
    sent = 0
    try:
        while (now := time.monotonic()) < end:
            if offered is not None and sent * len(PAYLOAD) > (now - start) * offered:
                producer.poll(0.005)
                continue
            try:
                producer.produce(topic, PAYLOAD, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.poll(0.5)  # one more statistics round
    finally:
        producer.purge()
        producer.flush(10)
    counted = sum(1 for t in delivered if start + warmup_s <= t < end)
    return counted * len(PAYLOAD) / measure_s, stats.throttle_max_ms
