"""Measured rate of a confluent-kafka producer and consumer under a 1 MB/s byte-rate quota.

    .venv/bin/python bench/quota_rate.py [--seconds 20] [--quota 1048576] [--window-num 11]

Starts a broker (``EmbeddedBroker``, temp dir), sets ``producer_byte_rate`` and
``consumer_byte_rate`` for client id ``limited`` with the admin client, then:

* **produce**: 10 kB values for ``--seconds`` from client ``limited`` and from client
  ``unlimited`` (one after the other), printing delivered MB/s over the whole run and over the
  run after its first window (``--window-num`` s), and librdkafka's largest throttle time;
* **consume**: both client ids read the topic from the start for ``--seconds`` (the unlimited one
  stops when it has everything).

The limited rate over the whole run includes the initial burst the windows allow (about
``window-num - 1`` seconds' worth); the rate after the first window is the steady state.
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


def produce(bootstrap: str, topic: str, client_id: str, seconds: float, skip_s: float) -> str:
    seen, on_stats = throttle_stats()
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "queue.buffering.max.kbytes": 1024, "statistics.interval.ms": 500, "stats_cb": on_stats})  # fmt: skip
    times: list[float] = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, PAYLOAD, on_delivery=lambda err, _m: err is None and times.append(time.monotonic()))
        except BufferError:
            p.poll(0.02)
        p.poll(0)
    end = time.monotonic()
    p.poll(1)
    p.purge()
    p.flush(10)
    whole = sum(1 for t in times if t <= end) * len(PAYLOAD) / (end - start) / 1e6
    steady = sum(1 for t in times if start + skip_s <= t <= end) * len(PAYLOAD) / (end - start - skip_s) / 1e6
    return (
        f"produce {client_id:>9}: {whole:8.2f} MB/s whole run, {steady:8.2f} MB/s after {skip_s:.0f} s, "
        f"throttle max {seen['max']} ms"
    )


def consume(bootstrap: str, topic: str, client_id: str, seconds: float, total: int) -> str:
    seen, on_stats = throttle_stats()
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                  "auto.offset.reset": "earliest", "statistics.interval.ms": 500, "stats_cb": on_stats})  # fmt: skip
    c.subscribe([topic])
    got = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds and got < total:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            got += len(msg.value() or b"")
    elapsed = time.monotonic() - start
    c.poll(1)
    c.close()
    rate = got / elapsed / 1e6
    return (
        f"consume {client_id:>9}: {rate:8.2f} MB/s ({got / 1e6:.1f} MB in {elapsed:.1f} s), "
        f"throttle max {seen['max']} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--quota", type=float, default=1_048_576)
    ap.add_argument("--window-num", type=int, default=11)
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
        print(f"quota {args.quota / 1e6:.3f} MB/s, windows {args.window_num} x 1 s, {args.seconds:.0f} s per run")
        print(produce(b.bootstrap_servers, "quota-bench", "limited", args.seconds, args.window_num))
        print(produce(b.bootstrap_servers, "quota-bench", "unlimited", min(args.seconds, 5), 1))
        print(consume(b.bootstrap_servers, "quota-bench", "unlimited", 60, 10**12))
        print(consume(b.bootstrap_servers, "quota-bench", "limited", args.seconds, 10**12))


if __name__ == "__main__":
    main()
