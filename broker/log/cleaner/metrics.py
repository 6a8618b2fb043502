"""The log cleaner's metrics: a prometheus-client collector over ``LogCleaner``.

As in Kafka: the dirty percent is of the dirtiest compacted log at the last choice; the clean time
is the last clean's (seconds, wall clock, the worker's part and the swap); the compaction delay
is how far the most overdue log is past ``max.compaction.lag.ms``; the recopy percent is bytes
written over bytes read by the last clean. ``uncleanable-partitions-count`` is per log dir, as
Kafka's (a partition is uncleanable until restart after a failed clean). Names and Kafka MBeans:
docs/operations.md, "Metrics".
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from broker.log.cleaner.cleaner import LogCleaner

_GAUGES = (
    ("max_dirty_percent", "max-dirty-percent", "dirty percent of the dirtiest compacted log"),
    ("max_clean_time_secs", "max-clean-time-secs", "seconds the last clean took"),
    (
        "max_compaction_delay_secs",
        "max-compaction-delay-secs",
        "seconds the most overdue log is past max.compaction.lag.ms",
    ),
    ("cleaner_recopy_percent", "cleaner-recopy-percent", "bytes written over bytes read by the last clean, percent"),
)


class CleanerCollector:
    def __init__(self, cleaner: LogCleaner) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        values = self._cleaner.metrics()
        for sample, key, help_text in _GAUGES:
            yield GaugeMetricFamily(f"kafka_log_logcleaner_{sample}", help_text, value=float(values[key]))
        uncleanable = GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "partitions the cleaner gave up on until restart",
            labels=["logDirectory"],
        )
        for directory, count in sorted(self._cleaner.uncleanable_by_dir().items()):
            uncleanable.add_metric([str(directory)], count)
        yield uncleanable
        yield CounterMetricFamily(
            "kafka_log_logcleaner_cleaned_logs",
            "cleans completed since start-up",
            value=int(values["cleaned-logs-total"]),
        )
