"""Producer throughput with and without idempotence, measured in the same run (issue 5; Kafka documentation
§3.3 "Producer Configs", `enable.idempotence`: Confluent reports up to ~20 % overhead for Kafka; our target is
<= 5 %).

    .venv/bin/python bench/idempotence.py [--mb 64] [--rounds 4] [--value-bytes 1000]
        [--partitions 3] [--no-confluent]

Starts a broker with ``EmbeddedBroker`` on a temp dir and, for each round, produces ``--mb`` MB
(1 MB = 10^6 B of values, no keys, no compression, round-robin over ``--partitions``) with acks=all
through each client in both modes, alternating the order every round so drift on a shared machine
hits both alike:

* pylog ``Producer``: ``enable.idempotence`` false vs true (linger.ms=5, batch.size=64 KiB);
* confluent-kafka (librdkafka): ``enable.idempotence`` false vs true (linger.ms=5), both with
  ``max.in.flight.requests.per.connection=5`` (the Java client's default). librdkafka's own
  default for a plain producer is 1,000,000 requests in flight, which idempotence must cap at 5;
  comparing against that would measure pipelining depth, not the cost of idempotence.

Each run is timed from the first ``send`` to the end of ``flush`` into a fresh topic, after one
warm-up record (connections up, producer id acquired) so the figures are steady-state throughput. Printed:
MB/s per run, the median per mode, and overhead = 1 - median(idempotent) / median(plain).
Figures are noisy on a shared 2-core machine: use several rounds and look at the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

from pyspark_log.client import AdminClient, NewTopic, Producer
from pyspark_log.embedded import EmbeddedBroker


def _topic(bs: str, partitions: int) -> str:
    name = f"bench-idem-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def run_pylog(bs: str, topic: str, count: int, value: bytes, partitions: int, idempotent: bool) -> float:
    config = {
        "bootstrap.servers": bs,
        "acks": "all",
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        "batch.size": 65536,
    }
    with Producer(config) as p:
        assert p.core.idempotent == idempotent
        p.send(topic, value, partition=0).result()  # connected, producer id acquired: steady state only
        start = time.perf_counter()
        for i in range(count):
            p.send(topic, value, partition=i % partitions)
        p.flush()
        return time.perf_counter() - start


def run_confluent(bs: str, topic: str, count: int, value: bytes, partitions: int, idempotent: bool) -> float:
    import confluent_kafka

    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bs,
            "acks": "all",
            "enable.idempotence": idempotent,
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": 5,
        }
    )
    # Steady state only: an idempotent librdkafka producer first acquires its producer id on a
    # timer of its own (hundreds of ms), which would dominate short runs and is not per-record cost.
    p.produce(topic, value, partition=0)
    p.flush()
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush()
    return time.perf_counter() - start


Runner = Callable[[str, str, int, bytes, int, bool], float]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=64.0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--no-confluent", action="store_true")
    args = ap.parse_args()
    value = b"x" * args.value_bytes
    count = int(args.mb * 1e6 / args.value_bytes)
    megabytes = count * args.value_bytes / 1e6
    clients: list[tuple[str, Runner]] = [("pylog", run_pylog)]
    if not args.no_confluent:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            print("confluent-kafka not installed: skipping it", file=sys.stderr)
        else:
            clients.append(("confluent-kafka", run_confluent))
    results: dict[tuple[str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(tmp, python=sys.executable) as broker:
        bs = broker.bootstrap_servers
        # warm-up: connections, imports, first segment files
        run_pylog(bs, _topic(bs, args.partitions), 2000, value, args.partitions, True)
        for rnd in range(args.rounds):
            order = (False, True) if rnd % 2 == 0 else (True, False)
            for name, runner in clients:
                for idem in order:
                    secs = runner(bs, _topic(bs, args.partitions), count, value, args.partitions, idem)
                    mb_s = megabytes / secs
                    results.setdefault((name, idem), []).append(mb_s)
                    mode = "idempotent" if idem else "plain     "
                    print(f"round {rnd + 1}  {name:16s} {mode}  {mb_s:8.1f} MB/s", flush=True)
    print()
    print(f"{megabytes:.0f} MB per run, {args.value_bytes} B values, acks=all, {args.rounds} rounds (medians):")
    for name, _ in clients:
        plain = statistics.median(results[(name, False)])
        with_idem = statistics.median(results[(name, True)])
        print(
            f"  {name:16s} plain {plain:8.1f} MB/s   idempotent {with_idem:8.1f} MB/s   "
            f"overhead {100 * (1 - with_idem / plain):+5.1f} %"
        )


if __name__ == "__main__":
    main()
