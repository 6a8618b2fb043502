"""What the quota tests (test_quotas.py, test_quota_rates.py) share: a broker with a metrics port,
quota changes through pylog's admin client, /metrics reads and librdkafka's throttle statistics."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

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
