"""The client metrics' windows (``pyspark_log.client.metrics``) behave as Kafka's ``SampledStat``
(``Rate``, ``Avg``, ``Max`` over ``metrics.num.samples`` windows of ``metrics.sample.window.ms``),
driven by a manual clock; the perf tool's pacing and metric layout; the Spark progress helper."""

from __future__ import annotations

import io
import math

from pyspark_log.cli.perf import Throttler, print_metrics, sample_every
from pyspark_log.client import config as cfg
from pyspark_log.client.clock import ManualClock
from pyspark_log.client.metrics import ClientMetrics, Sensor, producer_metrics


def test_rate_spans_at_least_num_samples_minus_one_windows() -> None:
    """Kafka's Rate.windowSize: 6 s into a run with 2 windows of 30 s, the rate divides by 36 s."""
    clock = ManualClock(1000.0)
    s = Sensor(30000, 2, clock)
    for _ in range(6):
        s.record(500)
        clock.advance(1000)
    assert s.total == 3000
    assert s.count == 6
    assert math.isclose(s.rate(), 3000 / 36.0)
    assert math.isclose(s.count_rate(), 6 / 36.0)
    assert s.avg() == 500
    assert s.max() == 500.0


def test_old_samples_expire_and_empty_windows_are_nan() -> None:
    clock = ManualClock(0.0)
    s = Sensor(1000, 2, clock)
    assert math.isnan(s.avg())
    assert math.isnan(s.max())
    s.record(10)
    clock.advance(1500)
    s.record(2)  # a new sample; the first one is still within 2 windows
    assert s.max() == 10.0
    assert s.avg() == 6
    clock.advance(1600)  # the first sample is now older than 2 windows
    assert s.max() == 2.0
    clock.advance(5000)
    assert math.isnan(s.max())
    assert s.rate() == 0.0
    assert s.total == 12  # totals are cumulative


def test_config_keys_and_producer_group() -> None:
    parsed = cfg.parse(cfg.PRODUCER, {"bootstrap.servers": "x:1", "metrics.sample.window.ms": "1000",
                                      "metrics.num.samples": "3"}, "producer")  # fmt: skip
    m = ClientMetrics(parsed, ManualClock())
    assert (m.window_ms, m.num_samples) == (1000.0, 3)
    m.on_connect()
    m.on_request(100)
    m.on_response(40)
    m.on_latency(5.0)
    groups = producer_metrics(m, buffer_available=10, buffer_total=20, in_flight=1)
    g = groups["producer-metrics"]
    assert g["outgoing-byte-total"] == 100
    assert g["incoming-byte-total"] == 40
    assert g["request-total"] == 1
    assert g["request-latency-max"] == 5.0
    assert g["connection-count"] == 1
    assert (g["buffer-available-bytes"], g["buffer-total-bytes"], g["requests-in-flight"]) == (10, 20, 1)
    assert math.isnan(g["batch-size-avg"])


def test_print_metrics_layout_is_kafkas() -> None:
    out = io.StringIO()
    print_metrics({"producer-metrics": {"record-send-total": 3.0, "batch-size-avg": math.nan}}, "c", out)
    assert out.getvalue().splitlines() == [
        "",
        "Metric Name                                        Value",
        "producer-metrics:batch-size-avg:{client-id=c}    : NaN",
        "producer-metrics:record-send-total:{client-id=c} : 3.000",
    ]


def test_throttler_sleeps_only_when_ahead() -> None:
    slept: list[float] = []
    t = Throttler(1000, start=0.0, sleep=slept.append)
    assert t.step == 10
    t.pace(500, now=1.0)  # behind the target: no sleep
    t.pace(1000, now=0.5)  # 0.5 s ahead
    assert slept == [0.5]
    assert Throttler(-1, start=0.0).step == 0
    assert sample_every(10) == 1
    assert sample_every(1_000_000) == 200


def test_offsets_behind_latest_from_a_progress() -> None:
    from pyspark_log.spark.progress import offsets_behind_latest

    source = {"endOffset": '{"t":{"0":4,"1":10}}', "latestOffset": {"t": {"0": 10, "1": 10}}}
    assert offsets_behind_latest(source) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "6",
        "avgOffsetsBehindLatest": "3.0",
    }
    assert offsets_behind_latest({"endOffset": "{}", "latestOffset": None}) == {}
