"""Per-quota-group metrics: a prometheus-client collector over ``ClientQuotas``.

Kafka's MBeans ``kafka.server:type={Produce|Fetch|Request},user=…,client-id=…`` with attributes
``byte-rate`` (Produce, Fetch), ``request-time`` (Request) and ``throttle-time`` (all three) become
``kafka_server_<type>_<attribute>{user="…",client_id="…"}``, lower case, ``-`` as ``_``
(``kafka_server_produce_byte_rate``, ``kafka_server_fetch_throttle_time``,
``kafka_server_request_request_time`` …); the replication throttles' ``kafka.server:type=
{LeaderReplication|FollowerReplication}`` ``byte-rate`` become
``kafka_server_leaderreplication_byte_rate`` and ``kafka_server_followerreplication_byte_rate``
(bytes/s of throttled partitions, ``broker.quota.replication``). ``user``/``client_id`` are the group's tags
(``broker.quota.entity.QuotaGroup``: "" for a part the matched quota does not name). The
connection counts are the network collector's (``broker.metrics.collectors``). Meanings:
docs/operations.md, "Metrics".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from broker.quota.manager import ClientQuotas
from broker.quota.replication import ReplicationThrottles


class QuotaCollector:
    def __init__(
        self, quotas: ClientQuotas, clock_ms: Callable[[], int], throttles: ReplicationThrottles | None = None
    ) -> None:
        self._quotas = quotas
        self._clock_ms = clock_ms
        self._throttles = throttles

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily] = {}

        def family(name: str, help_text: str) -> GaugeMetricFamily:
            found = families.get(name)
            if found is None:
                found = families[name] = GaugeMetricFamily(name, help_text, labels=["user", "client_id"])
            return found

        for m in self._quotas.metrics(self._clock_ms()):
            kind = m.quota_type.value.lower()
            labels = [m.group.user, m.group.client_id]
            usage = m.quota_type.usage_metric.replace("-", "_")
            family(f"kafka_server_{kind}_{usage}", f"{kind} quota usage ({m.quota_type.usage_metric})").add_metric(
                labels, m.usage_rate
            )
            family(f"kafka_server_{kind}_throttle_time", f"{kind} throttle time, ms (average)").add_metric(
                labels, m.throttle_time_avg_ms
            )
        yield from families.values()
        if self._throttles is not None:
            for side, quota in (("leader", self._throttles.leader), ("follower", self._throttles.follower)):
                yield GaugeMetricFamily(
                    f"kafka_server_{side}replication_byte_rate",
                    f"bytes/s of {side}-side throttled replication (KIP-73)",
                    value=quota.rate(),
                )
