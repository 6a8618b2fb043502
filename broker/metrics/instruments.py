"""The broker's hot-path instruments: plain counters and bucket arrays owned by the event loop.

Contract: every method here is called on the broker's event loop (or, for a broker run inside a
test, on one thread), costs a few dictionary and list operations, and is called per request,
per connection, per partition of a request or per record batch — never per record. Nothing here
takes a lock or formats text; the collectors (``broker.metrics.collectors``) read these values
when a scrape asks, in bounded steps on the same loop (``broker.metrics.exposition``).

The names these become on ``/metrics`` and their Kafka MBeans: docs/operations.md, "Metrics".
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

# Kafka's request timers are in milliseconds; these bounds (ms) cover a loopback round trip
# (0.05 ms) to a long-poll fetch (max.wait.ms up to 30 s and more).
REQUEST_MS_BUCKETS: tuple[float, ...] = (
    0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
)  # fmt: skip
# fsync times (ms): from a page-cache-only filesystem to a slow network disk
FLUSH_MS_BUCKETS: tuple[float, ...] = (0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000)
# event-loop lag (seconds, Prometheus' base unit for pylog's own histogram)
LAG_S_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Histogram:
    """Bucket counts, sum and count of observations; ``bounds`` are the upper bounds (``le``),
    +Inf implied. ``observe`` is one bisect and two additions."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, cumulative count)`` pairs as Prometheus wants them, ``+Inf`` last."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*map(_le, self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


def _le(bound: float) -> str:
    return repr(float(bound))


class TimerSet:
    """The six RequestMetrics timers of one request type (``TIMERS`` order), in ms, over
    ``REQUEST_MS_BUCKETS``: one object, so a request costs one call, not six."""

    __slots__ = ("count", "counts", "sums")

    def __init__(self) -> None:
        self.counts = [[0] * (len(REQUEST_MS_BUCKETS) + 1) for _ in TIMERS]
        self.sums = [0.0] * len(TIMERS)
        self.count = 0

    def add(self, indices: list[int], values: tuple[float, ...]) -> None:
        """One request: ``indices[i]`` is the bucket of ``values[i]`` (``bisect_left``)."""
        counts, sums = self.counts, self.sums
        for i in range(len(TIMERS)):
            counts[i][indices[i]] += 1
            sums[i] += values[i]
        self.count += 1

    def histogram(self, i: int) -> Histogram:
        """Timer ``i`` as a ``Histogram`` (a copy, for the collector)."""
        h = Histogram(REQUEST_MS_BUCKETS)
        h.counts = list(self.counts[i])
        h.sum = self.sums[i]
        h.count = self.count
        return h


# BrokerTopicMetrics meters, in this order in TopicCounters.values
MESSAGES_IN, BYTES_IN, BYTES_OUT, BYTES_REJECTED, FAILED_PRODUCE, FAILED_FETCH, TOTAL_PRODUCE, TOTAL_FETCH = range(8)
TOPIC_METERS: tuple[tuple[str, str, str], ...] = (
    ("messagesin", "MessagesInPerSec", "records appended by produce requests (leader appends)"),
    ("bytesin", "BytesInPerSec", "record bytes of produce requests appended"),
    ("bytesout", "BytesOutPerSec", "record bytes sent to consumers (follower fetches excluded)"),
    ("bytesrejected", "BytesRejectedPerSec", "record bytes of produce requests refused as invalid or too large"),
    ("failedproducerequests", "FailedProduceRequestsPerSec", "partitions of produce requests answered an error"),
    ("failedfetchrequests", "FailedFetchRequestsPerSec", "partitions of fetch requests answered an error"),
    ("totalproducerequests", "TotalProduceRequestsPerSec", "partitions of produce requests"),
    ("totalfetchrequests", "TotalFetchRequestsPerSec", "partitions of consumer fetch requests"),
)

TIMERS: tuple[tuple[str, str, str], ...] = (
    ("totaltimems", "TotalTimeMs", "from the request's bytes received to its response written"),
    ("requestqueuetimems", "RequestQueueTimeMs", "from the request's bytes received to its handler called"),
    ("localtimems", "LocalTimeMs", "the handler's work on the event loop, encoding included"),
    ("remotetimems", "RemoteTimeMs", "waiting for others: long-poll fetch, acks=all replication, a rebalance"),
    ("throttletimems", "ThrottleTimeMs", "the quota throttle the response carries (the channel is muted that long)"),
    ("responsesendtimems", "ResponseSendTimeMs", "from the response ready to its last byte handed to the socket"),
)


@dataclass(slots=True)
class RequestTiming:
    """One request's timeline (``time.perf_counter`` seconds), from the transport to the writer."""

    api: str
    version: int
    correlation_id: int
    client_id: str
    listener: str
    principal: str
    received: float
    started: float
    local_s: float = 0.0  # handler time on the loop (synchronous part + encode)
    remote_s: float = 0.0  # time spent awaiting (others' work)
    throttle_ms: float = 0.0
    ready: float = 0.0  # the response is encoded and handed to the connection
    alias: str | None = None  # Fetch is timed as FetchConsumer or FetchFollower too (Kafka's)


@dataclass(slots=True)
class ListenerCounters:
    connections_created: int = 0
    connections_closed: int = 0
    incoming_bytes: int = 0
    outgoing_bytes: int = 0


@dataclass
class BrokerStats:
    """Every hot-path counter of one broker. One instance per ``BrokerServer``."""

    topics: dict[str, list[int]] = field(default_factory=dict)  # topic -> the 8 TOPIC_METERS counts
    all_topics: list[int] = field(default_factory=lambda: [0] * len(TOPIC_METERS))
    requests: dict[tuple[str, int], int] = field(default_factory=dict)  # (api, version) -> count
    errors: dict[tuple[str, str], int] = field(default_factory=dict)  # (api, error name) -> count
    timers: dict[str, TimerSet] = field(default_factory=dict)  # request type -> its TIMERS
    listeners: dict[str, ListenerCounters] = field(default_factory=dict)
    replica_fetch_bytes: int = 0  # record bytes this broker's followers fetched (FetcherStats BytesPerSec)
    offset_commits: int = 0  # partitions committed (OffsetCommit and TxnOffsetCommit, error NONE)
    rebalances: int = 0  # completed classic rebalances (JoinGroup answered to the new leader)
    txn_aborts_requested: int = 0  # EndTxn(abort) answered NONE
    txn_commits_requested: int = 0  # EndTxn(commit) answered NONE
    flush_ms: Histogram = field(default_factory=lambda: Histogram(FLUSH_MS_BUCKETS))

    def topic(self, name: str) -> list[int]:
        counts = self.topics.get(name)
        if counts is None:
            counts = self.topics[name] = [0] * len(TOPIC_METERS)
        return counts

    def mark(self, topic: str, meter: int, amount: int = 1) -> None:
        """Add ``amount`` to a BrokerTopicMetrics meter of ``topic`` and of all topics."""
        self.topic(topic)[meter] += amount
        self.all_topics[meter] += amount

    def listener(self, name: str) -> ListenerCounters:
        counters = self.listeners.get(name)
        if counters is None:
            counters = self.listeners[name] = ListenerCounters()
        return counters

    def error(self, api: str, name: str) -> None:
        key = (api, name)
        self.errors[key] = self.errors.get(key, 0) + 1

    def request_done(self, timing: RequestTiming, sent: float | None = None) -> None:
        """Record a request whose response was written at ``sent`` (None: no response, acks=0)."""
        key = (timing.api, timing.version)
        self.requests[key] = self.requests.get(key, 0) + 1
        end = sent if sent is not None else (timing.ready or time.perf_counter())
        ready = timing.ready or end
        values = (
            (end - timing.received) * 1000,
            max(0.0, timing.started - timing.received) * 1000,
            timing.local_s * 1000,
            timing.remote_s * 1000,
            timing.throttle_ms,
            max(0.0, end - ready) * 1000,
        )
        bounds = REQUEST_MS_BUCKETS
        indices = [bisect_left(bounds, v) for v in values]
        timers = self.timers.get(timing.api)
        if timers is None:
            timers = self.timers[timing.api] = TimerSet()
        timers.add(indices, values)
        if timing.alias:
            timers = self.timers.get(timing.alias)
            if timers is None:
                timers = self.timers[timing.alias] = TimerSet()
            timers.add(indices, values)
