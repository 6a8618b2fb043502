"""Broker throughput and latency with librdkafka clients, beside baselines measured in the same run.

    .venv/bin/python bench/broker_throughput.py [--seconds 5] [--records 200000] [--rounds 3]
        [--rate 10000] [--override key=value ...] [--profile]

Starts a broker with ``EmbeddedBroker`` on a temp dir (default configs: no fsync per append) and
measures, with confluent-kafka (librdkafka) clients and 1 KiB values (no key, no compression):

* **produce**: ``--records`` records to one partition, acks=1, linger.ms=5, timed from the first
  ``produce()`` to the end of ``flush()``;
* **consume**: the same records read back from offset 0 by an assigned consumer
  (``consume(10000)`` batches), timed from the first record to the last;
* **latency**: records produced at a fixed ``--rate`` (10k msg/s) for ``--seconds`` with
  linger.ms=0, each carrying its ``time.monotonic_ns()`` send time, read by a consumer in another
  process polling tightly (``poll()`` wakes as soon as librdkafka has a record); latency = receive
  time - send time on the same (system-wide) monotonic clock. Both clients disable Nagle.

Baselines, in the same run and over the same bytes (MB/s are of those bytes, 1 MB = 10^6 B):

* **(a) append**: the exact record batches librdkafka sent (read back from the partition's
  segment files), each wrapped in a Produce v9 request frame, sent pipelined over one TCP
  connection by a raw Python socket client to a *plain asyncio server* (a separate process, like
  the broker) that parses the 4-byte frames, appends each frame to a file with ``os.write`` and
  answers each with a 48-byte frame. So it is the floor of "an asyncio process that receives
  framed requests and appends them" — no decoding, validation, index or offsets. The same raw
  client also sends the same frames to pylog (row "pylog, raw client") to split the broker's
  cost from librdkafka's batching.
* **(b) loopback**: the partition's bytes streamed over a 127.0.0.1 TCP connection between two
  threads (``sendall`` of 1 MiB chunks, ``recv_into`` a 1 MiB buffer). Row "pylog, raw fetch
  client" reads the same partition with sequential Fetch v12 requests at librdkafka's default
  sizes (1 MiB per partition, 50 MiB per response), without decoding records: the broker's
  fetch path without librdkafka's per-message work. It receives each response into one reused
  buffer (``recv_into``, like the loopback receiver) and copies nothing after the kernel.

Each throughput phase runs ``--rounds`` times (a fresh topic each round); the table shows the
best round. Ratios: produce / (a) (target >= 0.8), consume / (b) (target >= 0.5), over the same
bytes. Because wall-clock ratios swing with other load on the machine, the table also gives CPU
milliseconds per MB: of the broker process, of the append server process, and of the loopback
sender thread, and the same ratios on CPU ("cpu ratio" = baseline CPU per MB / broker CPU per MB).
"broker CPU" is the broker's CPU seconds over the phase's wall seconds (1.00 = one core busy).

``--profile`` samples the broker with py-spy (``pip install py-spy``) during the produce and
consume phases and prints the functions with the most own time and each area's inclusive share.
Figures are noisy on a shared 2-core machine: run it twice.

The raw-socket client and the baselines are in ``throughput_baselines.py``, the profiler in
``spy_profile.py``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.spy_profile import Profiler, summarize_profile
from bench.throughput_baselines import (
    Phase,
    append_baseline,
    loopback_baseline,
    partition_batches,
    pipelined_send,
    produce_frames,
    raw_fetch,
    read_frames,
)
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ApiKey, decode_response, encode_request

VALUE_BYTES = 1024
MB = 1e6
THROUGHPUT_TOPIC = "bench-throughput"
RAW_TOPIC = "bench-raw"
LATENCY_TOPIC = "bench-latency"
LATENCY_STAMP = struct.Struct(">qq")  # sequence number (-1 ready probe, -2 end), send time (monotonic ns)


# -- helpers -------------------------------------------------------------------------------------


class Best:
    """The best (shortest) wall time of several rounds of one measurement, and the least CPU."""

    def __init__(self) -> None:
        self.wall = float("inf")
        self.cpu: float | None = None

    def add(self, wall: float, cpu: float | None = None) -> None:
        self.wall = min(self.wall, wall)
        if cpu is not None:
            self.cpu = cpu if self.cpu is None else min(self.cpu, cpu)


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)


# -- librdkafka phases ---------------------------------------------------------------------------


def warm_up_groups(bootstrap: str) -> None:
    """A consumer with a group.id makes librdkafka ask for its coordinator, and the broker then
    creates ``__consumer_offsets`` (50 partitions), which stalls it for a while: done here,
    before anything is timed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition(RAW_TOPIC, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        consumer.poll(0.1)
    consumer.close()


def produce_phase(bootstrap: str, topic: str, records: int, value: bytes, phase: Phase) -> None:
    """Warm up (connection, metadata, one record), then time ``records`` produces and the flush."""
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "enable.idempotence": False,
        "compression.type": "none",
    })  # fmt: skip
    producer.produce(topic, value=b"warm-up", partition=0)
    producer.flush(30)
    with phase:
        for _ in range(records):
            while True:
                try:
                    producer.produce(topic, value=value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.001)
        left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered")


