"""The pylog Grafana dashboard, generated with grafana-foundation-sdk (the ``test`` extra pins it).

    .venv/bin/python ops/grafana/dashboard.py          # rewrites ops/grafana/pylog-dashboard.json
    .venv/bin/python ops/grafana/dashboard.py --check  # exit 1 when the checked-in JSON is stale

Every query reads the metric names of docs/operations.md (Kafka's MBeans as the Prometheus JMX
exporter maps them: ``PerSec`` meters are ``_total`` counters, ``...Ms`` timers are histograms in
ms) from one Prometheus data source chosen by the ``datasource`` variable. All-topics samples have
no ``topic`` label (``{topic=""}`` selects them). tests/unit/test_grafana_dashboard.py checks the
checked-in JSON against this generator and the library's model; tests/integration/test_prometheus.py
evaluates every query on a real Prometheus scraping a 3-node cluster.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.dashboard import DataSourceRef

OUTPUT = Path(__file__).with_name("pylog-dashboard.json")
UID = "pylog-overview"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"  # Grafana's per-panel rate window (four scrape intervals at least)

Query = tuple[str, str]  # (PromQL, legend)


def _targets(queries: tuple[Query, ...]) -> Iterator[prometheus.Dataquery]:
    for i, (expr, legend) in enumerate(queries):
        yield prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + i)).datasource(DATASOURCE)


def graph(title: str, unit: str, *queries: Query, description: str = "", span: int = 8) -> timeseries.Panel:
    """A time series panel of the ``queries``."""
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .height(8)
        .span(span)
        .legend(common_builders.VizLegendOptions().display_mode(common.LegendDisplayMode.LIST).show_legend(True))
        .line_width(1)
        .fill_opacity(10)
        .show_points(common.VisibilityMode.NEVER)
    )
    for target in _targets(queries):
        panel = panel.with_target(target)
    return panel


def single(title: str, *queries: Query, description: str = "", red_from: float = 1) -> stat.Panel:
    """A stat panel: green below ``red_from``, red from it."""
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .height(4)
        .span(4)
        .graph_mode(common.BigValueGraphMode.AREA)
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .thresholds(
            dashboard.ThresholdsConfig()
            .mode(model.ThresholdsMode.ABSOLUTE)
            .steps([model.Threshold(value=None, color="green"), model.Threshold(value=red_from, color="red")])
        )
    )
    for target in _targets(queries):
        panel = panel.with_target(target)
    return panel


def quantiles(metric: str, by: str, selector: str = "") -> tuple[Query, ...]:
    """p50 and p99 of a histogram, per ``by``."""
    return tuple(
        (
            f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{selector}[{RATE}])))",
            f"p{int(q * 100)} {{{{{by}}}}}",
        )
        for q in (0.5, 0.99)
    )


def build() -> dict[str, Any]:
    """The dashboard's JSON model (as Grafana imports it); panel ids in layout order from 1."""
    ids = itertools.count(1)
    board = (
        dashboard.Dashboard("pylog")
        .uid(UID)
        .description("A pylog cluster through its Kafka-named metrics (docs/operations.md, Dashboards and alerts)")
        .tags(["pylog", "kafka"])
        .editable()
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    )

    board = board.with_row(dashboard.Row("Cluster health").id(next(ids)))
    for panel in (
        single(
            "Active controllers",
            ("sum(kafka_controller_kafkacontroller_activecontrollercount)", "active"),
            description="ActiveControllerCount summed over the nodes: exactly 1 when healthy",
            red_from=2,
        ),
        single(
            "Under-replicated partitions",
            ("sum(kafka_server_replicamanager_underreplicatedpartitions)", "under-replicated"),
            description="UnderReplicatedPartitions summed over the leaders",
        ),
        single(
            "Offline partitions",
            ("max(kafka_controller_kafkacontroller_offlinepartitionscount)", "offline"),
            description="OfflinePartitionsCount: partitions without a live leader",
        ),
        single(
            "Under min ISR partitions",
            ("sum(kafka_server_replicamanager_underminisrpartitioncount)", "under min ISR"),
            description="UnderMinIsrPartitionCount: acks=all produce fails on these",
        ),
        single(
            "Offline log directories",
            ("sum(kafka_log_logmanager_offlinelogdirectorycount)", "offline"),
            description="OfflineLogDirectoryCount summed over the brokers",
        ),
        single(
            "Topics / partitions",
            ("max(kafka_controller_kafkacontroller_globaltopiccount)", "topics"),
            ("max(kafka_controller_kafkacontroller_globalpartitioncount)", "partitions"),
            red_from=1e12,
        ),
        graph(
            "ISR shrinks / expands",
            "ops",
            (f"sum by (instance) (rate(kafka_server_replicamanager_isrshrinks_total[{RATE}]))", "shrinks {{instance}}"),
            (f"sum by (instance) (rate(kafka_server_replicamanager_isrexpands_total[{RATE}]))", "expands {{instance}}"),
            description="IsrShrinksPerSec / IsrExpandsPerSec",
        ),
        graph(
            "Partitions and leaders per broker",
            "short",
            ("sum by (instance) (kafka_server_replicamanager_partitioncount)", "partitions {{instance}}"),
            ("sum by (instance) (kafka_server_replicamanager_leadercount)", "leaders {{instance}}"),
        ),
        graph(
            "Replica fetcher",
            "short",
            (
                'max by (instance) (kafka_server_replicafetchermanager_maxlag{clientid="Replica"})',
                "max lag {{instance}}",
            ),
            (f"sum by (instance) (rate(kafka_server_fetcherstats_bytes_total[{RATE}]))", "bytes/s {{instance}}"),
            description="ReplicaFetcherManager MaxLag (records) and FetcherStats BytesPerSec",
        ),
    ):
        board = board.with_panel(panel.id(next(ids)))

    board = board.with_row(dashboard.Row("Throughput").id(next(ids)))
    for panel in (
        graph(
            "Messages in",
            "ops",
            (
                f'sum by (instance) (rate(kafka_server_brokertopicmetrics_messagesin_total{{topic=""}}[{RATE}]))',
                "{{instance}}",
            ),
        ),
        graph(
            "Bytes in / out",
            "Bps",
            (
                f'sum by (instance) (rate(kafka_server_brokertopicmetrics_bytesin_total{{topic=""}}[{RATE}]))',
                "in {{instance}}",
            ),
            (
                f'sum by (instance) (rate(kafka_server_brokertopicmetrics_bytesout_total{{topic=""}}[{RATE}]))',
                "out {{instance}}",
            ),
        ),
        graph(
            "Bytes in / out per topic",
            "Bps",
            (
                f'sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesin_total{{topic!=""}}[{RATE}]))',
                "in {{topic}}",
            ),
            (
                f'sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesout_total{{topic!=""}}[{RATE}]))',
                "out {{topic}}",
            ),
        ),
        graph(
            "Produce / fetch requests",
            "reqps",
            (f'sum(rate(kafka_server_brokertopicmetrics_totalproducerequests_total{{topic=""}}[{RATE}]))', "produce"),
            (f'sum(rate(kafka_server_brokertopicmetrics_totalfetchrequests_total{{topic=""}}[{RATE}]))', "fetch"),
            (
                f'sum(rate(kafka_server_brokertopicmetrics_failedproducerequests_total{{topic=""}}[{RATE}]))',
                "failed produce",
            ),
            (
                f'sum(rate(kafka_server_brokertopicmetrics_failedfetchrequests_total{{topic=""}}[{RATE}]))',
                "failed fetch",
            ),
        ),
        graph(
            "Bytes rejected",
            "Bps",
            (
                f'sum by (instance) (rate(kafka_server_brokertopicmetrics_bytesrejected_total{{topic=""}}[{RATE}]))',
                "{{instance}}",
            ),
            description="BytesRejectedPerSec: batches refused (too large, corrupt)",
        ),
    ):
        board = board.with_panel(panel.id(next(ids)))

    board = board.with_row(dashboard.Row("Requests").id(next(ids)))
    for panel in (
        graph(
            "Request rate by API",
            "reqps",
            (f"sum by (request) (rate(kafka_network_requestmetrics_requests_total[{RATE}]))", "{{request}}"),
        ),
        graph(
            "Errors by API and code",
            "reqps",
            (
                f"sum by (request, error) (rate(kafka_network_requestmetrics_errors_total[{RATE}]))",
                "{{request}} {{error}}",
            ),
            description="ErrorsPerSec: responses carrying an error code other than NONE",
        ),
        graph(
            "Total time by API",
            "ms",
            *quantiles("kafka_network_requestmetrics_totaltimems", "request"),
            description="RequestMetrics TotalTimeMs percentiles",
        ),
        graph(
            "Produce time split (p99)",
            "ms",
            *(
                (
                    f"histogram_quantile(0.99, sum by (le) "
                    f'(rate(kafka_network_requestmetrics_{name}_bucket{{request="Produce"}}[{RATE}])))',
                    name,
                )
                for name in (
                    "requestqueuetimems",
                    "localtimems",
                    "remotetimems",
                    "throttletimems",
                    "responsesendtimems",
                )
            ),
            description="Where a Produce request's time goes: queue, local append, waiting for the ISR, throttle, send",
        ),
        graph(
            "Fetch time split (p99)",
            "ms",
            *(
                (
                    f"histogram_quantile(0.99, sum by (le) "
                    f'(rate(kafka_network_requestmetrics_{name}_bucket{{request="Fetch"}}[{RATE}])))',
                    name,
                )
                for name in (
                    "requestqueuetimems",
                    "localtimems",
                    "remotetimems",
                    "throttletimems",
                    "responsesendtimems",
                )
            ),
        ),
    ):
        board = board.with_panel(panel.id(next(ids)))

    board = board.with_row(dashboard.Row("Controller and Raft").id(next(ids)))
    for panel in (
        graph(
            "Raft leader",
            "short",
            ("max by (instance) (kafka_raft_current_leader)", "{{instance}}"),
            description="The metadata quorum leader each node sees (-1: unknown)",
        ),
        graph("Raft epoch", "short", ("max by (instance) (kafka_raft_current_epoch)", "{{instance}}")),
        graph(
            "Raft commit latency",
            "ms",
            ("max by (instance) (kafka_raft_commit_latency_avg)", "avg {{instance}}"),
            ("max by (instance) (kafka_raft_commit_latency_max)", "max {{instance}}"),
        ),
        graph(
            "Active controller",
            "short",
            ("max by (instance) (kafka_controller_kafkacontroller_activecontrollercount)", "{{instance}}"),
        ),
        graph(
            "Metadata log",
            "short",
            ("max by (instance) (kafka_raft_log_end_offset)", "end offset {{instance}}"),
            ("max by (instance) (kafka_raft_high_watermark)", "high watermark {{instance}}"),
        ),
    ):
        board = board.with_panel(panel.id(next(ids)))

    board = board.with_row(dashboard.Row("Logs").id(next(ids)))
    for panel in (
        graph(
            "Log size per topic",
            "bytes",
            ("sum by (topic) (kafka_log_log_size)", "{{topic}}"),
            description="Log Size of every replica, summed per topic (all replicas)",
        ),
        graph("Log segments per topic", "short", ("sum by (topic) (kafka_log_log_numlogsegments)", "{{topic}}")),
        graph(
            "Log flush time",
            "ms",
            *quantiles("kafka_log_logflushstats_logflushrateandtimems", "instance"),
            description="LogFlushStats LogFlushRateAndTimeMs percentiles",
        ),
    ):
        board = board.with_panel(panel.id(next(ids)))

    board = board.with_row(dashboard.Row("Consumers").id(next(ids)))
    for panel in (
        graph(
            "Consumer group lag",
            "short",
            ("max by (consumergroup) (kafka_consumergroup_lag_sum)", "{{consumergroup}}"),
            description="Committed offsets behind the high watermarks (records), per group",
            span=12,
        ),
        graph(
            "Consumer lag per partition",
            "short",
            (
                "max by (consumergroup, topic, partition) (kafka_consumergroup_lag)",
                "{{consumergroup}} {{topic}}-{{partition}}",
            ),
            span=12,
        ),
    ):
        board = board.with_panel(panel.id(next(ids)))

    board = board.with_row(dashboard.Row("Runtime").id(next(ids)))
    for panel in (
        graph(
            "Event-loop lag",
            "s",
            *quantiles("pylog_event_loop_lag_seconds", "instance"),
            description="How late the broker's asyncio event loop runs: every request waits as long",
        ),
        graph(
            "Event-loop busy ratio",
            "percentunit",
            ("max by (instance) (pylog_event_loop_busy_ratio)", "busy {{instance}}"),
            (
                "max by (instance) (kafka_network_socketserver_networkprocessoravgidlepercent)",
                "network idle {{instance}}",
            ),
            (
                "max by (instance) (kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent)",
                "handler idle {{instance}}",
            ),
        ),
        graph(
            "Connections",
            "short",
            (
                "sum by (instance, listener) (kafka_server_socket_server_metrics_connection_count)",
                "{{instance}} {{listener}}",
            ),
            (
                f"sum by (instance) (rate(kafka_server_socket_server_metrics_connection_creation_total[{RATE}]))",
                "created/s {{instance}}",
            ),
            (
                f"sum by (instance) (rate(kafka_server_socket_server_metrics_connection_close_total[{RATE}]))",
                "closed/s {{instance}}",
            ),
        ),
        graph(
            "Network bytes",
            "Bps",
            (
                f"sum by (instance) (rate(kafka_server_socket_server_metrics_incoming_byte_total[{RATE}]))",
                "in {{instance}}",
            ),
            (
                f"sum by (instance) (rate(kafka_server_socket_server_metrics_outgoing_byte_total[{RATE}]))",
                "out {{instance}}",
            ),
        ),
        graph("Process CPU", "percentunit", (f"rate(process_cpu_seconds_total[{RATE}])", "{{instance}}")),
        graph(
            "Process memory",
            "bytes",
            ("process_resident_memory_bytes", "resident {{instance}}"),
            ("process_virtual_memory_bytes", "virtual {{instance}}"),
        ),
        graph(
            "Python GC",
            "ops",
            (
                f"sum by (instance, generation) (rate(python_gc_collections_total[{RATE}]))",
                "{{instance}} gen {{generation}}",
            ),
        ),
    ):
        board = board.with_panel(panel.id(next(ids)))

    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def render() -> str:
    """The checked-in file's text: ``build()`` as indented JSON."""
    return json.dumps(build(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the checked-in JSON differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT} is stale: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
