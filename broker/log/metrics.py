"""Log-dir and per-partition log metrics: prometheus-client collectors over the ``LogManager``.

Collectors run on the broker's event loop, one family (or a slice of one) at a time
(``broker.metrics.exposition``). Names and Kafka MBeans: docs/operations.md, "Metrics".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from broker.log.log import Log
from broker.log.manager import LogManager
from broker.metrics.exposition import sliced

_PER_LOG: tuple[tuple[str, str, Callable[[Log], float]], ...] = (
    ("size", "bytes of the partition's segments (Log Size)", lambda lg: lg.size_bytes),
    ("numlogsegments", "segments of the partition (Log NumLogSegments)", lambda lg: len(lg.segments)),
    ("logstartoffset", "the partition's log start offset (Log LogStartOffset)", lambda lg: lg.log_start_offset),
    ("logendoffset", "the partition's log end offset (Log LogEndOffset)", lambda lg: lg.log_end_offset),
)


class LogDirCollector:
    """``kafka_log_logmanager_*``: offline log dirs, and per dir its state, errors and transitions."""

    def __init__(self, logs: LogManager) -> None:
        self._logs = logs

    def collect(self) -> Iterator[Metric]:
        prefix = "kafka_log_logmanager_"
        logs = self._logs
        yield GaugeMetricFamily(
            f"{prefix}offlinelogdirectorycount", "log dirs offline after an I/O error", value=logs.offline_dir_count
        )
        states = [(str(d.absolute()), s) for d, s in list(logs.dir_states.items())]
        offline = GaugeMetricFamily(
            f"{prefix}logdirectoryoffline", "1 while the log dir is offline", labels=["logdirectory"]
        )
        errors = CounterMetricFamily(
            f"{prefix}logdirectoryerrors", "I/O errors seen in the log dir", labels=["logdirectory"]
        )
        transitions = CounterMetricFamily(
            f"{prefix}logdirectoryofflinetransitions", "times the log dir went offline", labels=["logdirectory"]
        )
        for directory, state in states:
            offline.add_metric([directory], int(state.offline))
            errors.add_metric([directory], state.errors_total)
            transitions.add_metric([directory], state.offline_transitions)
        yield from (offline, errors, transitions)


class LogCollector:
    """``kafka_log_log_{size,numlogsegments,logstartoffset,logendoffset}{topic,partition}`` of every
    partition log on this broker, in slices (a broker may hold thousands)."""

    def __init__(self, logs: LogManager) -> None:
        self._logs = logs

    def collect(self) -> Iterator[Metric | None]:
        logs: list[Log] = sorted(self._logs.logs(), key=lambda lg: (lg.topic, lg.partition))
        yield None  # a step boundary (broker.metrics.exposition)
        for name, help_text, value in _PER_LOG:
            for part in sliced(logs):
                family = GaugeMetricFamily(f"kafka_log_log_{name}", help_text, labels=["topic", "partition"])
                for lg in part:
                    family.add_metric([lg.topic, str(lg.partition)], value(lg))
                yield family