def consume_phase(bootstrap: str, topic: str, records: int) -> tuple[float, int]:
    """Read ``records`` 1 KiB records (after the warm-up one); wall seconds from the first."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "enable.partition.eof": False,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    t0 = 0.0
    nbytes = 0
    deadline = time.monotonic() + 300
    while got < records + 1 and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is not None:
                raise RuntimeError(msg.error())
            if got == 0:
                t0 = time.perf_counter()
            got += 1
            nbytes += len(msg.value())
    elapsed = time.perf_counter() - t0
    consumer.close()
    if got < records + 1:
        raise RuntimeError(f"consumed {got} of {records + 1}")
    return elapsed, nbytes


def latency_consumer(bootstrap: str, topic: str, conn: Any) -> None:
    """Runs in its own process: poll tightly, send back the latency (ns) of every record."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
        "enable.partition.eof": False, "socket.nagle.disable": True, "fetch.wait.max.ms": 100,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    latencies: list[int] = []
    ready_sent = False
    while True:
        msg = consumer.poll(0.1)
        if msg is None or msg.error() is not None:
            continue
        now = time.monotonic_ns()
        seq, sent_ns = LATENCY_STAMP.unpack_from(msg.value())
        if seq == -1:  # a ready probe: the consumer is positioned
            if not ready_sent:
                conn.send("ready")
                ready_sent = True
            continue
        if seq == -2:  # end marker
            break
        latencies.append(now - sent_ns)
    consumer.close()
    conn.send(latencies)


