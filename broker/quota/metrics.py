"""Per-quota-group metrics in the Prometheus text format, named as the JMX exporter names Kafka's.

Kafka's MBeans ``kafka.server:type={Produce|Fetch|Request},user=…,client-id=…`` with attributes
``byte-rate`` (Produce, Fetch), ``request-time`` (Request) and ``throttle-time`` (all three) become
``kafka_server_<type>_<attribute>{user="…",client_id="…"}``, lower case, ``-`` as ``_``::

    kafka_server_produce_byte_rate{user="",client_id="loader"} 1048320.5
    kafka_server_fetch_throttle_time{user="",client_id="loader"} 412.0
    kafka_server_request_request_time{user="",client_id="loader"} 3.1

``user``/``client_id`` are the group's tags (``broker.quota.entity.QuotaGroup``: "" for a part the
matched quota does not name). ``kafka_server_socket_server_metrics_connection_count`` is the number
of open client connections (Kafka's socket-server-metrics ``connection-count``).
"""

from __future__ import annotations

from broker.quota.connections import ConnectionQuotas
from broker.quota.manager import ClientQuotas


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_quotas(quotas: ClientQuotas, connections: ConnectionQuotas | None, now_ms: int) -> str:
    series: dict[str, list[str]] = {}
    for m in quotas.metrics(now_ms):
        kind = m.quota_type.value.lower()
        labels = f'{{user="{_label(m.group.user)}",client_id="{_label(m.group.client_id)}"}}'
        usage = f"kafka_server_{kind}_{m.quota_type.usage_metric.replace('-', '_')}"
        series.setdefault(usage, []).append(f"{usage}{labels} {m.usage_rate!r}")
        throttle = f"kafka_server_{kind}_throttle_time"
        series.setdefault(throttle, []).append(f"{throttle}{labels} {m.throttle_time_avg_ms!r}")
    lines: list[str] = []
    for name, samples in series.items():
        lines.append(f"# TYPE {name} gauge")
        lines.extend(samples)
    if connections is not None:
        name = "kafka_server_socket_server_metrics_connection_count"
        lines += [f"# TYPE {name} gauge", f"{name} {connections.total}"]
    return "\n".join(lines) + "\n" if lines else ""
