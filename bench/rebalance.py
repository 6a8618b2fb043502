"""Rebalance cost: an 11th consumer joins 10 busy ones (issue 30), for the classic protocol with the
eager ``range`` assignor, the classic protocol with ``cooperative-sticky`` (KIP-429) and the KIP-848
consumer protocol (``group.protocol=consumer``, the broker's ``uniform`` assignor), in one run.

    .venv/bin/python bench/rebalance.py [--partitions 22] [--rate 2000] [--rounds 1]

One pylog broker (``EmbeddedBroker``) with Kafka's group defaults (KIP-848 heartbeats every 5 s,
classic consumers' ``heartbeat.interval.ms`` 3 s, ``group.initial.rebalance.delay.ms`` 0 so the
first ten form their group at once); a producer thread writes ``--rate`` records/s round-robin to a
topic of ``--partitions`` partitions. Per protocol: ten confluent-kafka consumers, each polled by
its own thread (``fetch.wait.max.ms`` 50), consume until every one received records in the last
second; then the 11th starts. Printed per protocol: **join** — seconds from the 11th's start to its first record; and
**pause** — the longest gap without records that any of the ten saw between the 11th's start and
5 s after its first record (their baseline gap before the join beside it, for scale). Figures are
what this machine gave; nothing is asserted (docs/architecture.md, ``bench/``).
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded import EmbeddedBroker

MODES: dict[str, dict[str, Any]] = {
    "classic eager (range)": {"partition.assignment.strategy": "range"},
    "classic cooperative-sticky": {"partition.assignment.strategy": "cooperative-sticky"},
    "KIP-848 consumer": {"group.protocol": "consumer"},
}


@dataclass
class Member:
    """One consumer on its own polling thread; ``times`` are the monotonic times of its records."""

    consumer: Any
    times: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            msg = self.consumer.poll(0.05)
            if msg is not None and not msg.error():
                self.times.append(time.monotonic())


def start_member(bootstrap: str, group: str, topic: str, extra: dict[str, Any]) -> tuple[Member, threading.Thread]:
    conf = {
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
        "fetch.wait.max.ms": 50,  # short fetch waits: a gap in records is the rebalance, not batching
        **extra,
    }  # fmt: skip
    member = Member(Consumer(conf))
    member.consumer.subscribe([topic])
    thread = threading.Thread(target=member.run, daemon=True)
    thread.start()
    return member, thread


def longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t <= end]
    points = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(points))


def wait_until(condition: Any, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def one_mode(bootstrap: str, topic: str, extra: dict[str, Any]) -> tuple[float, float, float]:
    group = f"rebalance-{uuid.uuid4().hex[:8]}"
    members: list[tuple[Member, threading.Thread]] = []
    try:
        for _ in range(10):
            members.append(start_member(bootstrap, group, topic, extra))

        def all_busy() -> bool:
            now = time.monotonic()
            return all(m.times and now - m.times[-1] < 1.0 for m, _ in members)

        wait_until(all_busy, "ten busy consumers")
        time.sleep(3.0)  # a steady state to measure the baseline gap in
        started = time.monotonic()
        baseline = max(longest_gap(m.times, started - 3.0, started) for m, _ in members)
        newcomer = start_member(bootstrap, group, topic, extra)
        members.append(newcomer)
        wait_until(lambda: bool(newcomer[0].times), "the 11th consumer's first record")
        first = newcomer[0].times[0]
        time.sleep(5.0)
        pause = max(longest_gap(m.times, started, first + 5.0) for m, _ in members[:10])
        return first - started, pause, baseline
    finally:
        for member, thread in members:
            member.stop.set()
            thread.join(10)
            member.consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=22)
    parser.add_argument("--rate", type=int, default=2000, help="records per second produced")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedBroker(
            Path(tmp), overrides={"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"}
        ) as broker,
    ):
        bootstrap = broker.bootstrap_servers
        topic = f"rebalance-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(60)
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            interval = 1.0 / args.rate
            next_at = time.monotonic()
            while not stop.is_set():
                producer.produce(topic, b"x" * 100)
                producer.poll(0)
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            producer.flush(30)

        producing = threading.Thread(target=produce, daemon=True)
        producing.start()
        rows = []
        try:
            for _ in range(args.rounds):
                for name, extra in MODES.items():
                    join_s, pause_s, baseline_s = one_mode(bootstrap, topic, extra)
                    rows.append((name, join_s, pause_s, baseline_s))
                    print(f"{name}: join {join_s:.2f} s, pause {pause_s:.2f} s (baseline gap {baseline_s:.2f} s)")
        finally:
            stop.set()
            producing.join(30)
    print()
    print(f"| protocol | 11th consuming after (s) | longest pause of the 10 (s) | baseline gap (s) |"
          f"  <- {args.partitions} partitions, {args.rate} rec/s")  # fmt: skip
    print("|---|---|---|---|")
    for name, join_s, pause_s, baseline_s in rows:
        print(f"| {name} | {join_s:.2f} | {pause_s:.2f} | {baseline_s:.2f} |")


if __name__ == "__main__":
    main()
