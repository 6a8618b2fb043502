"""Failover time: from a partition leader's SIGKILL (or SIGTERM) to the first acks=all produce
acknowledged by its successor (issue 12).

    .venv/bin/python bench/failover.py [--kills 20] [--session-timeout-ms 9000] [--combined]

Starts 3 controllers + 3 brokers (``--combined``: three ``broker,controller`` nodes) on loopback
(``EmbeddedCluster``) and a topic of replication factor 3 with min.insync.replicas 2. Each round
finds the partition's leader, starts the clock, sends it SIGKILL (then, in the second series,
SIGTERM: a controlled shutdown), and has a confluent-kafka producer (acks=all, idempotent,
``retry.backoff.ms=50``) send one record after another until one is acknowledged; that moment
stops the clock. The broker is then restarted and the round waits until it is back in the ISR.
Printed: every round, then p50 and max per series, next to the targets (SIGKILL ≤
``broker.session.timeout.ms`` + 1 s, controlled shutdown ≤ 1 s). Beside the end-to-end figure, a
watcher thread asks every surviving broker's Metadata every 10 ms and records when the last of
them names the new leader: the broker side of the failover, without the client's own pacing
(librdkafka re-queries a partition's leader on its own timers).

With ``--combined`` a killed node may also have been the metadata quorum's leader: the new
controller first needs an election and then waits a whole session timeout before fencing, so
expect up to about twice the session timeout there.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster


def wait(condition, what: str, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            result = condition()
        except (OSError, KeyError, ValueError):
            result = None
        if result:
            return result
        time.sleep(0.02)
    raise TimeoutError(f"timed out waiting for {what}")


def first_ack_after(producer: Producer, topic: str, started: float) -> float:
    """Seconds from ``started`` until one record is acknowledged (sending one after another)."""
    while True:
        outcome: list[KafkaError | None] = []
        producer.produce(topic, value=b"probe", partition=0, on_delivery=lambda err, _m, sink=outcome: sink.append(err))
        producer.flush(120)
        if outcome and outcome[0] is None:
            return time.monotonic() - started


def metadata_moved(cluster: EmbeddedCluster, topic: str, old_leader: int, survivors: tuple[int, ...], started: float):
    """Seconds from ``started`` until every survivor's Metadata names a leader other than
    ``old_leader`` (None if that did not happen within 60 s)."""
    pending = set(survivors)
    while pending and time.monotonic() - started < 60:
        for b in sorted(pending):
            try:
                leader = cluster.partitions(topic, via=b)[0].leader
            except (OSError, KeyError, ValueError):
                continue
            if leader >= 0 and leader != old_leader:
                pending.discard(b)
        time.sleep(0.01)
    return None if pending else time.monotonic() - started


def one_round(
    cluster: EmbeddedCluster, topic: str, brokers: tuple[int, ...], sig: signal.Signals
) -> tuple[float, float | None]:
    leader = wait(lambda: cluster.partitions(topic)[0].leader, "a leader")
    node = cluster.nodes[leader]
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap(tuple(b for b in brokers if b != leader)),
            "acks": "all",
            "enable.idempotence": True,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 100,
            "linger.ms": 0,
            "message.timeout.ms": 120000,
        }
    )
    producer.produce(topic, value=b"warm-up", partition=0)
    producer.flush(30)
    survivors = tuple(b for b in brokers if b != leader)
    moved: list[float | None] = []
    started = time.monotonic()
    watcher = threading.Thread(target=lambda: moved.append(metadata_moved(cluster, topic, leader, survivors, started)))
    assert node.pid is not None
    if sig == signal.SIGKILL:
        os.killpg(node.pid, sig)  # the broker and its helper processes: a crash
    else:
        os.kill(node.pid, sig)
    watcher.start()
    elapsed = first_ack_after(producer, topic, started)
    watcher.join()
    if sig == signal.SIGKILL:
        node.kill()  # reap it
    else:
        node.stop()
    cluster.restart(leader)
    wait(lambda: set(cluster.partitions(topic)[0].isr) == set(brokers), "the ISR whole again")
    return elapsed, moved[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--session-timeout-ms", type=int, default=9000)
    parser.add_argument("--combined", action="store_true")
    args = parser.parse_args()
    brokers = (1, 2, 3) if args.combined else (4, 5, 6)
    overrides = {
        "broker.session.timeout.ms": str(args.session_timeout_ms),
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
    }
    results: dict[str, list[float]] = {"SIGKILL": [], "SIGTERM (controlled shutdown)": []}
    in_metadata: dict[str, list[float]] = {name: [] for name in results}
    with (
        tempfile.TemporaryDirectory(prefix="bench-failover-") as root,
        EmbeddedCluster(Path(root), brokers=brokers, combined=args.combined, overrides=overrides) as cluster,
    ):
        topic = f"failover-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
        wait(lambda: set(cluster.partitions(topic)[0].isr) == set(brokers), "the topic")
        for name, sig in (("SIGKILL", signal.SIGKILL), ("SIGTERM (controlled shutdown)", signal.SIGTERM)):
            for i in range(args.kills):
                elapsed, moved = one_round(cluster, topic, brokers, sig)
                results[name].append(elapsed)
                if moved is not None:
                    in_metadata[name].append(moved)
                shown = "not seen" if moved is None else f"{moved:.3f} s"
                print(f"{name} {i + 1}/{args.kills}: first acks=all produce after {elapsed:.3f} s "
                      f"(new leader in every survivor's metadata after {shown})", flush=True)  # fmt: skip
    target = {"SIGKILL": args.session_timeout_ms / 1000 + 1, "SIGTERM (controlled shutdown)": 1.0}
    print(f"\n{'combined nodes' if args.combined else '3 controllers + 3 brokers'}, "
          f"broker.session.timeout.ms={args.session_timeout_ms}:")  # fmt: skip
    for name, values in results.items():
        print(f"{name}: p50 {statistics.median(values):.3f} s, max {max(values):.3f} s "
              f"over {len(values)} (target ≤ {target[name]:.1f} s)")  # fmt: skip
        seen = in_metadata[name]
        if seen:
            print(f"  new leader in every survivor's metadata: p50 {statistics.median(seen):.3f} s, "
                  f"max {max(seen):.3f} s over {len(seen)}")  # fmt: skip


if __name__ == "__main__":
    main()
