"""prometheus-client collectors over the broker's own state (the subsystems' collectors live in
their ``metrics`` modules: ``broker.log.metrics``, ``broker.replication.metrics`` …).

Each collector's ``collect()`` is a generator run on the event loop by the renderer
(``broker.metrics.exposition``), one family or a slice of one at a time: it never keeps an
iterator over a live dict across a ``yield`` (it copies the keys first). Names follow the
Prometheus JMX exporter's mapping of Kafka's MBeans, lower case ``kafka_<domain>_<type>_<name>``,
meters as ``_total`` counters, ``…Ms`` timers as histograms in ms; pylog's own figures are
``pylog_*``. The list with meanings and Kafka MBeans: docs/operations.md, "Metrics".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from broker.metrics.exposition import CHECKPOINT_ITEMS, sliced
from broker.metrics.instruments import TIMERS, TOPIC_METERS, BrokerStats, Histogram
from broker.metrics.loop import LoopMonitor

if TYPE_CHECKING:
    from broker.coordinator.group.coordinator import GroupCoordinator
    from broker.coordinator.group.group import Group
    from broker.coordinator.txn.coordinator import TransactionCoordinator
    from broker.metadata.image import MetadataImage
    from broker.network.listener import Listener
    from broker.raft.driver import RaftDriver
    from broker.replication.replica_manager import ReplicaManager

RAFT_PREFIX = "kafka_raft_"
RAFT_STATES = ("leader", "candidate", "voted", "unattached", "follower", "observer", "resigned")
_RAFT_HELP = {
    "current-leader": "current quorum leader id, -1 if unknown",
    "current-epoch": "current quorum epoch, 0 if unknown",
    "current-vote": "the voter this replica voted for in the current epoch, -1 if none",
    "log-end-offset": "log end offset of the metadata log",
    "log-end-epoch": "epoch of the last entry of the metadata log",
    "high-watermark": "high watermark of the metadata log, -1 if unknown",
    "current-state": "current role of this replica (1 for the current state)",
    "number-unknown-voter-connections": "voters without an open connection",
    "election-latency-avg": "average time from candidate to known leader (ms)",
    "election-latency-max": "largest time from candidate to known leader (ms)",
    "commit-latency-avg": "average time from leader append to commit (ms)",
    "commit-latency-max": "largest time from leader append to commit (ms)",
    "fetch-records-rate": "records fetched per second (followers and observers)",
    "append-records-rate": "records appended per second (leader)",
    "poll-idle-ratio-avg": "fraction of time the Raft loop was idle",
}


def histogram(name: str, help_text: str, hist: Histogram, labels: Mapping[str, str] | None = None) -> Metric:
    family = HistogramMetricFamily(name, help_text, labels=list(labels) if labels else None)
    family.add_metric(list(labels.values()) if labels else [], hist.cumulative(), hist.sum)
    return family


class RaftCollector:
    """KIP-595 ``raft-manager`` metrics: ``kafka_raft_`` + the name with ``-`` as ``_``;
    ``current-state`` is one ``kafka_raft_current_state{state}`` sample per state, 1 for the current
    one. ``values()`` None (no quorum on this node): only ``kafka_raft_up 0``."""

    def __init__(self, values: Callable[[], Mapping[str, float | int | str] | None]) -> None:
        self._values = values

    def collect(self) -> Iterator[Metric]:
        values = self._values()
        yield GaugeMetricFamily(
            f"{RAFT_PREFIX}up", "1 when this node runs a KIP-595 quorum replica", value=int(bool(values))
        )
        for name, value in (values or {}).items():
            prom = RAFT_PREFIX + name.replace("-", "_").replace(".", "_")
            if isinstance(value, str):
                family = GaugeMetricFamily(prom, _RAFT_HELP.get(name, name), labels=["state"])
                for state in RAFT_STATES if value in RAFT_STATES else (*RAFT_STATES, value):
                    family.add_metric([state], int(state == value))
                yield family
            else:
                yield GaugeMetricFamily(prom, _RAFT_HELP.get(name, name), value=value)


class ControllerCollector:
    """KafkaController gauges: ActiveControllerCount (1 on the leader of the metadata quorum, and
    on a single broker without ``process.roles``),
    GlobalTopicCount, GlobalPartitionCount (from this node's metadata image, on every node), and
    the metadata log's committed offset."""

    def __init__(
        self, image: Callable[[], MetadataImage], raft: Callable[[], RaftDriver | None], *, local: bool = False
    ) -> None:
        """``local``: a broker without ``process.roles`` (its own ``LocalController``), which is
        the active controller of its one-node cluster."""
        self._image = image
        self._raft = raft
        self._local = local

    def collect(self) -> Iterator[Metric]:
        prefix = "kafka_controller_kafkacontroller_"
        raft = self._raft()
        active = int(self._local or (raft is not None and raft.running and raft.is_leader))
        yield GaugeMetricFamily(
            f"{prefix}activecontrollercount", "1 on the active controller (the metadata quorum's leader)", value=active
        )
        image = self._image()
        topics = [t for t in list(image.topics.values()) if t.name != "__cluster_metadata"]
        yield GaugeMetricFamily(f"{prefix}globaltopiccount", "topics in the cluster", value=len(topics))
        yield GaugeMetricFamily(
            f"{prefix}globalpartitioncount",
            "partitions in the cluster",
            value=sum(len(t.partitions) for t in topics),
        )
        if raft is not None and raft.running:
            yield GaugeMetricFamily(
                f"{prefix}lastcommittedrecordoffset",
                "offset of the last committed record of the metadata log (high watermark - 1)",
                value=raft.high_watermark - 1,
            )


class RequestCollector:
    """BrokerTopicMetrics, RequestMetrics, the socket server's counters per listener, the fetcher
    and flush figures, group and transaction request counts: everything ``BrokerStats`` counts."""

    def __init__(self, stats: BrokerStats, listeners: Callable[[], list[Listener]] = list) -> None:
        self._stats = stats
        self._listeners = listeners

    def collect(self) -> Iterator[Metric]:
        stats = self._stats
        yield from self._topics(stats)
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "requests answered (or, acks=0, handled)",
            labels=["request", "version"],
        )
        for (api, version), count in sorted(stats.requests.items()):
            requests.add_metric([api, str(version)], count)
        yield requests
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "error codes other than NONE in responses",
            labels=["request", "error"],
        )
        for (api, error), count in sorted(stats.errors.items()):
            errors.add_metric([api, error], count)
        yield errors
        timers = sorted(stats.timers.items())
        for index, (name, _, help_text) in enumerate(TIMERS):
            family = HistogramMetricFamily(
                f"kafka_network_requestmetrics_{name}", help_text + " (ms)", labels=["request"]
            )
            for api, timer_set in timers:
                hist = timer_set.histogram(index)
                family.add_metric([api], hist.cumulative(), hist.sum)
            yield family
        yield from self._network(stats)
        yield histogram(
            "kafka_log_logflushstats_logflushrateandtimems", "time of one log flush's fsyncs (ms)", stats.flush_ms
        )

    @staticmethod
    def _topics(stats: BrokerStats) -> Iterator[Metric]:
        topics = sorted(stats.topics.items())
        for index, (name, _mbean, help_text) in enumerate(TOPIC_METERS):
            first = True
            for part in sliced(topics):
                family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", help_text, labels=["topic"])
                if first:  # the all-topics sample: no topic label (the JMX exporter's rendering)
                    family.samples.append(
                        Sample(f"kafka_server_brokertopicmetrics_{name}_total", {}, stats.all_topics[index])
                    )
                    first = False
                for topic, counts in part:
                    family.add_metric([topic], counts[index])
                yield family

    def _network(self, stats: BrokerStats) -> Iterator[Metric]:
        prefix = "kafka_server_socket_server_metrics_"
        listeners = {sl.name: sl for sl in self._listeners()}
        count = GaugeMetricFamily(f"{prefix}connection_count", "open connections", labels=["listener"])
        for name, sl in sorted(listeners.items()):
            count.add_metric([name], sl.connection_count)
        yield count
        counters = sorted(stats.listeners.items())
        for attribute, help_text in (
            ("connection_creation", "connections accepted"),
            ("connection_close", "connections closed"),
            ("incoming_byte", "bytes received"),
            ("outgoing_byte", "bytes sent (responses, size prefixes included)"),
        ):
            family = CounterMetricFamily(f"{prefix}{attribute}", help_text, labels=["listener"])
            for name, c in counters:
                value = {
                    "connection_creation": c.connections_created,
                    "connection_close": c.connections_closed,
                    "incoming_byte": c.incoming_bytes,
                    "outgoing_byte": c.outgoing_bytes,
                }[attribute]
                family.add_metric([name], value)
            yield family


