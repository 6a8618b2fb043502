"""Produce throughput and latency for replication factor 1 vs 3, acks=1 vs acks=all (issue 11).

    .venv/bin/python bench/replication.py [--records 20000] [--value-bytes 1000] [--rounds 3]
        [--latency-records 2000]

Starts three ``broker,controller`` nodes on loopback (``EmbeddedCluster``) and, for each round,
measures four configurations into fresh 3-partition topics with confluent-kafka (librdkafka):
RF 1 / RF 3 × acks=1 / acks=all. Throughput: ``--records`` values of ``--value-bytes`` bytes,
``linger.ms=5``, timed from the first produce to the end of flush. Latency: ``--latency-records``
sends one at a time (each waits for its delivery report), so p50/p99 is the produce round trip
including, for acks=all, the followers' fetch of the batch and the leader's high-watermark move.
The order of configurations alternates every round; the medians per configuration are printed
with ratios against RF 1 with the same acks. Targets (issue 11): acks=all RF 3 p99 ≤ 3× RF 1's,
throughput ≥ 0.5× RF 1's. Figures are noisy on a shared 2-core machine (three brokers and the
client share two cores): use several rounds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster

CONFIGS = [(1, "1"), (3, "1"), (1, "all"), (3, "all")]


def topic(bootstrap: str, rf: int) -> str:
    name = f"bench-rf{rf}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 3, rf)])[name].result(60)
    time.sleep(0.5)  # let every broker's metadata show the topic before producing
    return name


def throughput(bootstrap: str, name: str, acks: str, records: int, value: bytes) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "enable.idempotence": False})
    producer.produce(name, value)
    producer.flush(30)  # connections and metadata ready
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(name, value)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - start
    return records * len(value) / elapsed / 1e6


def latencies(bootstrap: str, name: str, acks: str, count: int, value: bytes) -> list[float]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "enable.idempotence": False})
    producer.produce(name, value)
    producer.flush(30)
    samples = []
    for i in range(count):
        start = time.perf_counter()
        producer.produce(name, value, partition=i % 3)
        assert producer.flush(30) == 0
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-records", type=int, default=2000)
    args = parser.parse_args()
    value = b"x" * args.value_bytes
    results: dict[tuple[int, str], dict[str, list[float]]] = {c: {"mbs": [], "p50": [], "p99": []} for c in CONFIGS}
    with (
        tempfile.TemporaryDirectory(prefix="bench-repl-") as root,
        EmbeddedCluster(
            Path(root), brokers=(1, 2, 3), combined=True, overrides={"offsets.topic.num.partitions": "3"}
        ) as cluster,
    ):
        bootstrap = cluster.bootstrap()
        for round_no in range(args.rounds):
            order = CONFIGS if round_no % 2 == 0 else list(reversed(CONFIGS))
            for rf, acks in order:
                mbs = throughput(bootstrap, topic(bootstrap, rf), acks, args.records, value)
                lat = latencies(bootstrap, topic(bootstrap, rf), acks, args.latency_records, value)
                r = results[(rf, acks)]
                r["mbs"].append(mbs)
                r["p50"].append(percentile(lat, 0.50))
                r["p99"].append(percentile(lat, 0.99))
                print(f"round {round_no + 1} RF {rf} acks={acks:<3}: {mbs:7.1f} MB/s  "
                      f"p50 {r['p50'][-1]:6.2f} ms  p99 {r['p99'][-1]:6.2f} ms", flush=True)  # fmt: skip
    print("\nmedians (ratio vs RF 1 with the same acks):")
    med = {c: {k: statistics.median(v) for k, v in r.items()} for c, r in results.items()}
    for rf, acks in CONFIGS:
        m, base = med[(rf, acks)], med[(1, acks)]
        print(f"RF {rf} acks={acks:<3}: {m['mbs']:7.1f} MB/s ({m['mbs'] / base['mbs']:.2f}x)  "
              f"p50 {m['p50']:6.2f} ms ({m['p50'] / base['p50']:.2f}x)  "
              f"p99 {m['p99']:6.2f} ms ({m['p99'] / base['p99']:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
