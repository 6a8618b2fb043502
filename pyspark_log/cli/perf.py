"""``pylog perf produce`` / ``pylog perf consume``: Kafka's ``kafka-producer-perf-test`` and
``kafka-consumer-perf-test`` on pylog's fast paths, with their flags and output lines.

``perf produce`` (Kafka's ``ProducerPerformance``) sends ``--num-records`` records of
``--record-size`` random upper-case bytes (or a random line of ``--payload-file``, split on
``--payload-delimiter``, or with ``--payload-monotonic`` the record's number), no key, through
``Producer.send`` (the compiled lane path), at most ``--throughput`` records/s (-1: unthrottled);
every 5 s it prints
``N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency.`` and at the end
``N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P50 ms 50th,
P95 ms 95th, P99 ms 99th, P999 ms 99.9th.`` Client configs: ``--producer.config FILE`` then
``--producer-props k=v ...`` (the latter win); ``--transactional-id`` / ``--transaction-duration-ms``
commit a transaction every that many ms (default 3000 once an id is given; an id
``performance-producer-<uuid>`` when only the duration is). Difference: Kafka times every record
from ``send`` to its callback; here one record in ``sample_every(num_records)`` is timed (a
callback per record would cost more than the send) and stands for the records sent since the
previous sample, so the latency figures are over samples.

``perf consume`` (Kafka's ``ConsumerPerformance``) reads ``--messages`` records of ``--topic`` and
prints ``start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec`` (or, with
``--show-detailed-stats``, one ``time, threadId, ...`` line per ``--reporting-interval`` instead).
It fetches each partition's raw batches (``AsyncConsumer.fetch_raw``, up to ``--fetch-size`` bytes
a request, all partitions concurrently) and decodes them into Arrow columns (the Spark source's
decoder): MB are key plus value bytes, as Kafka counts. Difference: Kafka's tool joins the group
``--group`` (a fresh ``perf-consumer-NNNNN`` by default) and reads what it is assigned; this one
assigns itself every partition, starts at the group's committed offsets where it has some (else
earliest, or latest with ``--from-latest``), and commits where it stopped at the end;
``rebalance.time.ms`` is the time to find those start offsets. It stops after exactly
``--messages`` records, or after ``--timeout`` ms without a record (Kafka's warning line).

``--print-metrics`` prints the client's metrics (``pyspark_log.client.metrics``) in Kafka's
``ToolsUtils.printMetrics`` layout: ``group:name:{client-id=...} : value``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import string
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import IO, Any

from pyspark_log.cli.context import Context, read_command_config
from pyspark_log.cli.errors import EXIT_ERROR, EXIT_OK, UsageError, kafka_error
from pyspark_log.client.errors import KafkaError, OffsetOutOfRangeError
from pyspark_log.client.metrics import Metrics, flatten
from pyspark_log.client.types import TopicPartition

MB = 1024 * 1024
WINDOW_MS = 5000  # Kafka's ProducerPerformance reporting interval
DEFAULT_TRANSACTION_DURATION_MS = 3000
PRODUCER_CLIENT_ID = "perf-producer-client"
CONSUMER_CLIENT_ID = "perf-consumer-client"
# about this many timed records per run (Kafka keeps up to 500,000 latency samples; a callback per
# record costs more than pylog's send, so fewer are taken)
MAX_TIMED_RECORDS = 5_000


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    perf = commands.add_parser("perf", help="producer and consumer performance tests (Kafka's perf-test tools)")
    tools = perf.add_subparsers(dest="perf_command", metavar="TOOL", required=True)

    p = tools.add_parser("produce", help="kafka-producer-perf-test", parents=[common])
    p.add_argument("--topic", required=True, help="produce messages to this topic")
    p.add_argument("--num-records", type=int, required=True, help="number of messages to produce")
    p.add_argument("--throughput", type=float, required=True, help="max messages/sec (-1: no limit)")
    payload = p.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, help="message size in bytes")
    payload.add_argument("--payload-file", help="file to read the message payloads from (UTF-8 text)")
    payload.add_argument("--payload-monotonic", action="store_true", help="payload is the record's number (0, 1, ...)")
    p.add_argument("--payload-delimiter", default="\\n", help="delimiter of --payload-file (default \\n)")
    p.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE", default=[], help="client configs")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE", help="a properties file")
    p.add_argument("--print-metrics", action="store_true", help="print the producer's metrics at the end")
    p.add_argument("--transactional-id", help="the transactional.id to use")
    p.add_argument("--transaction-duration-ms", type=int, help="commit a transaction every this many ms")
    p.set_defaults(handler=perf_produce)

    c = tools.add_parser("consume", help="kafka-consumer-perf-test", parents=[common])
    c.add_argument("--topic", required=True, help="the topic to consume from")
    c.add_argument("--messages", type=int, required=True, help="the number of messages to consume")
    c.add_argument("--group", help="the group id (default perf-consumer-NNNNN)")
    c.add_argument("--fetch-size", type=int, default=1048576, help="bytes per partition per fetch (default 1048576)")
    c.add_argument("--from-latest", action="store_true", help="start at the latest offsets when the group has none")
    c.add_argument("--show-detailed-stats", action="store_true", help="report every --reporting-interval")
    c.add_argument("--reporting-interval", type=int, default=5000, help="ms between detailed reports (default 5000)")
    c.add_argument("--print-metrics", action="store_true", help="print the consumer's metrics at the end")
    c.add_argument("--timeout", type=int, default=10000, help="max ms between returned records (default 10000)")
    c.add_argument("--consumer.config", dest="consumer_config", metavar="CONFIG-FILE", help="a properties file")
    c.add_argument("--hide-header", action="store_true", help="do not print the stats header")
    c.add_argument("--socket-buffer-size", type=int, help="accepted for Kafka's tool's sake (unused)")
    c.add_argument("--date-format", default="%Y-%m-%d %H:%M:%S:%f", help="strftime format of the time columns")
    c.set_defaults(handler=perf_consume)


# -- shared ------------------------------------------------------------------------------------


def _java_double(value: float) -> str:
    """``%.3f`` as Java prints it (NaN, Infinity)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.3f}"


