"""Replication metrics: a prometheus-client collector over the ``ReplicaManager`` and the follower
fetchers.

Under-replicated and min-ISR counts are over the partitions this broker leads (as Kafka's);
offline partitions (no leader) over the whole metadata image, on every node (Kafka reports it on
the active controller only). Rates are exported as monotonically growing ``_total`` counters, the
Prometheus way; ``rate()`` gives Kafka's per-second figure. Names and Kafka MBeans:
docs/operations.md, "Metrics".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from broker.metadata.image import MetadataImage
from broker.metrics.exposition import CHECKPOINT_ITEMS, sliced
from broker.replication.fetcher import ReplicaFetchers
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager


class ReplicationCollector:
    def __init__(
        self, replicas: ReplicaManager, image: Callable[[], MetadataImage], fetchers: ReplicaFetchers | None = None
    ) -> None:
        self._replicas = replicas
        self._image = image
        self._fetchers = fetchers

    def collect(self) -> Iterator[Metric | None]:
        replicas = self._replicas
        hosted: list[Partition] = sorted(replicas.partitions(), key=lambda p: (p.topic, p.partition))
        yield None  # a step boundary (broker.metrics.exposition)
        led: list[Partition] = []
        under = under_min = at_min = 0
        for i, p in enumerate(hosted):
            if not p.is_leader:
                continue
            led.append(p)
            isr = len(p.isr)
            min_isr = p.log.config.min_insync_replicas
            under += isr < len(p.role.replicas if p.role else ())
            under_min += isr < min_isr
            at_min += isr == min_isr
            if i % CHECKPOINT_ITEMS == 0:
                yield None
        image = self._image()
        offline = sum(1 for t in list(image.topics.values()) for part in t.partitions.values() if part.leader < 0)
        prefix = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(f"{prefix}partitioncount", "partitions hosted here", value=len(hosted))
        yield GaugeMetricFamily(f"{prefix}leadercount", "partitions led here", value=len(led))
        yield GaugeMetricFamily(
            f"{prefix}underreplicatedpartitions", "led partitions whose ISR lacks a replica", value=under
        )
        yield GaugeMetricFamily(
            f"{prefix}underminisrpartitioncount", "led partitions below min.insync.replicas", value=under_min
        )
        yield GaugeMetricFamily(
            f"{prefix}atminisrpartitioncount", "led partitions at min.insync.replicas", value=at_min
        )
        yield CounterMetricFamily(f"{prefix}isrshrinks", "ISR shrinks applied", value=replicas.isr_shrinks)
        yield CounterMetricFamily(f"{prefix}isrexpands", "ISR expansions applied", value=replicas.isr_expands)
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount", "partitions without a leader", value=offline
        )
        followed = [p for p in hosted if not p.is_leader and p.role is not None]
        max_lag = 0
        for part in sliced(followed):
            lag = GaugeMetricFamily(
                "kafka_server_fetcherlagmetrics_consumerlag",
                "leader high watermark minus this follower's log end",
                labels=["topic", "partition"],
            )
            for p in part:
                behind = max(0, p.leader_high_watermark - p.log.log_end_offset)
                max_lag = max(max_lag, behind)
                lag.add_metric([p.topic, str(p.partition)], behind)
            yield lag
        max_family = GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag",
            "the largest lag of a followed partition, in records",
            labels=["clientid"],
        )
        max_family.add_metric(["Replica"], max_lag)
        yield max_family
        fetched = CounterMetricFamily(
            "kafka_server_fetcherstats_bytes",
            "record bytes this broker's replica fetchers appended",
            labels=["clientid"],
        )
        fetched.add_metric(["Replica"], self._fetchers.bytes_fetched if self._fetchers is not None else 0)
        yield fetched
        for part in sliced(led):
            follower = GaugeMetricFamily(
                "kafka_server_replicamanager_followerlag",
                "the leader's log end minus a follower's, as last fetched",
                labels=["topic", "partition", "replica"],
            )
            for p in part:
                end = p.log.log_end_offset
                for replica, state in sorted(p.followers.items()):
                    behind = end - state.log_end_offset if state.log_end_offset >= 0 else end
                    follower.add_metric([p.topic, str(p.partition), str(replica)], behind)
            yield follower
