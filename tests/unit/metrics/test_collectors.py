"""The broker's metrics pieces (issue #32), each on real inputs: record batches encoded by
``pyspark_log.records``, response bodies as the handlers build them, prometheus-client's own text
format and parser. The names are the contract of docs/operations.md, "Metrics"."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from broker.metrics.collectors import LoopCollector, RequestCollector
from broker.metrics.exposition import RenderStats, render, render_async
from broker.metrics.instruments import BrokerStats, Histogram, RequestTiming
from broker.metrics.loop import LoopMonitor
from broker.metrics.requests import api_name, finish, observe_response, record_count
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode


def samples(text: bytes) -> dict[str, float]:
    """``name{k="v",…}`` (labels sorted) -> value, through prometheus-client's own parser."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
    return out


def timing(api: str = "Produce", version: int = 9) -> RequestTiming:
    now = time.perf_counter()
    return RequestTiming(api, version, 7, "client-1", "PLAINTEXT", "User:ANONYMOUS", now - 0.002, now - 0.001)


def test_api_names_are_kafkas() -> None:
    assert api_name(ApiKey.PRODUCE) == "Produce"
    assert api_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert api_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert api_name(ApiKey.INIT_PRODUCER_ID) == "InitProducerId"


def test_histogram_buckets_are_cumulative() -> None:
    h = Histogram((1, 10))
    for value in (0.5, 1, 5, 50):
        h.observe(value)
    assert h.cumulative() == [("1.0", 2), ("10.0", 3), ("+Inf", 4)]
    assert (h.count, h.sum) == (4, 56.5)


def test_record_count_reads_one_header_per_batch() -> None:
    records = [ProducerRecord(key=None, value=b"v" * 10, timestamp=0)] * 3
    data = encode_batch(records) + encode_batch(records[:2]) + encode_batch(records[:1])
    assert record_count(data) == 6
    assert record_count(memoryview(data)) == 6
    assert record_count(b"") == 0


def test_produce_counts_topics_errors_and_rejected_bytes() -> None:
    stats = BrokerStats()
    good = encode_batch([ProducerRecord(key=None, value=b"x", timestamp=0)] * 4)
    request = {
        "topic_data": [
            {"name": "a", "partition_data": [{"index": 0, "records": good}, {"index": 1, "records": good}]},
            {"name": "b", "partition_data": [{"index": 0, "records": good}]},
        ]
    }
    response = {
        "responses": [
            {"name": "a", "partition_responses": [{"index": 0, "error_code": 0}, {"index": 1, "error_code": 0}]},
            {"name": "b", "partition_responses": [{"index": 0, "error_code": ErrorCode.RECORD_LIST_TOO_LARGE}]},
        ],
        "throttle_time_ms": 0,
    }
    t = timing()
    observe_response(stats, t, ApiKey.PRODUCE, request, response)
    finish(stats, t, time.perf_counter(), 100)
    page = samples(render([RequestCollector(stats)]))
    assert page["kafka_server_brokertopicmetrics_messagesin_total"] == 8
    assert page['kafka_server_brokertopicmetrics_messagesin_total{topic="a"}'] == 8
    assert page['kafka_server_brokertopicmetrics_bytesin_total{topic="a"}'] == 2 * len(good)
    assert page['kafka_server_brokertopicmetrics_bytesrejected_total{topic="b"}'] == len(good)
    assert page['kafka_server_brokertopicmetrics_failedproducerequests_total{topic="b"}'] == 1
    assert page["kafka_server_brokertopicmetrics_totalproducerequests_total"] == 3
    assert page['kafka_network_requestmetrics_errors_total{error="RECORD_LIST_TOO_LARGE",request="Produce"}'] == 1
    assert not any('error="NONE"' in k for k in page)
    assert page['kafka_network_requestmetrics_requests_total{request="Produce",version="9"}'] == 1
    assert page['kafka_network_requestmetrics_totaltimems_count{request="Produce"}'] == 1
    assert page['kafka_network_requestmetrics_totaltimems_bucket{le="+Inf",request="Produce"}'] == 1
    assert 1 <= page['kafka_network_requestmetrics_totaltimems_sum{request="Produce"}'] < 10_000