class Pinger:
    """ApiVersions round trips every 2 ms on a connection of its own, while a ``with`` block runs:
    how long the broker's event loop left a trivial request waiting (its stalls), apart from
    what the clients and the OS scheduler add."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self.rtts_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        frame = encode_request(ApiKey.API_VERSIONS, 3, 1, "bench-ping", {})
        with socket.create_connection(self.addr) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not self._stop.is_set():
                t0 = time.perf_counter()
                sock.sendall(frame)
                read_frames(sock, 1)
                self.rtts_ms.append((time.perf_counter() - t0) * 1000)
                time.sleep(0.002)

    def __enter__(self) -> Pinger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


LATENCY_PRODUCER = {"acks": 1, "linger.ms": 0, "enable.idempotence": False, "socket.nagle.disable": True}


def latency_phase(
    bootstrap: str, rate: int, seconds: float, *, topic: str = LATENCY_TOPIC,
    producer_config: dict[str, Any] | None = None, value_bytes: int = VALUE_BYTES, deadline_s: float = 60,
) -> tuple[list[int], float]:  # fmt: skip
    """Produce to partition 0 of ``topic`` paced at ``rate`` msg/s for ``seconds`` (values of
    ``value_bytes`` stamped with their send time; ``producer_config``, default LATENCY_PRODUCER),
    a consumer process measuring each arrival; returns the latencies (ns) and the achieved rate."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=latency_consumer, args=(bootstrap, topic, child), daemon=True)
    proc.start()
    try:
        producer = Producer({"bootstrap.servers": bootstrap, **(producer_config or LATENCY_PRODUCER)})
        pad = bytes(value_bytes - LATENCY_STAMP.size)
        deadline = time.monotonic() + deadline_s
        while not parent.poll(0.05):  # probe until the consumer has its position
            producer.produce(topic, value=LATENCY_STAMP.pack(-1, 0) + pad, partition=0)
            producer.poll(0)
            if time.monotonic() > deadline:
                raise TimeoutError("the latency consumer never got ready")
        parent.recv()
        total, sent = int(rate * seconds), 0
        interval_ns = 1_000_000_000 // rate
        start = time.monotonic_ns()
        while sent < total:
            due = min(total, (time.monotonic_ns() - start) // interval_ns + 1)
            while sent < due:
                producer.produce(topic, value=LATENCY_STAMP.pack(sent, time.monotonic_ns()) + pad, partition=0)
                sent += 1
            producer.poll(0)
            wait_ns = start + sent * interval_ns - time.monotonic_ns()
            if wait_ns > 0:
                time.sleep(wait_ns / 1e9)
        achieved = sent / ((time.monotonic_ns() - start) / 1e9)
        producer.produce(topic, value=LATENCY_STAMP.pack(-2, 0) + pad, partition=0)
        producer.flush(deadline_s)
        if not parent.poll(deadline_s):
            raise TimeoutError("the latency consumer sent nothing back")
        latencies: list[int] = parent.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    return latencies, achieved


# -- main ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    value = os.urandom(VALUE_BYTES)
    overrides = dict(o.split("=", 1) for o in args.override)
    records = args.records
    with tempfile.TemporaryDirectory(prefix="pylog-bench-") as tmp:
        workdir = Path(tmp)
        profile_dir = workdir / "profiles"
        profile_dir.mkdir()
        produce, raw, append, consume, fetch, loopback = (Best() for _ in range(6))
        with EmbeddedBroker(workdir / "broker", python=sys.executable, overrides=overrides) as broker:
            assert broker.pid is not None
            pid = broker.pid
            bootstrap = broker.bootstrap_servers
            host, port = bootstrap.rsplit(":", 1)
            addr = (host, int(port))
            topics = [f"{THROUGHPUT_TOPIC}-{r}" for r in range(args.rounds)]
            create_topics(bootstrap, [*topics, RAW_TOPIC, LATENCY_TOPIC])
            warm_up_groups(bootstrap)

            def profiled(name: str, round_no: int) -> Any:
                if args.profile and round_no == 0:
                    return Profiler(pid, profile_dir / f"{name}.txt")
                return _Null()

            for round_no, topic in enumerate(topics):
                phase = Phase(pid)
                with profiled("produce", round_no):
                    produce_phase(bootstrap, topic, records, value, phase)
                produce.add(phase.wall, phase.cpu)
                all_batches = partition_batches(workdir / "broker", topic)
                batches = all_batches[1:]  # without the warm-up record
                log_bytes = sum(map(len, batches))
                frames = produce_frames(RAW_TOPIC, batches)
                frame_bytes = sum(map(len, frames))

                def check_produce(frame: bytes) -> None:
                    _, resp = decode_response(ApiKey.PRODUCE, 9, frame)
                    assert resp.responses[0].partition_responses[0].error_code == 0, resp

                with Phase(pid) as phase:
                    pipelined_send(addr, frames, check_produce)
                raw.add(phase.wall, phase.cpu)
                append.add(*append_baseline(workdir, frames))
                with profiled("consume", round_no), Phase(pid) as phase:
                    seconds, consumed = consume_phase(bootstrap, topic, records)
                consume.add(seconds, phase.cpu)
                with Phase(pid) as phase:
                    seconds, fetched = raw_fetch(addr, topic, records + 1)
                fetch.add(seconds, phase.cpu)
                loopback.add(*loopback_baseline(log_bytes))
                if consumed != records * VALUE_BYTES + len(b"warm-up") or fetched != sum(map(len, all_batches)):
                    print(f"  note: round {round_no} consumed {consumed} value bytes, fetched {fetched} batch bytes")
            with Phase(pid) as latency_cpu, Pinger(addr) as pinger:
                latencies, achieved = latency_phase(bootstrap, args.rate, args.seconds)
        profiles = {n: (profile_dir / f"{n}.txt").read_text() for n in ("produce", "consume") if args.profile}

    print(
        f"\nbroker_throughput: {records} records x {VALUE_BYTES} B values per round, {args.rounds} round(s), acks=1; "
        f"librdkafka sent {len(batches)} batches (avg {log_bytes / len(batches) / 1024:.0f} KiB): "
        f"{log_bytes / MB:.1f} MB of batches in {frame_bytes / MB:.1f} MB of Produce requests"
        + (f"; broker overrides {overrides}" if overrides else "")
    )
    w = 52
    print(f"\n  {'best round':<{w}} {'MB/s':>8} {'msgs/s':>9} {'seconds':>8} {'CPU ms/MB':>10} {'broker CPU':>11}")
    print(f"  {'-' * (w + 51)}")

    def row(name: str, nbytes: float, best: Best, msgs: float | None, broker_cpu: bool = True) -> None:
        rate = f"{nbytes / best.wall / MB:8.1f}"
        msgs_text = f"{msgs / best.wall:9.0f}" if msgs else f"{'':>9}"
        cpu_mb = f"{1000 * best.cpu / (nbytes / MB):10.2f}" if best.cpu is not None else f"{'':>10}"
        load = f"{best.cpu / best.wall:10.2f}c" if broker_cpu and best.cpu is not None else f"{'':>11}"
        print(f"  {name:<{w}} {rate} {msgs_text} {best.wall:8.3f} {cpu_mb} {load}")

    row("produce: confluent-kafka -> pylog  (batch bytes)", log_bytes, produce, records)
    row("  pylog, raw client, same frames   (request bytes)", frame_bytes, raw, records)
    row("  baseline (a): asyncio append srv (request bytes)", frame_bytes, append, records, broker_cpu=False)
    row("consume: pylog -> confluent-kafka  (batch bytes)", log_bytes, consume, records)
    row("  pylog, raw fetch client          (batch bytes)", log_bytes, fetch, None)
    row("  baseline (b): loopback TCP       (batch bytes)", log_bytes, loopback, None, broker_cpu=False)

    def per_mb(best: Best, nbytes: float) -> float:
        return (best.cpu or 0.0) / nbytes

    print(f"\n  {'ratio (same bytes; >1 means faster than the baseline)':<{w}} {'wall':>8} {'cpu':>9} {'target':>8}")
    ratios = [
        ("produce / baseline (a)", (append.wall / frame_bytes) / (produce.wall / log_bytes),
         per_mb(append, frame_bytes) / per_mb(produce, log_bytes), ">= 0.8"),
        ("  pylog raw client / baseline (a)", append.wall / raw.wall, per_mb(append, 1) / per_mb(raw, 1), ""),
        ("consume / baseline (b)", loopback.wall / consume.wall, per_mb(loopback, 1) / per_mb(consume, 1), ">= 0.5"),
        ("  pylog raw fetch / baseline (b)", loopback.wall / fetch.wall, per_mb(loopback, 1) / per_mb(fetch, 1), ""),
    ]  # fmt: skip
    for name, wall_ratio, cpu_ratio, target in ratios:
        print(f"  {name:<{w}} {wall_ratio:8.2f} {cpu_ratio:9.2f} {target:>8}")
    if latencies:
        steady = sorted(latencies[len(latencies) // 10 :])  # the first 10% warm the path up
        p50 = steady[len(steady) // 2] / 1e6
        p99 = steady[int(len(steady) * 0.99)] / 1e6
        mean = statistics.fmean(steady) / 1e6
        title = f"end-to-end latency, {args.rate}/s paced (got {achieved:.0f}/s), n={len(steady)}"
        print(f"\n  {title:<{w}} {'ms':>8} {'':>9} {'target':>8}")
        print(f"  {'  p50':<{w}} {p50:8.2f} {'':>9} {'<= 2':>8}")
        print(f"  {'  p99':<{w}} {p99:8.2f} {'':>9} {'<= 5':>8}")
        print(f"  {'  mean / max':<{w}} {mean:8.2f} {steady[-1] / 1e6:9.2f}")
        print(f"  {'  broker CPU during the paced phase':<{w}} {latency_cpu.cpu / latency_cpu.wall:7.2f}c")
        pings = sorted(pinger.rtts_ms)
        if pings:
            ping_text = f"{pings[len(pings) // 2]:.2f} / {pings[int(len(pings) * 0.99)]:.2f} / {pings[-1]:.1f}"
            print(f"  {'  ApiVersions ping beside it, p50 / p99 / max':<{w}} {ping_text:>18}")
    else:
        print("\n  latency: the consumer returned nothing")
    print(f"\n  machine load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, text in profiles.items():
        summarize_profile(text, f"broker during {name} (round 1)")


class _Null:
    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records in the throughput phases")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the paced latency phase")
    parser.add_argument("--rate", type=int, default=10_000, help="paced produce rate, msgs/s")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each throughput phase (best is shown)")
    parser.add_argument("--override", action="append", default=[], help="broker config key=value (repeatable)")
    parser.add_argument("--profile", action="store_true", help="py-spy the broker during produce and consume")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
