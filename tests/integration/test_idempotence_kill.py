"""kill -9 of the broker under an idempotent producer: after restarts, no duplicates and no gaps.

Issue #5 "Done when": "Kill -9 of the broker during an idempotent produce with retries: after
restart, no duplicates and no gaps in what was acknowledged." Kafka documentation §3.3 "Producer Configs",
`enable.idempotence`: the producer
resends a message whose ACK it did not get, and the broker, comparing the producer id and
sequence number, stores it only once. The producer state must survive the crash: it is rebuilt
from the last producer snapshot and the batch headers after it (``broker.log.producer_state``).

confluent-kafka (librdkafka) with ``enable.idempotence=true`` keeps up to 5 requests in flight
per partition and retries them across the crash on the same producer id and epoch. Small
segments make the partitions roll (and snapshot) while the test runs.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline, wait_until

TOPIC = "idempotent-kill"
PARTITIONS = 3
MESSAGES = 12_000
KILL_AFTER_ACKED = (2_000, 6_000)  # two crashes, each once this many messages were acknowledged
TIMEOUT_S = 120.0
OVERRIDES = {"log.segment.bytes": str(64 * 1024), "num.partitions": str(PARTITIONS)}


def _poll_until(producer: Any, condition: Any, what: str) -> None:
    """Serve the producer's callbacks until ``condition()`` holds (bounded by TIMEOUT_S)."""

    def served() -> bool:
        if condition():
            return True
        producer.poll(0.05)
        return False

    wait_until(served, what, timeout_s=TIMEOUT_S, interval_s=0)


def _consume_all(bootstrap: str, expected: int) -> list[tuple[int, int, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False, "fetch.wait.max.ms": 100}
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: list[tuple[int, int, bytes]] = []
        idle_since = time.monotonic()
        deadline = Deadline(TIMEOUT_S)
        # read until everything expected arrived, then a little longer to catch duplicates past it
        while not deadline.expired():
            msgs = consumer.consume(num_messages=1000, timeout=0.2)
            for msg in msgs:
                assert msg.error() is None, msg.error()
                out.append((msg.partition(), msg.offset(), msg.value()))
            if msgs:
                idle_since = time.monotonic()
            elif len(out) >= expected and time.monotonic() - idle_since > 1.0:
                break
        return out
    finally:
        consumer.close()


def test_kill_9_during_idempotent_produce_leaves_no_duplicates_and_no_gaps(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    with EmbeddedBroker(tmp_path / "broker", overrides=OVERRIDES) as broker:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "max.in.flight.requests.per.connection": 5,
                "linger.ms": 2,
                "batch.size": 4096,  # many small batches in flight
                "message.timeout.ms": int(TIMEOUT_S * 1000),
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "error_cb": lambda err: fatal.append(str(err)) if err.fatal() else None,
            }
        )
        acked: list[int] = []
        errors: list[str] = []
        fatal: list[str] = []
        lock = threading.Lock()

        def on_delivery(err: Any, msg: Any) -> None:
            with lock:
                if err is not None:
                    errors.append(str(err))
                else:
                    acked.append(int(msg.value().split(b"-")[1]))

        def acked_count() -> int:
            with lock:
                return len(acked)

        kills = list(KILL_AFTER_ACKED)
        for i in range(MESSAGES):
            value = f"id-{i:08d}-".encode() + b"x" * 64
            while True:
                try:
                    producer.produce(TOPIC, value=value, key=str(i % 97).encode(), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            if kills and i >= kills[0] + 500:
                _poll_until(producer, lambda n=kills[0]: acked_count() >= n, f"{kills[0]} acknowledgements")
                broker.kill()  # SIGKILL with requests in flight
                broker.start()  # same port and data directory
                kills.pop(0)
        assert producer.flush(TIMEOUT_S) == 0, "the producer did not finish after the restarts"
        assert not fatal, f"fatal producer errors: {fatal}"
        assert not errors, f"delivery errors: {errors[:5]}"
        assert sorted(acked) == list(range(MESSAGES)), "every message is acknowledged exactly once"

        got = _consume_all(broker.bootstrap_servers, MESSAGES)
        ids = [int(value.split(b"-")[1]) for _, _, value in got]
        duplicates = [i for i, n in Counter(ids).items() if n > 1]
        assert not duplicates, f"{len(duplicates)} duplicated ids, e.g. {duplicates[:5]}"
        assert set(ids) == set(range(MESSAGES)), f"missing ids: {sorted(set(range(MESSAGES)) - set(ids))[:5]}"
        for partition in range(PARTITIONS):
            in_partition = [int(v.split(b"-")[1]) for p, _, v in sorted(got) if p == partition]
            assert in_partition == sorted(in_partition), f"partition {partition} is out of order"