def test_consumer_fetch_counts_bytes_out_and_failures() -> None:
    stats = BrokerStats()
    response = {
        "throttle_time_ms": 5,
        "error_code": 0,
        "responses": [
            {
                "topic": "a",
                "partitions": [
                    {"partition_index": 0, "error_code": 0, "records": b"z" * 300},
                    {"partition_index": 1, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "records": None},
                ],
            }
        ],
    }
    t = timing("Fetch", 12)
    observe_response(stats, t, ApiKey.FETCH, {"replica_id": -1}, response)
    assert t.throttle_ms == 5
    follower = timing("Fetch", 12)
    observe_response(stats, follower, ApiKey.FETCH, {"replica_id": 2}, response)  # replication: not BytesOut
    page = samples(render([RequestCollector(stats)]))
    assert page['kafka_server_brokertopicmetrics_bytesout_total{topic="a"}'] == 300
    assert page["kafka_server_brokertopicmetrics_failedfetchrequests_total"] == 1
    assert page["kafka_server_brokertopicmetrics_totalfetchrequests_total"] == 2
    assert page['kafka_network_requestmetrics_errors_total{error="NOT_LEADER_OR_FOLLOWER",request="Fetch"}'] == 2


def test_the_request_log_line_carries_structured_fields(caplog: pytest.LogCaptureFixture) -> None:
    stats = BrokerStats()
    with caplog.at_level(logging.DEBUG, logger="kafka.request.logger"):
        finish(stats, timing("Metadata", 12), time.perf_counter(), 321)
    (record,) = [r for r in caplog.records if r.name == "kafka.request.logger"]
    fields = record.fields  # type: ignore[attr-defined]
    assert fields["api"] == "Metadata"
    assert fields["version"] == 12
    assert fields["correlation_id"] == 7
    assert fields["client_id"] == "client-1"
    assert fields["principal"] == "User:ANONYMOUS"
    assert fields["response_bytes"] == 321
    assert fields["total_ms"] >= fields["local_ms"] >= 0
    for key in ("listener", "request_queue_ms", "remote_ms", "throttle_ms", "response_send_ms"):
        assert key in fields


class Many:
    """A collector with one large family in slices (as the per-partition ones)."""

    def collect(self) -> Iterator[Metric]:
        for start in range(0, 2000, 100):
            family = GaugeMetricFamily("kafka_log_log_size", "bytes", labels=["topic", "partition"])
            for p in range(start, start + 100):
                family.add_metric(["t", str(p)], p)
            yield family


def test_sliced_families_render_as_one_and_the_loop_runs_between_steps() -> None:
    page = render([Many()])
    assert page.count(b"# TYPE kafka_log_log_size gauge") == 1
    assert len(samples(page)) == 2000

    async def scenario() -> tuple[bytes, RenderStats, int]:
        ticks = 0

        async def other() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        stats = RenderStats()
        before = ticks
        text = await render_async([Many()], budget_s=0.0, stats=stats)
        task.cancel()
        return text, stats, ticks - before

    text, stats, ticks = asyncio.run(scenario())
    assert text == page
    assert stats.steps >= 10
    assert ticks >= 4


def test_loop_monitor_sees_a_stall() -> None:
    async def scenario() -> LoopMonitor:
        monitor = LoopMonitor(interval_s=0.01)
        monitor.start()
        asyncio.get_running_loop().call_soon(time.sleep, 0.06)  # a callback that holds the loop
        for _ in range(6000):  # up to 60 s on a busy machine; normally 0.2 s
            if monitor.lag.count >= 10:
                break
            await asyncio.sleep(0.01)
        await monitor.stop()
        return monitor

    monitor = asyncio.run(scenario())
    assert monitor.lag.count >= 10
    assert monitor.lag.sum >= 0.04
    page = samples(render([LoopCollector(monitor)]))
    assert page['pylog_event_loop_lag_seconds_bucket{le="+Inf"}'] == monitor.lag.count
    assert 0 <= page["pylog_event_loop_busy_ratio"] <= 1
    assert page["kafka_network_socketserver_networkprocessoravgidlepercent"] == 1 - page["pylog_event_loop_busy_ratio"]
