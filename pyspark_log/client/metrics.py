"""Client metrics under Kafka's names: ``Producer.metrics()`` / ``Consumer.metrics()``.

What the clients return is a mapping keyed by Kafka's metric group, then metric name (the shape
kafka-python's ``metrics()`` has; Java's ``KafkaProducer.metrics()`` keys the same values by a
``MetricName(name, group, tags)``)::

    {"producer-metrics": {"record-send-rate": 812.4, "record-send-total": 30000.0, ...},
     "producer-node-metrics": {...}}

The names and meanings are those of Kafka's documentation, section "Producer Sender Metrics",
"Common monitoring metrics for producer/consumer/connect/streams", "Consumer Fetch Metrics" and
"Consumer Group Metrics" (kafka.apache.org/documentation/#producer_monitoring). Values are
floats, as Java's ``Metric.metricValue()`` gives them; an average or maximum over a window
without samples is NaN, as Kafka's ``Avg``/``Max`` stats are.

Windows (Kafka's ``SampledStat``): each ``Sensor`` keeps ``metrics.num.samples`` samples of
``metrics.sample.window.ms`` each (defaults 2 and 30 s, the client config keys of the same
names). A record goes into the current sample; a sample older than the window is restarted; a
reading ignores samples older than ``num.samples * window``. A ``-rate`` is the sum (or count)
over the live samples divided by the time they span, where that span is at least
``(num.samples - 1)`` full windows — so a client that just started reports a rate below its true
one until the first windows have passed, exactly as Kafka's ``Rate.windowSize`` does.
``-avg``/``-max`` are over the live samples, ``-total`` is cumulative.

Cost: the clients record per request, per produced batch or per fetched partition, never per
record (the producer's per-record path is compiled: ``records/_speedups.c``); a record is a few
additions on the client's event loop. Reading (``metrics()``) runs on that loop too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pyspark_log.client.clock import SYSTEM_CLOCK, Clock

Metrics = dict[str, dict[str, float]]

DEFAULT_SAMPLE_WINDOW_MS = 30000
DEFAULT_NUM_SAMPLES = 2


class Sensor:
    """Windowed samples of recorded values (sum, count, max) plus cumulative totals.

    One sensor serves Kafka's ``-rate`` (sum per second), ``-total``, ``-avg`` and ``-max`` of one
    measurement; ``count_rate`` is the events per second (Kafka's ``Rate(WindowedCount)``)."""

    __slots__ = ("_clock", "_current", "_samples", "_window_ms", "count", "total")

    def __init__(self, window_ms: float, num_samples: int, clock: Clock) -> None:
        self._window_ms = float(window_ms)
        self._clock = clock
        # each sample: [start_ms, sum, count, max]
        self._samples: list[list[float]] = [[-math.inf, 0.0, 0.0, -math.inf] for _ in range(max(num_samples, 1))]
        self._current = 0
        self.total = 0.0  # cumulative sum of recorded values
        self.count = 0  # cumulative number of records

    def record(self, value: float = 1.0, now_ms: float | None = None) -> None:
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        sample = self._samples[self._current]
        if now - sample[0] >= self._window_ms:
            self._current = (self._current + 1) % len(self._samples)
            sample = self._samples[self._current]
            sample[0], sample[1], sample[2], sample[3] = now, 0.0, 0.0, -math.inf
        sample[1] += value
        sample[2] += 1
        sample[3] = max(sample[3], value)
        self.total += value
        self.count += 1

    def _live(self, now: float) -> list[list[float]]:
        horizon = now - self._window_ms * len(self._samples)
        return [s for s in self._samples if s[0] > horizon and s[2] > 0]

    def _span_s(self, now: float) -> float:
        """Kafka's ``Rate.windowSize``: from the oldest live sample's start to now, at least
        ``num.samples - 1`` full windows."""
        starts = [s[0] for s in self._samples if s[0] > now - self._window_ms * len(self._samples)]
        elapsed = now - min(starts) if starts else 0.0
        full = int(elapsed // self._window_ms)
        least = len(self._samples) - 1
        if full < least:
            elapsed += (least - full) * self._window_ms
        return max(elapsed, 1.0) / 1000.0

    def rate(self, now_ms: float | None = None) -> float:
        """Sum of the values recorded in the window, per second."""
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        return sum(s[1] for s in self._live(now)) / self._span_s(now)

    def count_rate(self, now_ms: float | None = None) -> float:
        """Records (events) in the window, per second."""
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        return sum(s[2] for s in self._live(now)) / self._span_s(now)

    def avg(self, now_ms: float | None = None) -> float:
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        live = self._live(now)
        n = sum(s[2] for s in live)
        return sum(s[1] for s in live) / n if n else math.nan

    def max(self, now_ms: float | None = None) -> float:
        now = self._clock.monotonic_ms() if now_ms is None else now_ms
        live = self._live(now)
        return float(max(s[3] for s in live)) if live else math.nan


class ClientMetrics:
    """The sensors of one client, shared by its parts (``Cluster.metrics``): the connections
    record requests and bytes, the producer's sender its batches, the consumer's fetcher its
    fetches, the group its commits and rebalances."""

    def __init__(self, config: dict[str, Any], clock: Clock = SYSTEM_CLOCK) -> None:
        self.window_ms = float(config.get("metrics.sample.window.ms", DEFAULT_SAMPLE_WINDOW_MS))
        self.num_samples = int(config.get("metrics.num.samples", DEFAULT_NUM_SAMPLES))
        self.clock = clock
        self._sensors: dict[str, Sensor] = {}
        # network (Kafka's Selector / NetworkClient metrics, common to every client)
        self.outgoing = self.sensor("request-size")  # bytes of each request sent
        self.incoming = self.sensor("response-size")  # bytes of each response read
        self.latency = self.sensor("request-latency")  # ms from write to response
        self.connection_creation = self.sensor("connection-creation")
        self.connection_close = self.sensor("connection-close")
        self.connection_count = 0

    def sensor(self, name: str) -> Sensor:
        """The sensor ``name`` (created on first use)."""
        s = self._sensors.get(name)
        if s is None:
            s = self._sensors[name] = Sensor(self.window_ms, self.num_samples, self.clock)
        return s

    # -- the network side (BrokerConnection) -------------------------------------------------

    def on_connect(self) -> None:
        self.connection_count += 1
        self.connection_creation.record()

    def on_close(self) -> None:
        self.connection_count = max(self.connection_count - 1, 0)
        self.connection_close.record()

    def on_request(self, nbytes: int) -> None:
        self.outgoing.record(nbytes)

    def on_response(self, nbytes: int) -> None:
        self.incoming.record(nbytes)

    def on_latency(self, latency_ms: float) -> None:
        self.latency.record(latency_ms)

    def common(self, now: float) -> dict[str, float]:
        """Kafka's "common monitoring metrics" of a client (its ``<type>-metrics`` group)."""
        out, inc, lat = self.outgoing, self.incoming, self.latency
        return {
            "connection-count": float(self.connection_count),
            "connection-creation-rate": self.connection_creation.count_rate(now),
            "connection-creation-total": float(self.connection_creation.count),
            "connection-close-rate": self.connection_close.count_rate(now),
            "connection-close-total": float(self.connection_close.count),
            "outgoing-byte-rate": out.rate(now),
            "outgoing-byte-total": out.total,
            "incoming-byte-rate": inc.rate(now),
            "incoming-byte-total": inc.total,
            "request-rate": out.count_rate(now),
            "request-total": float(out.count),
            "request-size-avg": out.avg(now),
            "request-size-max": out.max(now),
            "response-rate": inc.count_rate(now),
            "response-total": float(inc.count),
            "request-latency-avg": lat.avg(now),
            "request-latency-max": lat.max(now),
            "network-io-rate": out.count_rate(now) + inc.count_rate(now),
            "network-io-total": float(out.count + inc.count),
        }

    def meter(self, out: dict[str, float], name: str, now: float, *, sensor: str | None = None) -> None:
        """``name-rate`` and ``name-total`` of the sensor ``sensor`` (default ``name``): Kafka's Meter."""
        s = self.sensor(sensor or name)
        out[f"{name}-rate"] = s.rate(now)
        out[f"{name}-total"] = s.total

    def avg_max(self, out: dict[str, float], name: str, now: float) -> None:
        s = self.sensor(name)
        out[f"{name}-avg"] = s.avg(now)
        out[f"{name}-max"] = s.max(now)


def metrics_of(cluster: Any) -> ClientMetrics:
    """The ``ClientMetrics`` of a client's cluster (``Cluster.metrics``); a detached one for a
    stand-in cluster without it (the unit tests' fakes)."""
    found = getattr(cluster, "metrics", None)
    return found if isinstance(found, ClientMetrics) else ClientMetrics({})


# -- the producer ----------------------------------------------------------------------------


def producer_metrics(
    m: ClientMetrics, *, buffer_available: int, buffer_total: int, in_flight: int, waiting_threads: int = 0
) -> Metrics:
    """The producer's ``producer-metrics`` group (Kafka documentation, "Producer Sender
    Metrics" and the common client metrics). ``byte-rate``/``byte-total`` (per topic in Kafka's
    ``producer-topic-metrics``) are given for all topics here."""
    now = m.clock.monotonic_ms()
    g = m.common(now)
    m.meter(g, "record-send", now)
    m.meter(g, "record-error", now)
    m.meter(g, "record-retry", now)
    m.meter(g, "byte", now)
    m.meter(g, "batch-split", now)
    m.avg_max(g, "batch-size", now)
    m.avg_max(g, "record-queue-time", now)
    m.avg_max(g, "produce-throttle-time", now)
    g["records-per-request-avg"] = m.sensor("records-per-request").avg(now)
    g["compression-rate-avg"] = m.sensor("compression-rate").avg(now)
    g["buffer-available-bytes"] = float(buffer_available)
    g["buffer-total-bytes"] = float(buffer_total)
    g["requests-in-flight"] = float(in_flight)
    g["waiting-threads"] = float(waiting_threads)
    m.meter(g, "buffer-exhausted", now)
    return {"producer-metrics": dict(sorted(g.items()))}


def record_produce_request(m: ClientMetrics, batches: list[Any], encoded_sizes: list[int], compressed: bool) -> None:
    """One Produce request about to be sent: its batches (``ProducerBatch``) and their encoded
    sizes. Per batch: record-send, byte, batch-size, compression-rate, record-queue-time."""
    now = m.clock.monotonic_ms()
    send, byte, size, queue, comp = (
        m.sensor("record-send"),
        m.sensor("byte"),
        m.sensor("batch-size"),
        m.sensor("record-queue-time"),
        m.sensor("compression-rate"),
    )
    records = 0
    for batch, nbytes in zip(batches, encoded_sizes, strict=True):
        n = batch.record_count
        records += n
        send.record(n, now)
        byte.record(nbytes, now)
        size.record(nbytes, now)
        if batch.attempts == 0:
            queue.record(now - batch.created_ms, now)
        # Kafka: the ratio of the compressed batch size to its uncompressed size (1 without a codec)
        comp.record(nbytes / max(batch.size_bytes, 1) if compressed else 1.0, now)
    m.sensor("records-per-request").record(records, now)


# -- the consumer ----------------------------------------------------------------------------


def record_fetch(m: ClientMetrics, latency_ms: float, records: int, nbytes: int, throttle_ms: float) -> None:
    """One Fetch response (all its partitions): fetch-latency, fetch-rate, fetch-size,
    records-per-request, fetch-throttle-time; the records and bytes it brought."""
    now = m.clock.monotonic_ms()
    m.sensor("fetch-latency").record(latency_ms, now)
    m.sensor("fetch-size").record(nbytes, now)
    m.sensor("records-per-request").record(records, now)
    m.sensor("fetch-throttle-time").record(throttle_ms, now)
    m.sensor("records-consumed").record(records, now)
    m.sensor("bytes-consumed").record(nbytes, now)


def record_lag(m: ClientMetrics, lag: int) -> None:
    """A partition's lag (high watermark minus the next fetch offset) seen in a response."""
    m.sensor("records-lag").record(lag)


def consumer_metrics(
    m: ClientMetrics, *, assigned_partitions: int, extra: Callable[[], dict[str, float]] | None = None
) -> Metrics:
    """The consumer's ``consumer-metrics``, ``consumer-fetch-manager-metrics`` and
    ``consumer-coordinator-metrics`` groups (Kafka documentation, "Consumer Fetch Metrics",
    "Consumer Group Metrics", common client metrics)."""
    now = m.clock.monotonic_ms()
    common = m.common(now)
    fetch: dict[str, float] = {}
    m.meter(fetch, "records-consumed", now)
    m.meter(fetch, "bytes-consumed", now)
    m.avg_max(fetch, "fetch-latency", now)
    m.avg_max(fetch, "fetch-size", now)
    m.avg_max(fetch, "fetch-throttle-time", now)
    latency = m.sensor("fetch-latency")
    fetch["fetch-rate"] = latency.count_rate(now)
    fetch["fetch-total"] = float(latency.count)
    fetch["records-per-request-avg"] = m.sensor("records-per-request").avg(now)
    fetch["records-lag-max"] = m.sensor("records-lag").max(now)
    coord: dict[str, float] = {}
    m.avg_max(coord, "commit-latency", now)
    commits = m.sensor("commit-latency")
    coord["commit-rate"] = commits.count_rate(now)
    coord["commit-total"] = float(commits.count)
    rebalance = m.sensor("rebalance-latency")
    coord["rebalance-total"] = float(rebalance.count)
    coord["rebalance-latency-avg"] = rebalance.avg(now)
    coord["rebalance-latency-max"] = rebalance.max(now)
    coord["rebalance-latency-total"] = rebalance.total
    coord["assigned-partitions"] = float(assigned_partitions)
    if extra is not None:
        coord.update(extra())
    return {
        "consumer-metrics": dict(sorted(common.items())),
        "consumer-fetch-manager-metrics": dict(sorted(fetch.items())),
        "consumer-coordinator-metrics": dict(sorted(coord.items())),
    }


def flatten(metrics: Metrics, client_id: str) -> list[tuple[str, float]]:
    """``(group:name:{client-id=…}, value)`` sorted, the names Kafka's perf tools print."""
    rows = [
        (f"{group}:{name}:{{client-id={client_id}}}", value)
        for group, values in metrics.items()
        for name, value in values.items()
    ]
    return sorted(rows)
