"""Replication metrics in the Prometheus text format, named as the JMX exporter names Kafka's.

==============================================================  =====================================
sample                                                          Kafka MBean
==============================================================  =====================================
``kafka_server_replicamanager_partitioncount``                  ReplicaManager PartitionCount
``kafka_server_replicamanager_leadercount``                     ReplicaManager LeaderCount
``kafka_server_replicamanager_underreplicatedpartitions``       ReplicaManager UnderReplicatedPartitions
``kafka_server_replicamanager_underminisrpartitioncount``       ReplicaManager UnderMinIsrPartitionCount
``kafka_server_replicamanager_atminisrpartitioncount``          ReplicaManager AtMinIsrPartitionCount
``kafka_server_replicamanager_isrshrinks_total``                ReplicaManager IsrShrinksPerSec (count)
``kafka_server_replicamanager_isrexpands_total``                ReplicaManager IsrExpandsPerSec (count)
``kafka_controller_kafkacontroller_offlinepartitionscount``     KafkaController OfflinePartitionsCount
``kafka_server_fetcherlagmetrics_consumerlag{topic,partition}``  FetcherLagMetrics ConsumerLag
``kafka_server_replicamanager_followerlag{topic,partition,replica}``  (pylog) a follower's lag behind
                                                                the leader's log end, on the leader
==============================================================  =====================================

Under-replicated and min-ISR counts are over the partitions this broker leads (as Kafka's);
offline partitions (no leader) over the whole metadata image, on every node (Kafka reports it on
the active controller only). Rates are exported as monotonically growing ``_total`` counters, the
Prometheus way; ``rate()`` gives Kafka's per-second figure.
"""

from __future__ import annotations

from broker.controller.image import MetadataImage
from broker.replication.replica_manager import ReplicaManager


def render_replication(replicas: ReplicaManager, image: MetadataImage) -> str:
    led = [p for p in replicas.partitions() if p.is_leader]
    hosted = list(replicas.partitions())
    under = sum(1 for p in led if len(p.isr) < len(p.role.replicas if p.role else ()))
    under_min = sum(1 for p in led if len(p.isr) < p.log.config.min_insync_replicas)
    at_min = sum(1 for p in led if len(p.isr) == p.log.config.min_insync_replicas)
    offline = sum(1 for t in image.topics.values() for part in t.partitions.values() if part.leader < 0)
    lines: list[str] = []

    def gauge(name: str, value: int, help_text: str, kind: str = "gauge") -> None:
        lines.extend((f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"))

    gauge("kafka_server_replicamanager_partitioncount", len(hosted), "partitions hosted here")
    gauge("kafka_server_replicamanager_leadercount", len(led), "partitions led here")
    gauge("kafka_server_replicamanager_underreplicatedpartitions", under, "led partitions whose ISR lacks a replica")
    gauge(
        "kafka_server_replicamanager_underminisrpartitioncount", under_min, "led partitions below min.insync.replicas"
    )
    gauge("kafka_server_replicamanager_atminisrpartitioncount", at_min, "led partitions at min.insync.replicas")
    gauge("kafka_server_replicamanager_isrshrinks_total", replicas.isr_shrinks, "ISR shrinks applied", "counter")
    gauge("kafka_server_replicamanager_isrexpands_total", replicas.isr_expands, "ISR expansions applied", "counter")
    gauge("kafka_controller_kafkacontroller_offlinepartitionscount", offline, "partitions without a leader")
    lag = "kafka_server_fetcherlagmetrics_consumerlag"
    lines += [f"# HELP {lag} leader high watermark minus this follower's log end", f"# TYPE {lag} gauge"]
    for p in hosted:
        if not p.is_leader and p.role is not None:
            behind = max(0, p.leader_high_watermark - p.log.log_end_offset)
            lines.append(f'{lag}{{topic="{p.topic}",partition="{p.partition}"}} {behind}')
    follower = "kafka_server_replicamanager_followerlag"
    lines += [f"# HELP {follower} the leader's log end minus a follower's, as last fetched", f"# TYPE {follower} gauge"]
    for p in led:
        end = p.log.log_end_offset
        for replica, state in sorted(p.followers.items()):
            behind = end - state.log_end_offset if state.log_end_offset >= 0 else end
            lines.append(f'{follower}{{topic="{p.topic}",partition="{p.partition}",replica="{replica}"}} {behind}')
    return "\n".join(lines) + "\n"
