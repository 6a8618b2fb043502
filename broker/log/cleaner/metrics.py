"""The log cleaner's metrics in the Prometheus text format, named as the JMX exporter names Kafka's.

==========================================================  =========================================
sample (``kafka_log_`` + …)                                 Kafka MBean
==========================================================  =========================================
``logcleaner_max_dirty_percent``                            LogCleaner max-dirty-percent
``logcleaner_max_clean_time_secs``                          LogCleaner max-clean-time-secs
``logcleaner_max_compaction_delay_secs``                    LogCleaner max-compaction-delay-secs
``logcleaner_cleaner_recopy_percent``                       LogCleaner cleaner-recopy-percent
``logcleanermanager_uncleanable_partitions_count{logDirectory}``  LogCleanerManager uncleanable-partitions-count
``logcleaner_cleaned_logs_total``                           (pylog) cleans completed since start-up
==========================================================  =========================================

As in Kafka: the dirty percent is of the dirtiest compacted log at the last choice; the clean time
is the last clean's (seconds, wall clock, the worker's part and the swap); the compaction delay
is how far the most overdue log is past ``max.compaction.lag.ms``; the recopy percent is bytes
written over bytes read by the last clean. ``uncleanable-partitions-count`` is per log dir, as
Kafka's (a partition is uncleanable until restart after a failed clean).
"""

from __future__ import annotations

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


def render_cleaner(cleaner: LogCleaner) -> str:
    values = cleaner.metrics()
    lines: list[str] = []
    for sample, key, help_text in _GAUGES:
        name = f"kafka_log_logcleaner_{sample}"
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {float(values[key])!r}"]
    name = "kafka_log_logcleanermanager_uncleanable_partitions_count"
    lines += [f"# HELP {name} partitions the cleaner gave up on until restart", f"# TYPE {name} gauge"]
    for directory, count in sorted(cleaner.uncleanable_by_dir().items()):
        label = str(directory).replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'{name}{{logDirectory="{label}"}} {count}')
    name = "kafka_log_logcleaner_cleaned_logs_total"
    lines += [f"# HELP {name} cleans completed since start-up", f"# TYPE {name} counter"]
    lines.append(f"{name} {int(values['cleaned-logs-total'])}")
    return "\n".join(lines) + "\n"
