"""Producer throughput: pylog ``send()`` and the batch API (``send_batch``) beside confluent-kafka's
producer, measured in the same run against the same broker (issue #14).

    .venv/bin/python bench/producer.py [--records-100b 1000000] [--records-1kb 200000]
        [--partitions 3] [--rounds 1] [--no-keys]

Starts a broker with ``EmbeddedBroker`` on a temp dir. For 100 B and 1 KiB values (keys
``k<i>``, no compression) and for acks=1 (``enable.idempotence=false``) and acks=all with
idempotence, each client produces the records into a fresh topic, timed from the first record
to the end of ``flush`` after one warm-up record (connections up, producer id acquired):

* ``send``        pylog ``Producer.send`` per record (a ``DeliveryFuture`` per record);
* ``send_batch``  pylog ``Producer.send_batch`` of a ``pyarrow.Table`` of the same records in
                  chunks of 100,000 rows (keys partitioned by murmur2, encoded from the columns);
* ``confluent``   confluent-kafka (librdkafka) ``produce`` per record, ``poll(0)`` every 1000;
* with ``--no-keys`` also ``send_nk`` and ``confluent_nk``: the same without keys (sticky
                  partitioning in both clients).

All use linger.ms=5, batch.size=1 MiB (librdkafka: batch.size 1000000), 5 requests in flight.
Printed: records/s and MB/s (value bytes) per run, and the ratios send/confluent (target >= 0.4)
and send_batch/confluent (target >= 1.0). Figures are indicative on a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

import pyarrow as pa

from pyspark_log.client import AdminClient, NewTopic, Producer
from pyspark_log.embedded import EmbeddedBroker

CHUNK_ROWS = 100_000


def _topic(bs: str, partitions: int) -> str:
    name = f"bench-producer-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def _pylog_config(bs: str, idempotent: bool) -> dict[str, object]:
    return {
        "bootstrap.servers": bs,
        "acks": "all" if idempotent else "1",
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        "batch.size": 1 << 20,
        "buffer.memory": 256 << 20,
        "max.in.flight.requests.per.connection": 5,
    }


def run_send(bs: str, topic: str, keys: list[bytes], value: bytes, idempotent: bool, keyed: bool = True) -> float:
    """``send()`` per record; ``keyed`` False: as many records without keys (sticky)."""
    sent_keys: list[bytes | None] = list(keys) if keyed else [None] * len(keys)
    with Producer(_pylog_config(bs, idempotent)) as p:
        p.send(topic, value, key=b"warm-up").result()
        send = p.send
        start = time.perf_counter()
        for key in sent_keys:
            send(topic, value, key)
        p.flush()
        return time.perf_counter() - start


def run_send_no_key(bs: str, topic: str, keys: list[bytes], value: bytes, idempotent: bool) -> float:
    return run_send(bs, topic, keys, value, idempotent, keyed=False)


def run_send_batch(bs: str, topic: str, keys: list[bytes], value: bytes, idempotent: bool) -> float:
    tables = []
    for lo in range(0, len(keys), CHUNK_ROWS):
        chunk = keys[lo : lo + CHUNK_ROWS]
        tables.append(pa.table({"key": pa.array(chunk, pa.binary()), "value": pa.array([value] * len(chunk))}))
    with Producer(_pylog_config(bs, idempotent)) as p:
        p.send(topic, value, key=b"warm-up").result()
        start = time.perf_counter()
        futures = [p.send_batch(topic, t) for t in tables]
        p.flush()
        assert sum(f.result() for f in futures) == len(keys)
        return time.perf_counter() - start


def run_confluent_no_key(bs: str, topic: str, keys: list[bytes], value: bytes, idempotent: bool) -> float:
    return run_confluent(bs, topic, keys, value, idempotent, keyed=False)


def run_confluent(bs: str, topic: str, keys: list[bytes], value: bytes, idempotent: bool, keyed: bool = True) -> float:
    import confluent_kafka

    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bs,
            "acks": "all" if idempotent else "1",
            "enable.idempotence": idempotent,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "max.in.flight.requests.per.connection": 5,
            "partitioner": "murmur2_random",
        }
    )
    p.produce(topic, value, key=b"warm-up")
    p.flush()
    produce, poll = p.produce, p.poll
    start = time.perf_counter()
    for i, key in enumerate(keys):
        while True:
            try:
                produce(topic, value, key if keyed else None)
                break
            except BufferError:
                poll(0.01)
        if i % 1000 == 0:
            poll(0)
    p.flush()
    return time.perf_counter() - start


Runner = Callable[[str, str, list[bytes], bytes, bool], float]
RUNNERS: list[tuple[str, Runner]] = [("confluent", run_confluent), ("send", run_send), ("send_batch", run_send_batch)]
NO_KEY_RUNNERS: list[tuple[str, Runner]] = [("confluent_nk", run_confluent_no_key), ("send_nk", run_send_no_key)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records-100b", type=int, default=1_000_000)
    ap.add_argument("--records-1kb", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-keys", action="store_true", help="also send() and confluent-kafka without keys (sticky)")
    args = ap.parse_args()
    runners = RUNNERS + (NO_KEY_RUNNERS if args.no_keys else [])
    best: dict[tuple[int, bool, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(tmp, python=sys.executable) as broker:
        bs = broker.bootstrap_servers
        for size, count in ((100, args.records_100b), (1024, args.records_1kb)):
            value = b"x" * size
            keys = [b"k%d" % i for i in range(count)]
            for idem in (False, True):
                mode = "acks=all+idempotence" if idem else "acks=1"
                for rnd in range(args.rounds):
                    for name, runner in runners:
                        secs = runner(bs, _topic(bs, args.partitions), keys, value, idem)
                        rate = count / secs
                        best[(size, idem, name)] = max(best.get((size, idem, name), 0.0), rate)
                        print(
                            f"{size:5d} B  {mode:21s} round {rnd + 1}  {name:11s} {rate:12,.0f} records/s  "
                            f"{rate * size / 1e6:8.1f} MB/s",
                            flush=True,
                        )
    print()
    print("best of rounds; ratio = pylog / confluent-kafka in the same run")
    for size in (100, 1024):
        for idem in (False, True):
            mode = "acks=all+idempotence" if idem else "acks=1"
            base = best[(size, idem, "confluent")]
            send = best[(size, idem, "send")]
            batch = best[(size, idem, "send_batch")]
            print(
                f"  {size:5d} B {mode:21s} confluent {base:11,.0f}/s  send {send:11,.0f}/s ({send / base:4.2f}x, "
                f"target 0.4)  send_batch {batch:11,.0f}/s ({batch / base:4.2f}x, target 1.0)"
            )
            if args.no_keys:
                base_nk, send_nk = best[(size, idem, "confluent_nk")], best[(size, idem, "send_nk")]
                print(
                    f"  {size:5d} B {mode:21s} without keys: confluent {base_nk:11,.0f}/s  "
                    f"send {send_nk:11,.0f}/s ({send_nk / base_nk:4.2f}x)"
                )


if __name__ == "__main__":
    main()