class LoopCollector:
    """The event loop's lag histogram and busy fraction, and Kafka's two idle percents (1 - busy)."""

    def __init__(self, monitor: LoopMonitor) -> None:
        self._monitor = monitor

    def collect(self) -> Iterator[Metric]:
        m = self._monitor
        yield histogram("pylog_event_loop_lag_seconds", "how late a 100 ms timer woke (the loop's stalls)", m.lag)
        busy = m.busy_ratio()
        yield GaugeMetricFamily(
            "pylog_event_loop_busy_ratio", "fraction of the last 10 s the loop ran callbacks", value=busy
        )
        yield CounterMetricFamily(
            "pylog_event_loop_idle_seconds", "time the loop waited for I/O or timers", value=m.idle_s
        )
        yield GaugeMetricFamily(
            "kafka_network_socketserver_networkprocessoravgidlepercent",
            "fraction of time the network processing was idle (0..1; pylog: 1 - the loop's busy ratio)",
            value=1.0 - busy,
        )
        yield GaugeMetricFamily(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
            "fraction of time the request handlers were idle (0..1; pylog: 1 - the loop's busy ratio)",
            value=1.0 - busy,
        )


class GroupCollector:
    """The group coordinator's groups by state, rebalances and offset commits, and each group's
    lag (kafka_exporter's ``kafka_consumergroup_lag``): high watermark minus committed offset, for
    the partitions this broker hosts, on the broker coordinating the group."""

    def __init__(self, groups: GroupCoordinator | None, replicas: ReplicaManager | None, stats: BrokerStats) -> None:
        self._groups = groups
        self._replicas = replicas
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        from broker.coordinator.group.group import GroupState

        manager = self._groups.manager if self._groups is not None else None
        groups = list(manager.groups.values()) if manager is not None and manager.active else []
        by_state = dict.fromkeys((s.value for s in GroupState), 0)
        for g in groups:
            by_state[g.state.value] = by_state.get(g.state.value, 0) + 1
        family = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_group_count", "groups coordinated here, by state", labels=["state"]
        )
        for state, n in sorted(by_state.items()):
            family.add_metric([state], n)
        yield family
        yield CounterMetricFamily(
            "kafka_server_group_coordinator_metrics_group_completed_rebalance",
            "rebalances completed (JoinGroup answered to the generation's leader)",
            value=self._stats.rebalances,
        )
        yield CounterMetricFamily(
            "kafka_server_group_coordinator_metrics_offset_commit",
            "offsets committed (partitions of OffsetCommit and TxnOffsetCommit answered NONE)",
            value=self._stats.offset_commits,
        )
        yield from self._lag(groups)

    def _lag(self, groups: list[Group]) -> Iterator[Metric]:
        replicas = self._replicas
        rows: list[tuple[str, str, int, int]] = []
        manager = self._groups.manager if self._groups is not None else None
        for g in groups:
            offsets = list(manager.replicated_offsets(g).items()) if manager is not None else []
            for (topic, partition), committed in offsets:
                hw = replicas.high_watermark_of(topic, partition) if replicas is not None else None
                if hw is not None and committed.offset >= 0:
                    rows.append((g.group_id, topic, partition, max(0, hw - committed.offset)))
        rows.sort()
        sums: dict[str, int] = {}
        for part in sliced(rows):
            family = GaugeMetricFamily(
                "kafka_consumergroup_lag",
                "the group's committed offset behind the partition's high watermark",
                labels=["consumergroup", "topic", "partition"],
            )
            for group_id, topic, partition, lag in part:
                family.add_metric([group_id, topic, str(partition)], lag)
                sums[group_id] = sums.get(group_id, 0) + lag
            yield family
        total = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum", "the group's lag over its partitions", labels=["consumergroup"]
        )
        for group_id, lag in sorted(sums.items()):
            total.add_metric([group_id], lag)
        yield total


