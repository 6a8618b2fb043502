"""Log-dir metrics in the Prometheus text format, named as the JMX exporter names Kafka's.

=====================================================================  ================================
sample                                                                 Kafka MBean
=====================================================================  ================================
``kafka_log_logmanager_offlinelogdirectorycount``                      LogManager OfflineLogDirectoryCount
``kafka_log_logmanager_logdirectoryoffline{logdirectory}``             LogManager LogDirectoryOffline
``kafka_log_logmanager_logdirectoryerrors_total{logdirectory}``        (pylog) I/O errors seen in the dir
``kafka_log_logmanager_logdirectoryofflinetransitions_total{...}``     (pylog) times the dir went offline
=====================================================================  ================================
"""

from __future__ import annotations

from broker.log.manager import LogManager


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_log_dirs(logs: LogManager) -> str:
    prefix = "kafka_log_logmanager_"
    lines = [
        f"# HELP {prefix}offlinelogdirectorycount log dirs offline after an I/O error",
        f"# TYPE {prefix}offlinelogdirectorycount gauge",
        f"{prefix}offlinelogdirectorycount {logs.offline_dir_count}",
    ]
    per_dir = (
        ("logdirectoryoffline", "gauge", "1 while the log dir is offline", lambda s: int(s.offline)),
        ("logdirectoryerrors_total", "counter", "I/O errors seen in the log dir", lambda s: s.errors_total),
        (
            "logdirectoryofflinetransitions_total",
            "counter",
            "times the log dir went offline",
            lambda s: s.offline_transitions,
        ),
    )
    for name, kind, help_text, value in per_dir:
        lines += [f"# HELP {prefix}{name} {help_text}", f"# TYPE {prefix}{name} {kind}"]
        for directory, state in logs.dir_states.items():
            lines.append(f'{prefix}{name}{{logdirectory="{_label(str(directory.absolute()))}"}} {value(state)}')
    return "\n".join(lines) + "\n"
