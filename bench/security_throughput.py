"""Produce and consume throughput over PLAINTEXT vs SSL vs SASL_SSL (SCRAM-SHA-512), in one run.

    .venv/bin/python bench/security_throughput.py [--records 100000] [--rounds 3] [--value-bytes 1024]

One broker (``EmbeddedBroker``) serves a PLAINTEXT, an SSL and a SASL_SSL listener (certificates
made for the run, tests/tls_certs.py; a SCRAM-SHA-512 user created with AlterUserScramCredentials).
For each listener, confluent-kafka (librdkafka) produces ``--records`` records of
``--value-bytes`` to a fresh one-partition topic (acks=1, linger.ms=5, no compression), timed
from the first ``produce()`` to the end of ``flush()``, then an assigned consumer reads them back
from offset 0, timed from the first record to the last. Each phase runs ``--rounds`` times; the
best round is shown, with the SSL / PLAINTEXT and SASL_SSL / PLAINTEXT ratios. On a PLAINTEXT
listener fetches go out with ``sendfile``; on SSL they are read and encrypted (the cost measured
here). Figures are noisy on a shared machine: run it twice.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from pyspark_log.embedded import EmbeddedBroker
from tests.tls_certs import make_certs


def produce(bootstrap: str, extra: dict[str, str], topic: str, records: int, value: bytes) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, **extra})
    producer.list_topics(topic, timeout=30)  # auto-creates the topic and warms the connection
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.perf_counter() - start


def consume(bootstrap: str, extra: dict[str, str], topic: str, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False, **extra})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    start = 0.0
    deadline = time.monotonic() + 300
    try:
        while got < records and time.monotonic() < deadline:
            batch = consumer.consume(10000, 1.0)
            if batch and not start:
                start = time.perf_counter()
            got += sum(1 for m in batch if not m.error())
    finally:
        consumer.close()
    assert got >= records, f"consumed {got} of {records}"
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--value-bytes", type=int, default=1024)
    args = parser.parse_args()
    value = b"x" * args.value_bytes
    megabytes = args.records * args.value_bytes / 1e6
    with tempfile.TemporaryDirectory(prefix="pylog-bench-security-") as tmp:
        certs = make_certs(Path(tmp) / "certs")
        overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.server.both),
            "message.max.bytes": str(4 << 20),
        }
        with EmbeddedBroker(Path(tmp) / "broker", overrides=overrides) as broker:
            ready = re.search(r"listeners=(\S+)", broker.output())
            assert ready is not None
            addresses = dict(uri.split("://") for uri in ready.group(1).split(","))
            admin = AdminClient({"bootstrap.servers": addresses["PLAINTEXT"]})
            user = UserScramCredentialUpsertion(
                "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bench-secret"
            )
            for future in admin.alter_user_scram_credentials([user]).values():
                future.result(timeout=30)
            tls = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
            sasl = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": "bench-secret"}
            clients: dict[str, dict[str, str]] = {
                "PLAINTEXT": {},
                "SSL": tls,
                "SASL_SSL": {**tls, **sasl, "security.protocol": "SASL_SSL"},
            }
            best: dict[str, tuple[float, float]] = {}
            for protocol, extra in clients.items():
                for round_no in range(args.rounds):
                    topic = f"bench-{protocol.lower()}-{round_no}"
                    p = produce(addresses[protocol], extra, topic, args.records, value)
                    c = consume(addresses[protocol], extra, topic, args.records)
                    old = best.get(protocol, (float("inf"), float("inf")))
                    best[protocol] = (min(old[0], p), min(old[1], c))
    print(f"{args.records} records x {args.value_bytes} B = {megabytes:.1f} MB, best of {args.rounds} rounds")
    print(f"{'protocol':<12}{'produce MB/s':>14}{'consume MB/s':>14}")
    for protocol, (p, c) in best.items():
        print(f"{protocol:<12}{megabytes / p:>14.1f}{megabytes / c:>14.1f}")
    plain = best["PLAINTEXT"]
    for protocol in ("SSL", "SASL_SSL"):
        other = best[protocol]
        print(f"{protocol} / PLAINTEXT: produce {plain[0] / other[0]:.2f}, consume {plain[1] / other[1]:.2f}")


if __name__ == "__main__":
    main()
