"""Measured rate of a confluent-kafka producer and consumer under a 1 MB/s byte-rate quota.

    .venv/bin/python bench/quota_rate.py [--seconds 20] [--quota 1048576] [--window-num 11]
                                         [--batch-bytes 1000000]

Starts a broker (``EmbeddedBroker``, temp dir), sets ``producer_byte_rate`` and
``consumer_byte_rate`` for client id ``limited`` with the admin client, then:

* **produce**: 10 kB values from client ``limited`` as fast as it can for a warm-up of
  ``--window-num`` windows plus ``--seconds``, then from client ``unlimited`` for 2 s; printing
  delivered MB/s over the whole run and over the ``--seconds`` after the warm-up (the steady
  state), librdkafka's largest throttle time, and the MB delivered in each second;
* **consume**: ``unlimited`` reads the topic from the start to its end, then ``limited`` reads it
  for the warm-up plus ``--seconds`` (rates as above, timed from each one's first record: joining
  the group reads nothing).

``--batch-bytes`` is librdkafka's ``batch.size`` and ``max.partition.fetch.bytes`` of the
limited clients: the size of one throttled request. The per-second figures show Kafka's windowed
rate at work: a burst of ``window-num - 1`` windows at the start, and again whenever the window
holding a burst expires, so the rate meets the quota over whole cycles of about ``window-num``
seconds (docs/operations.md, "Measuring a throttled client").
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from confluent_kafka import Consumer, Producer

from pyspark_log.client import AdminClient, ClientQuotaAlteration
from pyspark_log.embedded import EmbeddedBroker

PAYLOAD = b"b" * 10_000


def throttle_stats() -> tuple[dict[str, int], object]:
    seen = {"max": 0}

    def on_stats(text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            seen["max"] = max(seen["max"], int(broker.get("throttle", {}).get("max", 0)))

    return seen, on_stats


def _rates(times: list[float], size: int, start: float, warmup_s: float, end: float) -> str:
    whole = sum(1 for t in times if t <= end) * size / (end - start) / 1e6
    steady = sum(1 for t in times if start + warmup_s <= t <= end) * size / (end - start - warmup_s) / 1e6
    seconds = [0.0] * (int(end - start) + 1)
    for t in times:
        if start <= t < end:
            seconds[int(t - start)] += size / 1e6
    per_second = " ".join(f"{mb:.1f}" for mb in seconds)
    return (
        f"{whole:8.2f} MB/s whole run, {steady:8.2f} MB/s in the {end - start - warmup_s:.0f} s after "
        f"{warmup_s:g} s of warm-up\n      MB per second: {per_second}"
    )


def produce(bootstrap: str, topic: str, client_id: str, seconds: float, warmup_s: float, batch: int) -> str:
    seen, on_stats = throttle_stats()
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "batch.size": batch,
                  "queue.buffering.max.kbytes": 1024, "statistics.interval.ms": 500, "stats_cb": on_stats})  # fmt: skip
    times: list[float] = []
    start = time.monotonic()
    while time.monotonic() - start < warmup_s + seconds:
        try:
            p.produce(topic, PAYLOAD, on_delivery=lambda err, _m: err is None and times.append(time.monotonic()))
        except BufferError:
            p.poll(0.02)
        p.poll(0)
    end = time.monotonic()
    p.poll(1)
    p.purge()
    p.flush(10)
    return f"produce {client_id:>9}: throttle max {seen['max']} ms, " + _rates(
        times, len(PAYLOAD), start, warmup_s, end
    )


def consume(bootstrap: str, topic: str, client_id: str, seconds: float, warmup_s: float, batch: int) -> str:
    seen, on_stats = throttle_stats()
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                  "auto.offset.reset": "earliest", "max.partition.fetch.bytes": batch, "enable.partition.eof": True,
                  "statistics.interval.ms": 500, "stats_cb": on_stats})  # fmt: skip
    c.subscribe([topic])
    times: list[float] = []
    start = give_up = time.monotonic() + 60
    while time.monotonic() - start < warmup_s + seconds and time.monotonic() < give_up:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is not None:
            break  # the end of the partition
        if msg is not None:
            times.append(time.monotonic())
            start = min(start, times[-1])  # the clock starts with the first record (after the group join)
    end = time.monotonic()
    c.poll(1)
    c.close()
    return f"consume {client_id:>9}: throttle max {seen['max']} ms, " + _rates(
        times, len(PAYLOAD), start, warmup_s, end
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--quota", type=float, default=1_048_576)
    ap.add_argument("--window-num", type=int, default=11)
    ap.add_argument("--batch-bytes", type=int, default=1_000_000)
    args = ap.parse_args()
    with EmbeddedBroker(
        tempfile.mkdtemp(prefix="pylog-quota-"), overrides={"quota.window.num": str(args.window_num)}
    ) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.alter_client_quotas(
            [
                ClientQuotaAlteration(
                    {"client-id": "limited"}, {"producer_byte_rate": args.quota, "consumer_byte_rate": args.quota}
                )
            ]
        )
        admin.close()
        print(f"quota {args.quota / 1e6:.3f} MB/s, windows {args.window_num} x 1 s, {args.seconds:.0f} s measured")
        warmup = float(args.window_num)
        batch = args.batch_bytes
        print(produce(b.bootstrap_servers, "quota-bench", "limited", args.seconds, warmup, batch))
        print(produce(b.bootstrap_servers, "quota-bench", "unlimited", 0.5, 0.5, 1_000_000))
        print(consume(b.bootstrap_servers, "quota-bench", "unlimited", 600, 0, 1_048_576))
        print(consume(b.bootstrap_servers, "quota-bench", "limited", args.seconds, warmup, batch))


if __name__ == "__main__":
    main()