class TxnCollector:
    """Transactions: open (coordinated here), aborted (by clients with EndTxn, and by the
    coordinator for their timeout) and hanging (ongoing on a partition led here, the producer
    silent for longer than ``transaction.max.timeout.ms``: what ``kafka-transactions.sh find-hanging``
    reports)."""

    def __init__(
        self,
        txn: TransactionCoordinator | None,
        replicas: ReplicaManager | None,
        stats: BrokerStats,
        clock_ms: Callable[[], int],
    ) -> None:
        self._txn = txn
        self._replicas = replicas
        self._stats = stats
        self._clock_ms = clock_ms

    def collect(self) -> Iterator[Metric | None]:
        from broker.coordinator.txn.records import TxnState

        txn = self._txn
        open_states = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        txns = list(txn.manager.txns.values()) if txn is not None and txn.manager.active else []
        yield GaugeMetricFamily(
            "pylog_transactions_open",
            "transactions coordinated here that are ongoing or completing",
            value=sum(1 for t in txns if t.state in open_states),
        )
        aborted = CounterMetricFamily("pylog_transactions_aborted", "transactions aborted", labels=["reason"])
        aborted.add_metric(["client"], self._stats.txn_aborts_requested)
        aborted.add_metric(["timeout"], txn.timed_out_aborts if txn is not None else 0)
        yield aborted
        yield CounterMetricFamily(
            "pylog_transactions_committed",
            "transactions committed (EndTxn commit)",
            value=self._stats.txn_commits_requested,
        )
        hanging = 0
        if self._replicas is not None:
            max_ms = txn.config.max_timeout_ms if txn is not None else 900_000
            horizon = self._clock_ms() - max_ms
            for i, p in enumerate(list(self._replicas.partitions())):
                if i % CHECKPOINT_ITEMS == 0:
                    yield None  # a step boundary (broker.metrics.exposition)
                if not p.is_leader:
                    continue
                state = p.log.producer_state
                if state.first_unstable_offset() is None:
                    continue
                for producer_id in state.ongoing_transactions():
                    entry = state.producers.get(producer_id)
                    if entry is not None and 0 <= entry.last_timestamp_ms < horizon:
                        hanging += 1
        yield GaugeMetricFamily(
            "pylog_transactions_hanging",
            "ongoing transactions on partitions led here whose producer is silent past transaction.max.timeout.ms",
            value=hanging,
        )
