"""``pylog perf produce`` beside Kafka 4.1's ``kafka-producer-perf-test``, both against the same
pylog broker (issue #32), and ``pylog perf consume`` beside ``kafka-consumer-perf-test``.

    .venv/bin/python bench/perf_tools.py [--records 1000000] [--record-size 100] [--partitions 3]

Starts one broker (``EmbeddedBroker``), creates a topic per tool, runs each tool unthrottled
(``--throughput -1``, acks=all, Kafka's defaults otherwise) and prints the records/s and MB/s
each printed on its summary line, and the ratio pylog / Kafka. Kafka's tools need the reference
jars (``./dev refs``). Figures are indicative on a shared machine; on demand only, never in CI.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from pyspark_log.client import AdminClient, NewTopic
from pyspark_log.embedded import EmbeddedBroker

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.apache_kafka import kafka_tool  # noqa: E402 - the repository's test helpers

TOTAL = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def _topic(bs: str, partitions: int) -> str:
    name = f"bench-perf-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def _pylog(*args: str) -> str:
    argv = [sys.executable, "-m", "pyspark_log.cli", "perf", *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pylog perf failed: {done.stderr}")
    return done.stdout


def _produce_rate(stdout: str) -> tuple[float, float]:
    m = TOTAL.match(stdout.strip().splitlines()[-1])
    assert m, stdout
    return float(m[2]), float(m[3])


def _consume_rate(stdout: str) -> tuple[float, float]:
    header, values = stdout.strip().splitlines()[-2:]
    row = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=True))
    return float(row["nMsg.sec"]), float(row["MB.sec"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    a = ap.parse_args()
    n, size = str(a.records), str(a.record_size)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp) / "broker") as broker:
        bs = broker.bootstrap_servers
        t_pylog, t_kafka = _topic(bs, a.partitions), _topic(bs, a.partitions)
        common = ["--num-records", n, "--throughput", "-1", "--record-size", size]
        props = ["--producer-props", f"bootstrap.servers={bs}", "acks=all"]
        ours = _produce_rate(_pylog("produce", "--topic", t_pylog, *common, *props))
        done = kafka_tool("kafka-producer-perf-test", "--topic", t_kafka, *common, *props, timeout_s=1800)
        theirs = _produce_rate(done.stdout)
        print(f"produce {a.records:,} x {a.record_size} B, acks=all, {a.partitions} partitions, one pylog broker")
        print(f"  pylog perf produce         {ours[0]:>12,.0f} records/s {ours[1]:>8.2f} MB/s")
        print(f"  kafka-producer-perf-test   {theirs[0]:>12,.0f} records/s {theirs[1]:>8.2f} MB/s")
        print(f"  ratio pylog / Kafka tool   {ours[0] / theirs[0]:.2f}x")
        args = ["--bootstrap-server", bs, "--messages", n, "--timeout", "60000"]
        ours = _consume_rate(_pylog("consume", "--topic", t_pylog, *args))
        done = kafka_tool("kafka-consumer-perf-test", "--topic", t_kafka, *args, timeout_s=1800)
        theirs = _consume_rate(done.stdout)
        print("consume the same records")
        print(f"  pylog perf consume         {ours[0]:>12,.0f} records/s {ours[1]:>8.2f} MB/s")
        print(f"  kafka-consumer-perf-test   {theirs[0]:>12,.0f} records/s {theirs[1]:>8.2f} MB/s")
        print(f"  ratio pylog / Kafka tool   {ours[0] / theirs[0]:.2f}x")


if __name__ == "__main__":
    main()