def print_metrics(metrics: Metrics, client_id: str, out: IO[str]) -> None:
    """Kafka's ``ToolsUtils.printMetrics``: a blank line, a header, ``name : value`` rows."""
    rows = flatten(metrics, client_id)
    width = max((len(name) for name, _ in rows), default=len("Metric Name"))
    out.write(f"\n{'Metric Name':<{width}}   Value\n")
    for name, value in rows:
        out.write(f"{name:<{width}} : {_java_double(value)}\n")


def _props(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"invalid property {pair!r}: expected PROP-NAME=PROP-VALUE")
        out[key.strip()] = value.strip()
    return out


def _client_config(ctx: Context, file: str | None, props: dict[str, str], client_id: str) -> dict[str, str]:
    """``--command-config``/``--bootstrap-server`` (the context), then the tool's config file, then
    ``props``; ``client.id`` defaults to the name Kafka's tool uses."""
    config = {"client.id": client_id, **ctx.config()}
    if file is not None:
        config.update(read_command_config(file))
    config.update(props)
    return config


# -- perf produce ------------------------------------------------------------------------------


def sample_every(num_records: int) -> int:
    """One record in this many is timed (about ``MAX_TIMED_RECORDS`` per run)."""
    return max(1, -(-num_records // MAX_TIMED_RECORDS))


class ProduceStats:
    """Kafka's ``ProducerPerformance.Stats``: totals, 5 s windows and latency samples. ``complete``
    runs on the producer's I/O thread (delivery callbacks), the rest on the caller's."""

    def __init__(self, out: IO[str], clock: Callable[[], float] = time.monotonic) -> None:
        self._out = out
        self._clock = clock
        self._lock = threading.Lock()
        self.start = clock()
        self.count = 0
        self.bytes = 0
        self.max_latency = 0.0
        self.total_latency = 0.0
        self.latencies: list[float] = []
        self._window_start = self.start
        self._window_count = self._window_bytes = 0
        self._window_max = self._window_total = 0.0
        self.error: BaseException | None = None

    def complete(self, latency_ms: float, records: int, nbytes: int, exc: BaseException | None) -> None:
        with self._lock:
            if exc is not None:
                if self.error is None:
                    self.error = exc
                return
            self.count += records
            self.bytes += nbytes
            self.total_latency += latency_ms * records
            self.max_latency = max(self.max_latency, latency_ms)
            self.latencies.append(latency_ms)
            self._window_count += records
            self._window_bytes += nbytes
            self._window_total += latency_ms * records
            self._window_max = max(self._window_max, latency_ms)
            now = self._clock()
            if (now - self._window_start) * 1000 >= WINDOW_MS:
                self._print_window(now)

    def _print_window(self, now: float) -> None:
        elapsed = max(now - self._window_start, 1e-9)
        n = self._window_count
        self._out.write(
            f"{n} records sent, {n / elapsed:.1f} records/sec ({self._window_bytes / MB / elapsed:.2f} MB/sec), "
            f"{self._window_total / max(n, 1):.1f} ms avg latency, {self._window_max:.1f} ms max latency.\n"
        )
        self._out.flush()
        self._window_start = now
        self._window_count = self._window_bytes = 0
        self._window_max = self._window_total = 0.0

    def total_line(self) -> str:
        elapsed = max(self._clock() - self.start, 1e-9)
        ordered = sorted(self.latencies)

        def pct(q: float) -> int:
            return int(ordered[min(int(len(ordered) * q), len(ordered) - 1)]) if ordered else 0

        return (
            f"{self.count} records sent, {self.count / elapsed:.1f} records/sec "
            f"({self.bytes / MB / elapsed:.2f} MB/sec), {self.total_latency / max(self.count, 1):.2f} ms avg latency, "
            f"{self.max_latency:.2f} ms max latency, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
            f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th."
        )


class Throttler:
    """Kafka's ``ThroughputThrottler``: keeps the send rate at ``per_second`` (<= 0: no limit),
    sleeping when the records sent so far are ahead of the elapsed time."""

    def __init__(self, per_second: float, start: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.per_second = per_second
        self.start = start
        self._sleep = sleep
        # check every this many records: ~100 checks a second at the target rate
        self.step = max(1, min(1000, int(per_second // 100))) if per_second > 0 else 0

    def pace(self, sent: int, now: float) -> None:
        ahead_s = sent / self.per_second - (now - self.start)
        if ahead_s > 0:
            self._sleep(ahead_s)


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if args.payload_monotonic:
        return []  # made per record in _produce_loop
    if args.record_size is not None:
        if args.record_size <= 0:
            raise UsageError("--record-size must be positive")
        rng = random.Random()
        return [bytes(rng.choice(string.ascii_uppercase.encode()) for _ in range(args.record_size))]
    delimiter = args.payload_delimiter.encode().decode("unicode_escape")
    try:
        with open(args.payload_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UsageError(f"cannot read --payload-file {args.payload_file!r}: {exc.strerror or exc}") from None
    payloads = [p.encode() for p in text.split(delimiter) if p]
    if not payloads:
        raise UsageError(f"--payload-file {args.payload_file!r} holds no payload")
    return payloads


def perf_produce(args: argparse.Namespace, ctx: Context) -> int:
    from pyspark_log.client.sync import Producer

    if args.num_records < 0:
        raise UsageError("--num-records must not be negative")
    payloads = _payloads(args)
    config = _client_config(ctx, args.producer_config, _props(args.producer_props), PRODUCER_CLIENT_ID)
    txn_id = args.transactional_id or config.get("transactional.id")
    duration_ms = args.transaction_duration_ms
    if duration_ms is not None and duration_ms <= 0:
        raise UsageError("--transaction-duration-ms must be greater than 0")
    if txn_id is None and duration_ms is not None:
        txn_id = f"performance-producer-{uuid.uuid4()}"
    if txn_id is not None:
        config["transactional.id"] = txn_id
        duration_ms = duration_ms or DEFAULT_TRANSACTION_DURATION_MS
    out = sys.stdout
    producer = Producer(config)
    stats: ProduceStats | None = None
    try:
        if txn_id is not None:
            producer.init_transactions()
        stats = _produce_loop(producer, args, payloads, duration_ms if txn_id is not None else None, out)
        out.write(stats.total_line() + "\n")
        if args.print_metrics:
            print_metrics(producer.metrics(), config["client.id"], out)
    except KafkaError as exc:
        raise kafka_error(exc, args.topic) from None
    finally:
        producer.close()
    if stats.error is not None:
        print(f"pylog: delivery failed: {stats.error}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _produce_loop(
    producer: Any, args: argparse.Namespace, payloads: list[bytes], txn_ms: int | None, out: IO[str]
) -> ProduceStats:
    """Send the records (``Producer.send``'s lane path) in runs of ``sample_every`` whose last
    record is timed, pace them, commit a transaction every ``txn_ms``; returns the stats once
    every record completed. Per record only the ``send`` call runs in Python."""
    topic, n = args.topic, args.num_records
    stats = ProduceStats(out)
    throttler = Throttler(args.throughput, stats.start)
    run = sample_every(n)
    if throttler.step:
        run = min(run, throttler.step)
    send = producer.send
    clock = time.monotonic
    pick = random.Random().choice
    fixed = payloads[0] if len(payloads) == 1 else None
    txn_start = clock()
    if txn_ms is not None:
        producer.begin_transaction()
    i = 0
    while i < n:
        last = min(i + run, n) - 1  # records i..last; the last one is timed
        if fixed is not None:
            for _ in range(last - i):
                send(topic, fixed)
            payload = fixed
            nbytes = len(fixed) * (last - i + 1)
        else:
            if payloads:  # --payload-file: a random payload per record
                chosen = [pick(payloads) for _ in range(last - i + 1)]
            else:  # --payload-monotonic: the record's number
                chosen = [str(j).encode() for j in range(i, last + 1)]
            for value in chosen[:-1]:
                send(topic, value)
            payload = chosen[-1]
            nbytes = sum(map(len, chosen))
        sent_at = clock()
        send(topic, payload).add_done_callback(_timer(stats, sent_at, last - i + 1, nbytes))
        i = last + 1
        if throttler.step:
            throttler.pace(i, clock())
        if txn_ms is not None and (clock() - txn_start) * 1000 >= txn_ms:
            producer.commit_transaction()
            producer.begin_transaction()
            txn_start = clock()
    if txn_ms is not None:
        producer.commit_transaction()
    producer.flush()
    return stats


def _timer(stats: ProduceStats, sent_at: float, records: int, nbytes: int) -> Callable[[Any], None]:
    def done(future: Any) -> None:
        exc = future.exception()
        stats.complete((time.monotonic() - sent_at) * 1000, records, nbytes, exc)

    return done


# -- perf consume ------------------------------------------------------------------------------

HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DETAILED_HEADER = (
    "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


class ConsumeRun:
    """The counters of one ``perf consume`` and Kafka's ``ConsumerPerformance`` lines from them."""

    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.args = args
        self.out = out
        self.date_format = args.date_format
        self.messages = 0
        self.bytes = 0
        self.start_ms = time.time() * 1000
        self.join_ms = 0.0  # finding the start offsets (Kafka: the first rebalance)
        self.last_report_ms = self.start_ms
        self.last_messages = self.last_bytes = 0
        self.detailed_join_ms = 0.0

    def date(self, ms: float) -> str:
        text = datetime.fromtimestamp(ms / 1000).strftime(self.date_format)
        return text[:-3] if self.date_format.endswith("%f") else text  # Java's SSS: milliseconds

    def add(self, records: int, nbytes: int) -> None:
        self.messages += records
        self.bytes += nbytes
        if self.args.show_detailed_stats:
            now = time.time() * 1000
            if now - self.last_report_ms >= self.args.reporting_interval:
                self.detailed_line(now)

    def detailed_line(self, now: float) -> None:
        """Kafka's ``printConsumerProgress``: totals, the interval's rates, the join time."""
        elapsed = max(now - self.last_report_ms, 1e-9)
        interval_mb = (self.bytes - self.last_bytes) / MB
        interval_n = self.messages - self.last_messages
        fetch_ms = elapsed - self.detailed_join_ms
        self.out.write(
            f"{self.date(now)}, 0, {self.bytes / MB:.4f}, {1000 * interval_mb / elapsed:.4f}, {self.messages}, "
            f"{1000 * interval_n / elapsed:.4f}, {int(self.detailed_join_ms)}, {int(fetch_ms)}, "
            f"{1000 * interval_mb / fetch_ms if fetch_ms > 0 else 0.0:.4f}, "
            f"{1000 * interval_n / fetch_ms if fetch_ms > 0 else 0.0:.4f}\n"
        )
        self.out.flush()
        self.last_report_ms, self.last_bytes, self.last_messages = now, self.bytes, self.messages
        self.detailed_join_ms = 0.0

    def summary_line(self, end_ms: float) -> str:
        elapsed_s = max(end_ms - self.start_ms, 1e-9) / 1000
        mb = self.bytes / MB
        fetch_ms = end_ms - self.start_ms - self.join_ms
        fetch_s = fetch_ms / 1000
        return (
            f"{self.date(self.start_ms)}, {self.date(end_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, {self.messages}, "
            f"{self.messages / elapsed_s:.4f}, {int(self.join_ms)}, {int(fetch_ms)}, "
            f"{mb / fetch_s if fetch_s > 0 else 0.0:.4f}, {self.messages / fetch_s if fetch_s > 0 else 0.0:.4f}"
        )


def perf_consume(args: argparse.Namespace, ctx: Context) -> int:
    from pyspark_log.client.consumer import AsyncConsumer

    if args.messages < 0:
        raise UsageError("--messages must not be negative")
    group = args.group or f"perf-consumer-{random.randint(0, 99999)}"
    config = _client_config(ctx, args.consumer_config, {}, CONSUMER_CLIENT_ID)
    config["group.id"] = group
    out = sys.stdout
    run = ConsumeRun(args, out)
    if not args.hide_header:
        out.write((DETAILED_HEADER if args.show_detailed_stats else HEADER) + "\n")
        out.flush()
    consumer = AsyncConsumer(config)

    async def main() -> Metrics:
        await consumer.start()
        try:
            timed_out = await _consume(consumer, args, run)
            end_ms = time.time() * 1000
            if timed_out:
                out.write(
                    f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
                    "exceeded. You can use the --timeout option to increase the timeout.\n"
                )
            if not args.show_detailed_stats:
                out.write(run.summary_line(end_ms) + "\n")
            return consumer.metrics()
        finally:
            await consumer.close()

    try:
        metrics = asyncio.run(main())
    except KafkaError as exc:
        raise kafka_error(exc, args.topic) from None
    if args.print_metrics:
        print_metrics(metrics, config["client.id"], out)
    return EXIT_OK


async def _start_offsets(consumer: Any, topic: str, from_latest: bool) -> dict[TopicPartition, int]:
    """The group's committed offsets, else the earliest (latest with ``--from-latest``)."""
    partitions = await consumer.partitions_for(topic)
    tps = [TopicPartition(topic, p) for p in partitions]
    committed = await consumer.committed(tps)
    missing = [tp for tp in tps if committed.get(tp) is None]
    reset = await (consumer.end_offsets(missing) if from_latest else consumer.beginning_offsets(missing))
    return {tp: committed[tp].offset if committed.get(tp) is not None else reset[tp] for tp in tps}


async def _consume(consumer: Any, args: argparse.Namespace, run: ConsumeRun) -> bool:
    """Fetch every partition concurrently until ``--messages`` records or ``--timeout``; commit
    the positions reached to the group. Returns True when the timeout ended it."""
    from pyspark_log.records.columnar import decode_arrow

    positions = await _start_offsets(consumer, args.topic, args.from_latest)
    run.join_ms = run.detailed_join_ms = time.time() * 1000 - run.start_ms
    wanted = args.messages
    loop = asyncio.get_running_loop()
    last_record = loop.time()
    done = asyncio.Event()
    if wanted == 0:
        done.set()

    async def partition_loop(tp: TopicPartition) -> None:
        nonlocal last_record
        while not done.is_set():
            try:
                fetched = await consumer.fetch_raw(tp, positions[tp], args.fetch_size, max_wait_ms=500)
            except OffsetOutOfRangeError:  # a committed offset retention removed: reset, as auto.offset.reset
                reset = consumer.end_offsets if args.from_latest else consumer.beginning_offsets
                positions[tp] = (await reset([tp]))[tp]
                continue
            if not fetched.records:
                continue
            cols = decode_arrow(fetched.records, topic=tp.topic, partition=tp.partition, start_offset=positions[tp])
            batch = cols.batch
            positions[tp] = cols.next_offset if cols.next_offset is not None else positions[tp]
            count = batch.num_rows
            if count == 0:
                continue
            left = wanted - run.messages
            if count >= left:  # exactly --messages: the rest of this fetch is not consumed
                batch = batch.slice(0, left)
                count = left
                positions[tp] = batch.column("offset")[count - 1].as_py() + 1
            run.add(count, _key_value_bytes(batch))
            last_record = loop.time()
            if run.messages >= wanted:
                done.set()

    tasks = [loop.create_task(partition_loop(tp)) for tp in positions]
    timed_out = False
    try:
        while not done.is_set():
            failed = [t for t in tasks if t.done() and t.exception() is not None]
            if failed:
                raise failed[0].exception()  # type: ignore[misc]
            idle_ms = (loop.time() - last_record) * 1000
            if idle_ms > args.timeout:
                timed_out = True
                break
            try:
                await asyncio.wait_for(done.wait(), timeout=min(0.1, (args.timeout - idle_ms) / 1000 + 0.001))
            except TimeoutError:
                pass
    finally:
        done.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    await consumer.commit(dict(positions))
    return timed_out


def _key_value_bytes(batch: Any) -> int:
    """Key plus value bytes of a decoded batch (nulls count 0), vectorised."""
    import pyarrow.compute as pc

    total = 0
    for name in ("key", "value"):
        lengths = pc.binary_length(batch.column(name))
        s = pc.sum(lengths).as_py()
        total += int(s or 0)
    return total
