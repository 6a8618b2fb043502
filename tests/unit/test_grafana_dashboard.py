"""ops/grafana/pylog-dashboard.json: what its generator (ops/grafana/dashboard.py) writes, and a
dashboard grafana-foundation-sdk's model reads whole (every panel's options and every query decoded
to the typed models of their plugins, nothing dropped on the way back to JSON).

Its queries are evaluated by a real Prometheus in tests/integration/test_prometheus.py.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import dashboard, prometheus, stat, timeseries

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "ops" / "grafana" / "dashboard.py"
CHECKED_IN = ROOT / "ops" / "grafana" / "pylog-dashboard.json"
GRID_COLUMNS = 24


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pylog_grafana_dashboard", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checked_in_json_is_the_generators_output() -> None:
    assert CHECKED_IN.read_text() == generator().render(), "stale: run .venv/bin/python ops/grafana/dashboard.py"


def test_dashboard_reads_whole_into_the_librarys_model() -> None:
    register_default_plugins()
    data = json.loads(CHECKED_IN.read_text())
    model = dashboard.Dashboard.from_json(data)
    assert json.loads(json.dumps(model, cls=JSONEncoder)) == data  # no field unknown to the model
    assert model.uid == "pylog-overview"
    assert [v.type_val for v in model.templating.list_val or []] == [dashboard.VariableType.DATASOURCE]
    panels: list[dashboard.Panel] = []
    ids = []
    for panel in model.panels or []:
        ids.append(panel.id_val)
        assert panel.grid_pos is not None
        assert panel.grid_pos.x + panel.grid_pos.w <= GRID_COLUMNS
        if isinstance(panel, dashboard.RowPanel):
            assert panel.title
            continue
        panels.append(panel)
    assert len(ids) == len(set(ids)), "panel ids are unique"
    assert len(panels) >= 30
    options = {"timeseries": timeseries.Options, "stat": stat.Options}
    for panel in panels:
        assert isinstance(panel.options, options[panel.type_val]), panel.title
        assert panel.title
        assert panel.targets, panel.title
        assert panel.datasource is not None
        assert panel.datasource.type_val == "prometheus"
        for target in panel.targets:
            assert isinstance(target, prometheus.Dataquery), panel.title
            assert target.expr, panel.title
            assert target.ref_id, panel.title


def panel_queries(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of the dashboard."""
    return [
        (panel["title"], target["expr"])
        for panel in data["panels"]
        for target in panel.get("targets", [])
        if panel["type"] != "row"
    ]


def test_the_panels_issue_32_asks_for() -> None:
    exprs = " ".join(expr for _, expr in panel_queries(json.loads(CHECKED_IN.read_text())))
    for needed in (
        "kafka_server_brokertopicmetrics_bytesin_total",
        "kafka_server_brokertopicmetrics_bytesout_total",
        "kafka_network_requestmetrics_requests_total",
        "kafka_network_requestmetrics_errors_total",
        "histogram_quantile(0.99, sum by (request, le) (rate(kafka_network_requestmetrics_totaltimems_bucket",
        "kafka_server_replicamanager_underreplicatedpartitions",
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "kafka_server_replicamanager_underminisrpartitioncount",
        "kafka_server_replicamanager_isrshrinks_total",
        "kafka_server_replicamanager_isrexpands_total",
        "kafka_controller_kafkacontroller_activecontrollercount",
        "kafka_raft_current_leader",
        "kafka_raft_current_epoch",
        "kafka_raft_commit_latency_avg",
        "sum by (topic) (kafka_log_log_size)",
        "kafka_consumergroup_lag",
        "pylog_event_loop_lag_seconds_bucket",
        "pylog_event_loop_busy_ratio",
        "kafka_server_socket_server_metrics_connection_count",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ):
        assert needed in exprs, needed
