"""pylog beside Apache Kafka, one run, same machine, same settings, same clients (issue #26).

    .venv/bin/python bench/vs_kafka.py [--quick] [--only produce,consume,latency,startup,restart,
        memory,groups,failover] [--consume-bytes 2e9] [--restart-bytes 10e9] [--rate 20000] ...

Each broker is started in turn (pylog, then Kafka, for every deployment) on loopback temp dirs:

* **pylog**: ``EmbeddedBroker(kraft=True)`` (1 node) and ``EmbeddedCluster(combined=True)`` (3 nodes),
  each a ``python -m broker`` process (``broker,controller`` roles, its own KIP-595 quorum);
* **Kafka**: ``tests.apache_kafka.ApacheKafkaCluster`` (the cached Apache Kafka jars, combined KRaft
  nodes) with ``KAFKA_SERVER_JVM_OPTS``, the JVM options of ``kafka-server-start.sh`` (1 GiB heap, G1).

Both get the same settings: the brokers' defaults for flushing (``log.flush.interval.messages`` /
``log.flush.interval.ms`` unset: no fsync per message or per interval, the OS writes back the page
cache; segments are fsynced on roll and on clean shutdown — docs/operations.md), 1 GiB segments,
50 ``__consumer_offsets`` partitions, plus these overrides on both: ``socket.send.buffer.bytes`` and
``socket.receive.buffer.bytes`` = -1 (OS autotuning; pylog's default, Kafka's is 100 KiB),
``group.initial.rebalance.delay.ms=0`` (what the tests' brokers use), and the internal topics'
replication factor = the node count (min.isr 2 on 3 nodes). Topics are created up front: 3
partitions for throughput (RF 3 and ``min.insync.replicas=2`` on 3 nodes), 1 partition for latency.

The clients are the same for both brokers: confluent-kafka (librdkafka) from this process, and
Kafka's own perf tools in a JVM (``kafka-producer-perf-test``, ``kafka-consumer-perf-test``,
``kafka-e2e-latency``, run with their scripts' ``-Xmx512m`` and Kafka's G1 options). Sections:

* ``produce``: 100 B and 1 KiB values, no keys, no compression, linger.ms=5, batch.size=1000000,
  5 in flight; acks=1 on 1 node, and acks=all + idempotence on 3 nodes (RF 3). records/s;
* ``consume``: a topic of ``--consume-bytes`` of 1 KiB values (written first with acks=1, and
  replicated: the high watermark at the log end), read from the start: confluent-kafka assigned
  to every partition (from ``assign`` to the last record; ``fetch.queue.backoff.ms=10``: with
  librdkafka's 1 s a full prefetch queue idles the fetcher, and the faster broker idles more)
  and ``kafka-consumer-perf-test`` (its fetch rate, without its group join). MB/s of values, 1
  node and 3 nodes. The data sits in the page cache (the machine's RAM holds it);
* ``latency``: a confluent-kafka producer paced at ``--rate`` msg/s (1 KiB values, linger.ms
  ``--latency-linger-ms``, librdkafka's default 5) for ``--latency-seconds``, the send time
  (``time.monotonic_ns``) in the value, a consumer in another process measuring receive - send;
  p50/p99/p99.9 (first 10 % dropped as warm-up). 1 node acks=1, 3 nodes RF 3 acks=all (with
  idempotence). Beside it ``kafka-e2e-latency`` (one record at a time, acks as above, its own
  percentiles in whole milliseconds);
* ``startup``: from the process start (after ``kafka-storage format`` for Kafka; pylog formats
  itself) to the first acknowledged produce (acks=1, auto-created topic), 1 node;
* ``restart``: 1 node holding ``--restart-bytes`` (3 partitions, 1 KiB values): SIGKILL right after
  writing (recovery of unflushed segments), then a clean stop (SIGTERM); after each, the time from
  the process start to the first acknowledged produce and to the first record fetched from offset 0;
* ``memory``: resident memory (VmRSS from /proc, the broker process and its children) of the 1
  node idle (after start-up and a settle), its peak under the produce/consume/latency load, and the
  3 nodes idle (sum);
* ``groups``: 10 confluent-kafka consumers subscribing to a 12-partition topic in one group, time
  until all hold a disjoint assignment covering the 12 partitions; then an 11th, time until all 11
  are assigned again (eager range assignor, librdkafka's default; ``heartbeat.interval.ms=500``,
  as members learn of a rebalance from a heartbeat's answer: with librdkafka's 3 s every figure is
  about 3 s on both brokers);
* ``failover``: ``bench/failover.py``'s round on both: SIGKILL of the partition leader (3 nodes,
  RF 3, min.isr 2) to the first acknowledged acks=all produce; the node restarted and back in the
  ISR before the next round (median of ``--failover-rounds``).

A final markdown table gives pylog, Kafka and the ratio pylog/Kafka beside the issue's targets
(consume ≥ 1.0×, produce ≥ 0.7×, RF 3 acks=all throughput ≥ 0.5× and p99 ≤ 2×, start-up and restart
≤ 0.5×, idle memory ≤ 0.5×). For times, latencies and memory lower is better, so their targets are
upper bounds on the ratio. Nothing is asserted: the figures are what this machine gave in this run.

``--quick`` scales every size down (a smoke check, about a minute per section, whose figures are
dominated by fixed costs: only the full run's ratios mean anything); ``--nodes 1`` or ``--nodes 3``
runs one kind of deployment. The full run wants a quiet machine (on 2 cores the clients, the JVMs
and the brokers compete: figures swing by 2x under other load) and, one deployment at a time, disk
for the largest: the restart node (``--restart-bytes``, 10 GB) or the 3 nodes (3 replicas of
``--consume-bytes`` plus the produce and latency topics, about 8.5 GB): about 10.5 GB peak with
the defaults, and RAM to keep it in the page cache. Every deployment's temp dir (``$TMPDIR``) is
removed when it stops, also on errors and Ctrl-C. It takes roughly half an hour (an estimate: not
run here at full size).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.broker_throughput import latency_phase
from bench.failover import one_round
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import EmbeddedCluster, free_port, partitions
from tests.apache_kafka import KAFKA_SERVER_JVM_OPTS, ApacheKafkaCluster, kafka_tool, kafka_version

SECTIONS = ("produce", "consume", "latency", "startup", "restart", "memory", "groups", "failover")
SINGLE_SECTIONS = {"produce", "consume", "latency", "startup", "memory", "groups"}
CLUSTER_SECTIONS = {"produce", "consume", "latency", "memory", "failover"}
BROKERS = ("pylog", "Kafka")
# kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh heap, kafka-run-class.sh's G1 options
PERF_JVM_OPTS = (
    "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
)  # fmt: skip
SAME_SETTINGS = {
    "socket.send.buffer.bytes": "-1",
    "socket.receive.buffer.bytes": "-1",
    "group.initial.rebalance.delay.ms": "0",
}
CLIENT_PRODUCE = {"linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none",
                  "max.in.flight.requests.per.connection": 5}  # fmt: skip
FILL_VALUE_BYTES = 1024
THROUGHPUT_PARTITIONS = 3
DEADLINE_S = 120.0
PROBE_DEADLINE_S = 1800.0  # a restart that recovers 10 GB may take minutes
# members learn of a rebalance from a heartbeat's answer: every 0.5 s instead of librdkafka's 3 s,
# so that the group times show the brokers' work rather than the clients' heartbeat timer
GROUP_HEARTBEAT_MS = 500


# -- the deployments ---------------------------------------------------------------------------------


def broker_overrides(nodes: int) -> dict[str, str]:
    """The settings both brokers get beyond their defaults (see the module docstring)."""
    return {
        **SAME_SETTINGS,
        "offsets.topic.replication.factor": str(min(3, nodes)),
        "transaction.state.log.replication.factor": str(min(3, nodes)),
        "transaction.state.log.min.isr": str(min(2, nodes)),
    }


class Deployment:
    """One running pylog or Kafka deployment of 1 or 3 combined nodes, as every section sees it.

    ``launch`` starts the process(es) without waiting (the 1-node start-up is timed from it),
    ``ready`` waits until they serve; ``close`` stops them (the caller removes ``root``)."""

    def __init__(self, broker: str, root: Path, nodes: int) -> None:
        self.broker = broker
        self.root = root
        self.ids = (1,) if nodes == 1 else (1, 2, 3)
        overrides = broker_overrides(nodes)
        self.single: EmbeddedBroker | None = None
        self.cluster: EmbeddedCluster | ApacheKafkaCluster
        if broker == "pylog" and nodes == 1:
            self.port = free_port()
            self.single = EmbeddedBroker(
                root / "node-1", port=self.port, overrides=overrides, kraft=True, start_timeout_s=PROBE_DEADLINE_S
            )
        elif broker == "pylog":
            self.cluster = EmbeddedCluster(root, brokers=self.ids, combined=True, overrides=overrides)
        else:
            self.cluster = ApacheKafkaCluster(
                root, brokers=self.ids, overrides=overrides, jvm_opts=KAFKA_SERVER_JVM_OPTS
            )

    def launch(self) -> float:
        """Start without waiting; the monotonic time just before the process was started (1 node),
        or after every node served (3 nodes: not timed)."""
        if self.single is not None:
            started = time.monotonic()
            self.single.start(wait=False)
            return started
        if isinstance(self.cluster, ApacheKafkaCluster) and len(self.ids) == 1:
            self.cluster.prepare()  # kafka-storage format: not part of the timed start
            started = time.monotonic()
            self.cluster.nodes[1].start()
            return started
        self.cluster.start()
        return time.monotonic()

    def ready(self) -> None:
        if self.single is not None:
            self.single.wait_ready()
        elif isinstance(self.cluster, ApacheKafkaCluster):
            self.cluster.wait_ready()

    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}" if self.single is not None else self.cluster.bootstrap()

    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.port}" if self.single is not None else self.cluster.address(node_id)

    def pids(self) -> list[int]:
        if self.single is not None:
            return [self.single.pid] if self.single.running and self.single.pid else []
        return [n.pid for n in self.cluster.nodes.values() if n.running and n.pid is not None]

    def stop_node(self) -> None:
        """Clean stop (SIGTERM, wait) of the single node."""
        if self.single is not None:
            self.single.stop(timeout_s=300)
        else:
            self.cluster.nodes[1].stop(timeout_s=300)

    def kill_node(self) -> None:
        """SIGKILL of the single node (and its helper processes)."""
        if self.single is not None:
            self.single.kill()
        else:
            self.cluster.kill(1)

    def relaunch_node(self) -> float:
        """Start the stopped single node again on its data and port; the time before the start."""
        started = time.monotonic()
        if self.single is not None:
            self.single.start(wait=False)
        else:
            self.cluster.nodes[1].start()
        return started

    def close(self) -> None:
        if self.single is not None:
            self.single.stop()
        else:
            self.cluster.close()


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = DEADLINE_S) -> Any:
    """Poll ``condition`` until it returns something true; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError, KeyError, ValueError, StopIteration):
            result = condition()
            if result:
                return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


def create_topic(dep: Deployment, partition_count: int, replicas: int, prefix: str) -> str:
    """A new topic, once every node's metadata shows every partition led with a full ISR."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    config = {"min.insync.replicas": "2"} if replicas >= 3 else {}
    admin = AdminClient({"bootstrap.servers": dep.bootstrap()})
    admin.create_topics([NewTopic(name, partition_count, replicas, config=config)])[name].result(DEADLINE_S)

    def settled() -> bool:
        for n in dep.ids:
            view = partitions(dep.address(n), name)
            if len(view) != partition_count or any(p.leader < 0 or len(p.isr) < replicas for p in view.values()):
                return False
        return True

    wait_for(settled, f"topic {name} on every node")
    return name


def warm_up_group(bootstrap: str, topic: str) -> None:
    """One consumer joins a group until assigned: ``__consumer_offsets`` is created and its
    coordinators loaded before anything is timed."""
    assigned = threading.Event()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"warm-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic], on_assign=lambda _c, _p: assigned.set())
    deadline = time.monotonic() + DEADLINE_S
    while not assigned.is_set():
        consumer.poll(0.1)
        if time.monotonic() > deadline:
            raise TimeoutError("the warm-up consumer was never assigned")
    consumer.close()


# -- memory --------------------------------------------------------------------------------------------


def tree_rss_bytes(pids: list[int]) -> int:
    """VmRSS of every process in ``pids`` and of all their descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo, seen = 0, list(pids), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(children.get(pid, ()))
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


class RssPeak:
    """The largest tree RSS of a deployment sampled every 200 ms while a ``with`` block runs."""

    def __init__(self, dep: Deployment) -> None:
        self.dep = dep
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, tree_rss_bytes(self.dep.pids()))

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss_bytes(self.dep.pids()))


# -- clients -------------------------------------------------------------------------------------------


def produce_all(bootstrap: str, topic: str, count: int, size: int, acks: str, idempotent: bool) -> float:
    """confluent-kafka: ``count`` values of ``size`` bytes (no key) after a warm-up record per
    partition (a connection to every leader); the seconds from the first ``produce`` to the end of
    ``flush``. Raises on any failed delivery."""
    failures: list[KafkaError] = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": idempotent, **CLIENT_PRODUCE,
        "delivery.report.only.error": True, "on_delivery": lambda err, _msg: failures.append(err),
    })  # fmt: skip
    for partition in range(len(producer.list_topics(topic, timeout=30).topics[topic].partitions)):
        producer.produce(topic, b"warm-up", partition=partition)
    if producer.flush(DEADLINE_S) or failures:
        raise RuntimeError(f"the warm-up records were not delivered: {failures[:3]}")
    value = os.urandom(size)
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.005)
        if i % 1000 == 0:
            poll(0)
    left = producer.flush(600)
    elapsed = time.perf_counter() - start
    if left or failures:
        raise RuntimeError(f"{left} records undelivered, {len(failures)} failed: {failures[:3]}")
    return elapsed


def consume_all(bootstrap: str, topic: str, partition_count: int, count: int) -> tuple[float, int]:
    """confluent-kafka assigned to every partition from the start: seconds from ``assign`` until
    ``count`` records, and the value bytes read."""
    # librdkafka stops fetching a partition for fetch.queue.backoff.ms (default 1000) whenever its
    # prefetch queue is full, i.e. whenever the broker delivers faster than this Python loop
    # drains; with the default the figure is that sleep, not the broker (both brokers alike)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         "fetch.queue.backoff.ms": 10})  # fmt: skip
    got = nbytes = 0
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partition_count)])
    deadline = time.monotonic() + 1800
    while got < count:
        for msg in consumer.consume(min(10000, count - got), 1.0):  # never waits out the timeout at the end
            if msg.error() is not None:
                raise RuntimeError(msg.error())
            got += 1
            nbytes += len(msg.value())
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumed {got} of {count}")
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed, nbytes


def perf_produce(bootstrap: str, topic: str, count: int, size: int, acks: str, idempotent: bool) -> float:
    """``kafka-producer-perf-test`` with the same producer settings; its records/s."""
    props = {"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": str(idempotent).lower(),
             **{k: str(v) for k, v in CLIENT_PRODUCE.items()}}  # fmt: skip
    done = kafka_tool(
        "kafka-producer-perf-test", "--topic", topic, "--num-records", str(count), "--record-size", str(size),
        "--throughput", "-1", "--producer-props", *(f"{k}={v}" for k, v in props.items()),
        timeout_s=1800, jvm_opts=PERF_JVM_OPTS,
    )  # fmt: skip
    match = re.search(r"(\d+) records sent, ([\d.]+) records/sec", done.stdout)
    if done.returncode != 0 or match is None or int(match.group(1)) != count:
        raise RuntimeError(f"kafka-producer-perf-test failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return float(match.group(2))


def perf_consume(bootstrap: str, topic: str, count: int) -> float:
    """``kafka-consumer-perf-test`` reading ``count`` records; its fetch rate in records/s (the
    time after its group join)."""
    done = kafka_tool(
        "kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(count),
        "--group", f"perf-{uuid.uuid4().hex[:6]}", "--timeout", "60000", timeout_s=1800, jvm_opts=PERF_JVM_OPTS,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if done.returncode != 0 or header is None or header + 1 >= len(lines):
        raise RuntimeError(f"kafka-consumer-perf-test failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    row = dict(zip([h.strip() for h in lines[header].split(",")], [v.strip() for v in lines[header + 1].split(",")],
                   strict=False))  # fmt: skip
    if int(row["data.consumed.in.nMsg"]) < count:
        raise RuntimeError(f"kafka-consumer-perf-test read {row['data.consumed.in.nMsg']} of {count}")
    return float(row["fetch.nMsg.sec"])


def perf_e2e(bootstrap: str, topic: str, count: int, acks: str, size: int) -> tuple[float, float, float]:
    """``kafka-e2e-latency`` (one record at a time): its p50, p99, p99.9 in ms."""
    done = kafka_tool("kafka-e2e-latency", bootstrap, topic, str(count), acks, str(size),
                      timeout_s=1800, jvm_opts=PERF_JVM_OPTS)  # fmt: skip
    match = re.search(r"50th = (\d+), 99th = (\d+), 99\.9th = (\d+)", done.stdout)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"kafka-e2e-latency failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    p50, p99, p999 = (float(g) for g in match.groups())
    return p50, p99, p999


def paced_latency(
    bootstrap: str, topic: str, rate: int, seconds: float, acks: str, linger_ms: float
) -> tuple[list[float], float]:
    """A producer paced at ``rate`` msg/s for ``seconds`` (1 KiB values stamped with their send
    time), a consumer process measuring each arrival; latencies in ms (the first 10 % dropped) and
    the rate achieved."""
    config = {"acks": acks, "enable.idempotence": acks == "all", "linger.ms": linger_ms, "socket.nagle.disable": True}
    latencies, achieved = latency_phase(
        bootstrap, rate, seconds, topic=topic, producer_config=config, value_bytes=FILL_VALUE_BYTES,
        deadline_s=DEADLINE_S,
    )  # fmt: skip
    steady = sorted(ns / 1e6 for ns in latencies[len(latencies) // 10 :])
    return steady, achieved


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fast_reconnect() -> dict[str, object]:
    """librdkafka settings that retry a refused connection and an unknown topic every ~50 ms,
    so that a start-up is seen when it happens, not at the next exponential back-off."""
    return {"log_level": 0, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 50, "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 50, "topic.metadata.refresh.fast.interval.ms": 20,
            "socket.connection.setup.timeout.ms": 1000}  # fmt: skip


def first_ack(bootstrap: str, topic: str, started: float) -> float:
    """Seconds from ``started`` until a produce (acks=1) to ``topic`` is acknowledged, one record
    after another (a refused or failed one is retried)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0, "message.timeout.ms": 5000,
                         **fast_reconnect()})  # fmt: skip
    deadline = started + PROBE_DEADLINE_S
    while time.monotonic() < deadline:
        outcome: list[KafkaError | None] = []
        producer.produce(topic, b"probe", partition=0, on_delivery=lambda err, _m, sink=outcome: sink.append(err))
        producer.flush(10)
        if outcome and outcome[0] is None:
            return time.monotonic() - started
    raise TimeoutError(f"no produce acknowledged in {PROBE_DEADLINE_S:.0f} s")


def first_fetch(bootstrap: str, topic: str, started: float) -> float:
    """Seconds from ``started`` until the record at offset 0 of ``topic``-0 is fetched."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "enable.partition.eof": False, **fast_reconnect()})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = started + PROBE_DEADLINE_S
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None and msg.offset() == 0:
                return time.monotonic() - started
        raise TimeoutError(f"offset 0 not fetched in {PROBE_DEADLINE_S:.0f} s")
    finally:
        consumer.close()


class GroupMember(threading.Thread):
    """A confluent-kafka consumer of the group polling in its own thread; ``assigned`` is the set
    of partitions its last (eager) assignment gave it."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                       "heartbeat.interval.ms": GROUP_HEARTBEAT_MS}  # fmt: skip
        self.topic = topic
        self.assigned: frozenset[int] = frozenset()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _on_assign(self, _consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.assigned = frozenset(p.partition for p in parts)

    def _on_revoke(self, _consumer: Consumer, _parts: list[TopicPartition]) -> None:
        self.assigned = frozenset()

    def run(self) -> None:
        try:
            consumer = Consumer(self.config)
            consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self.stop.is_set():
                consumer.poll(0.02)
            consumer.close()
        except BaseException as exc:
            self.error = exc


def all_assigned(members: list[GroupMember], partition_count: int) -> bool:
    sets = [m.assigned for m in members]
    if any(m.error for m in members):
        raise RuntimeError(f"a group member failed: {next(m.error for m in members if m.error)}")
    return all(sets) and sum(map(len, sets)) == partition_count and len(frozenset().union(*sets)) == partition_count


# -- results -------------------------------------------------------------------------------------------


@dataclass
class Metric:
    label: str
    unit: str  # "rec/s", "MB/s", "ms", "s", "MB"
    target: str = ""  # e.g. ">= 0.7"; a "<=" target means lower is better
    values: dict[str, float] = field(default_factory=dict)

    @property
    def lower_is_better(self) -> bool:
        return self.unit in ("ms", "s", "MB")


class Results:
    def __init__(self) -> None:
        self.metrics: dict[str, Metric] = {}
        self.errors: list[str] = []

    def add(self, key: str, label: str, unit: str, broker: str, value: float, target: str = "") -> None:
        metric = self.metrics.setdefault(key, Metric(label, unit, target))
        metric.values[broker] = value
        print(f"  {broker:5s} {label}: {fmt(value, unit)}", flush=True)

    def table(self) -> str:
        rows = ["| metric | pylog | Kafka | ratio pylog/Kafka | target |", "|---|---|---|---|---|"]
        for metric in self.metrics.values():
            py, ka = metric.values.get("pylog"), metric.values.get("Kafka")
            ratio = f"{py / ka:.2f}×" if py is not None and ka else "—"
            target = metric.target
            if target and py is not None and ka:
                bound = float(target.split()[1])
                met = py / ka >= bound if target.startswith(">=") else py / ka <= bound
                target = f"{target}× {'met' if met else 'MISSED'}"
            if metric.lower_is_better:
                target = f"{target} (lower is better)".strip()
            cells = [fmt(v, metric.unit) if v is not None else "—" for v in (py, ka)]
            rows.append(f"| {metric.label} | {cells[0]} | {cells[1]} | {ratio} | {target or '—'} |")
        return "\n".join(rows)


def fmt(value: float, unit: str) -> str:
    if unit == "rec/s":
        return f"{value:,.0f} rec/s"
    if unit in ("MB/s", "MB"):
        return f"{value:,.1f} {unit}"
    if unit == "ms":
        return f"{value:.2f} ms"
    return f"{value:.2f} s"


# -- sections ------------------------------------------------------------------------------------------


@dataclass
class Sizes:
    records_100b: int
    records_1k: int
    consume_bytes: int
    rate: int
    latency_seconds: float
    latency_linger_ms: float
    e2e_messages: int
    restart_bytes: int
    failover_rounds: int
    settle_s: float


def section(results: Results, name: str, broker: str) -> contextlib.AbstractContextManager[None]:
    """Run a section's block; an error is printed and recorded, and the run goes on."""

    @contextlib.contextmanager
    def guarded() -> Iterator[None]:
        print(f"[{broker}] {name}", flush=True)
        try:
            yield
        except Exception as exc:
            results.errors.append(f"{broker} {name}: {type(exc).__name__}: {str(exc)[:300]}")
            traceback.print_exc()

    return guarded()


def produce_section(dep: Deployment, results: Results, sizes: Sizes, nodes: int) -> None:
    broker, bs = dep.broker, dep.bootstrap()
    acks, idem = ("1", False) if nodes == 1 else ("all", True)
    mode = "acks=1, 1 node" if nodes == 1 else "acks=all+idempotence, 3 nodes RF 3"
    target = ">= 0.7" if nodes == 1 else ">= 0.5"
    for size, count in ((100, sizes.records_100b), (1024, sizes.records_1k)):
        label = f"{size} B" if size < 1024 else "1 KiB"
        topic = create_topic(dep, THROUGHPUT_PARTITIONS, len(dep.ids), "produce")
        seconds = produce_all(bs, topic, count, size, acks, idem)
        results.add(f"produce-{nodes}-{size}-ck", f"produce {label} {mode}, confluent-kafka", "rec/s", broker,
                    count / seconds, target)  # fmt: skip
        topic = create_topic(dep, THROUGHPUT_PARTITIONS, len(dep.ids), "produce-perf")
        rate = perf_produce(bs, topic, count, size, acks, idem)
        results.add(f"produce-{nodes}-{size}-perf", f"produce {label} {mode}, kafka-producer-perf-test", "rec/s",
                    broker, rate, target)  # fmt: skip


def wait_committed(bootstrap: str, topic: str, partitions: int, total: int) -> float:
    """Seconds until the high watermarks of ``topic``'s partitions add up to ``total`` records."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "enable.auto.commit": False})
    started = time.monotonic()
    try:
        while True:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            high = sum(consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in tps)
            if high >= total:
                return time.monotonic() - started
            if time.monotonic() - started > DEADLINE_S * 10:
                raise TimeoutError(f"{topic}: high watermarks reach {high} of {total} records")
            time.sleep(0.05)
    finally:
        consumer.close()


def consume_section(dep: Deployment, results: Results, sizes: Sizes, nodes: int) -> None:
    broker, bs = dep.broker, dep.bootstrap()
    topic = create_topic(dep, THROUGHPUT_PARTITIONS, len(dep.ids), "consume")
    count = max(1, sizes.consume_bytes // FILL_VALUE_BYTES)
    fill_s = produce_all(bs, topic, count, FILL_VALUE_BYTES, "1", False)
    print(f"  {broker:5s} (written {count * FILL_VALUE_BYTES / 1e6:,.0f} MB at "
          f"{count * FILL_VALUE_BYTES / 1e6 / fill_s:,.1f} MB/s, acks=1)", flush=True)  # fmt: skip
    total = count + THROUGHPUT_PARTITIONS  # and a warm-up record per partition
    where = "1 node" if nodes == 1 else "3 nodes RF 3"
    # the read is of committed data: with RF 3 the followers copy what acks=1 wrote, and a
    # consumer reads only up to the high watermark, so timing from here would time replication
    replicated_s = wait_committed(bs, topic, THROUGHPUT_PARTITIONS, total)
    print(f"  {broker:5s} (high watermark at the log end {replicated_s:.1f} s after the writes)", flush=True)
    seconds, nbytes = consume_all(bs, topic, THROUGHPUT_PARTITIONS, total)
    results.add(f"consume-{nodes}-ck", f"consume from the start, {where}, confluent-kafka", "MB/s", broker,
                nbytes / seconds / 1e6, ">= 1.0")  # fmt: skip
    rate = perf_consume(bs, topic, total)
    results.add(f"consume-{nodes}-perf", f"consume from the start, {where}, kafka-consumer-perf-test", "MB/s",
                broker, rate * FILL_VALUE_BYTES / 1e6, ">= 1.0")  # fmt: skip


def latency_section(dep: Deployment, results: Results, sizes: Sizes, nodes: int) -> None:
    broker, bs = dep.broker, dep.bootstrap()
    acks = "1" if nodes == 1 else "all"
    where = "1 node acks=1" if nodes == 1 else "3 nodes RF 3 acks=all"
    topic = create_topic(dep, 1, len(dep.ids), "latency")
    steady, achieved = paced_latency(bs, topic, sizes.rate, sizes.latency_seconds, acks, sizes.latency_linger_ms)
    if not steady:
        raise RuntimeError("the latency consumer measured nothing")
    print(f"  {broker:5s} (paced {sizes.rate}/s, achieved {achieved:,.0f}/s, {len(steady)} samples)", flush=True)
    for q, name in ((0.50, "p50"), (0.99, "p99"), (0.999, "p99.9")):
        target = "<= 2" if nodes == 3 and name == "p99" else ""
        results.add(f"latency-{nodes}-{name}", f"e2e latency {name}, {sizes.rate} msg/s, {where}, confluent-kafka",
                    "ms", broker, percentile(steady, q), target)  # fmt: skip
    topic = create_topic(dep, 1, len(dep.ids), "e2e")
    p50, p99, p999 = perf_e2e(bs, topic, sizes.e2e_messages, acks, FILL_VALUE_BYTES)
    for value, name in ((p50, "p50"), (p99, "p99"), (p999, "p99.9")):
        target = "<= 2" if nodes == 3 and name == "p99" else ""
        results.add(f"e2e-{nodes}-{name}", f"e2e latency {name}, one at a time, {where}, kafka-e2e-latency", "ms",
                    broker, value, target)  # fmt: skip


def groups_section(dep: Deployment, results: Results) -> None:
    broker, bs = dep.broker, dep.bootstrap()
    topic = create_topic(dep, 12, 1, "groups")
    group = f"bench-group-{uuid.uuid4().hex[:6]}"
    members = [GroupMember(bs, group, topic) for _ in range(10)]
    try:
        started = time.monotonic()
        for m in members:
            m.start()
        wait_for(lambda: all_assigned(members, 12), "10 consumers assigned")
        results.add("groups-10", "group: 10 consumers joined and assigned (12 partitions)", "s", broker,
                    time.monotonic() - started)  # fmt: skip
        members.append(GroupMember(bs, group, topic))
        started = time.monotonic()
        members[-1].start()
        wait_for(lambda: all_assigned(members, 12), "11 consumers assigned")
        results.add("groups-11", "group: an 11th consumer joined and all assigned", "s", broker,
                    time.monotonic() - started)  # fmt: skip
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(60)


def failover_section(dep: Deployment, results: Results, sizes: Sizes) -> None:
    assert dep.single is None
    topic = create_topic(dep, 1, 3, "failover")
    times = []
    for i in range(sizes.failover_rounds):
        elapsed, moved = one_round(dep.cluster, topic, dep.ids, signal.SIGKILL)  # type: ignore[arg-type]
        shown = "not seen" if moved is None else f"{moved:.2f} s"
        print(f"  {dep.broker:5s} round {i + 1}: first acks=all produce {elapsed:.2f} s after SIGKILL "
              f"(new leader in every survivor's metadata after {shown})", flush=True)  # fmt: skip
        times.append(elapsed)
    results.add("failover", "failover: leader SIGKILL to first acks=all produce, 3 nodes RF 3 (median)", "s",
                dep.broker, statistics.median(times))  # fmt: skip


def restart_probe(dep: Deployment, topic: str, started: float) -> tuple[float, float]:
    """After a (re)launch at ``started``: seconds to the first acknowledged produce and to the
    first fetch of offset 0, probed at the same time by two clients."""
    bs = dep.bootstrap()
    out: dict[str, float | BaseException] = {}

    def run(name: str, probe: Callable[[str, str, float], float]) -> None:
        try:
            out[name] = probe(bs, topic, started)
        except BaseException as exc:
            out[name] = exc

    threads = [threading.Thread(target=run, args=(n, p)) for n, p in (("ack", first_ack), ("fetch", first_fetch))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dep.ready()
    ack, fetch = out["ack"], out["fetch"]
    if isinstance(ack, BaseException):
        raise ack
    if isinstance(fetch, BaseException):
        raise fetch
    return ack, fetch


def restart_section(dep: Deployment, results: Results, sizes: Sizes) -> None:
    broker, bs = dep.broker, dep.bootstrap()
    topic = create_topic(dep, THROUGHPUT_PARTITIONS, 1, "restart")
    count = max(1, sizes.restart_bytes // FILL_VALUE_BYTES)
    fill_s = produce_all(bs, topic, count, FILL_VALUE_BYTES, "1", False)
    gb = count * FILL_VALUE_BYTES / 1e9
    print(f"  {broker:5s} (written {gb:,.2f} GB at {count * FILL_VALUE_BYTES / 1e6 / fill_s:,.1f} MB/s)", flush=True)
    dep.kill_node()
    ack, fetch = restart_probe(dep, topic, dep.relaunch_node())
    results.add("restart-kill-ack", f"restart after SIGKILL with {gb:.2f} GB: first produce acked", "s", broker, ack,
                "<= 0.5")  # fmt: skip
    results.add("restart-kill-fetch", f"restart after SIGKILL with {gb:.2f} GB: first old record fetched", "s",
                broker, fetch, "<= 0.5")  # fmt: skip
    stop_started = time.monotonic()
    dep.stop_node()
    print(f"  {broker:5s} (clean stop took {time.monotonic() - stop_started:.2f} s)", flush=True)
    ack, fetch = restart_probe(dep, topic, dep.relaunch_node())
    results.add("restart-clean-ack", f"restart after clean stop with {gb:.2f} GB: first produce acked", "s", broker,
                ack, "<= 0.5")  # fmt: skip
    results.add("restart-clean-fetch", f"restart after clean stop with {gb:.2f} GB: first old record fetched", "s",
                broker, fetch, "<= 0.5")  # fmt: skip


def run_single(broker: str, root: Path, results: Results, only: set[str], sizes: Sizes) -> None:
    """The 1-node deployment: start-up, idle memory, then produce/consume/latency (peak memory),
    consumer groups."""
    dep = Deployment(broker, root, 1)
    try:
        started = dep.launch()
        with section(results, "startup", broker):
            seconds = first_ack(dep.bootstrap(), "startup-probe", started)
            if "startup" in only:
                results.add("startup", "start-up: process start to first acked produce, 1 node", "s", broker,
                            seconds, "<= 0.5")  # fmt: skip
        dep.ready()
        warm = create_topic(dep, 1, 1, "warm")
        warm_up_group(dep.bootstrap(), warm)
        if "memory" in only:
            time.sleep(sizes.settle_s)  # a measurement of the settled idle process, not a synchronisation
            results.add("rss-idle-1", "memory: RSS idle, 1 node", "MB", broker, tree_rss_bytes(dep.pids()) / 1e6,
                        "<= 0.5")  # fmt: skip
        peak = RssPeak(dep) if "memory" in only else None
        with peak or contextlib.nullcontext():
            if "produce" in only:
                with section(results, "produce, 1 node", broker):
                    produce_section(dep, results, sizes, 1)
            if "consume" in only:
                with section(results, "consume, 1 node", broker):
                    consume_section(dep, results, sizes, 1)
            if "latency" in only:
                with section(results, "latency, 1 node", broker):
                    latency_section(dep, results, sizes, 1)
        if peak is not None and only & {"produce", "consume", "latency"}:
            results.add("rss-load-1", "memory: RSS peak under the produce/consume/latency load, 1 node", "MB", broker,
                        peak.peak / 1e6)  # fmt: skip
        if "groups" in only:
            with section(results, "groups", broker):
                groups_section(dep, results)
    finally:
        dep.close()


def run_cluster(broker: str, root: Path, results: Results, only: set[str], sizes: Sizes) -> None:
    """The 3-node deployment: idle memory, produce/consume/latency at RF 3, failover."""
    dep = Deployment(broker, root, 3)
    try:
        dep.launch()
        warm = create_topic(dep, 1, 3, "warm")
        warm_up_group(dep.bootstrap(), warm)
        if "memory" in only:
            time.sleep(sizes.settle_s)
            results.add("rss-idle-3", "memory: RSS idle, 3 nodes (sum)", "MB", broker,
                        tree_rss_bytes(dep.pids()) / 1e6)  # fmt: skip
        for name, run in (("produce", produce_section), ("consume", consume_section), ("latency", latency_section)):
            if name in only:
                with section(results, f"{name}, 3 nodes", broker):
                    run(dep, results, sizes, 3)
        if "failover" in only:
            with section(results, "failover", broker):
                failover_section(dep, results, sizes)
    finally:
        dep.close()


def run_restart(broker: str, root: Path, results: Results, sizes: Sizes) -> None:
    dep = Deployment(broker, root, 1)
    try:
        dep.launch()
        dep.ready()
        with section(results, "restart", broker):
            restart_section(dep, results, sizes)
    finally:
        dep.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--quick", action="store_true", help="every size scaled down: a smoke check")
    parser.add_argument("--nodes", default="1,3", help="deployments to run: 1 node, 3 nodes or both (1,3)")
    parser.add_argument("--records-100b", type=int, help="records of 100 B per produce run (default 1,000,000)")
    parser.add_argument("--records-1k", type=int, help="records of 1 KiB per produce run (default 200,000)")
    parser.add_argument("--consume-bytes", type=float, help="bytes of the consume topic (default 2e9)")
    parser.add_argument("--rate", type=int, default=20_000, help="paced latency rate, msg/s (default 20000)")
    parser.add_argument("--latency-seconds", type=float, help="length of the paced latency run (default 10)")
    parser.add_argument(
        "--latency-linger-ms", type=float, default=5.0, help="linger.ms of the paced producer (librdkafka's default 5)"
    )
    parser.add_argument("--e2e-messages", type=int, help="records of kafka-e2e-latency (default 5000)")
    parser.add_argument("--restart-bytes", type=float, help="bytes in the log before the restarts (default 10e9)")
    parser.add_argument("--failover-rounds", type=int, help="SIGKILL rounds (default 3)")
    args = parser.parse_args()
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    if only - set(SECTIONS):
        parser.error(f"unknown sections {sorted(only - set(SECTIONS))}; choose from {SECTIONS}")
    quick = args.quick

    def pick(given: float | None, full: float, small: float) -> float:
        return given if given is not None else (small if quick else full)

    sizes = Sizes(
        records_100b=int(pick(args.records_100b, 1_000_000, 20_000)),
        records_1k=int(pick(args.records_1k, 200_000, 5_000)),
        consume_bytes=int(pick(args.consume_bytes, 2e9, 20e6)),
        rate=args.rate,
        latency_seconds=pick(args.latency_seconds, 10.0, 1.0),
        latency_linger_ms=args.latency_linger_ms,
        e2e_messages=int(pick(args.e2e_messages, 5000, 200)),
        restart_bytes=int(pick(args.restart_bytes, 10e9, 20e6)),
        failover_rounds=int(pick(args.failover_rounds, 3, 1)),
        settle_s=1.0 if quick else 5.0,
    )
    print(f"pylog vs Apache Kafka {kafka_version()} on {os.cpu_count()} CPUs; sections {sorted(only)}; {sizes}")
    print(f"same broker settings on both (beyond defaults; no fsync per message): {SAME_SETTINGS}")
    print(f"Kafka JVM: {' '.join(KAFKA_SERVER_JVM_OPTS)}; perf tools JVM: {' '.join(PERF_JVM_OPTS)}", flush=True)
    results = Results()
    plans: list[tuple[str, Callable[[str, Path], None]]] = []
    nodes = {n.strip() for n in args.nodes.split(",")}
    if only & SINGLE_SECTIONS and "1" in nodes:
        plans.append(("1 node", lambda b, root: run_single(b, root, results, only, sizes)))
    if only & CLUSTER_SECTIONS and "3" in nodes:
        plans.append(("3 nodes", lambda b, root: run_cluster(b, root, results, only, sizes)))
    if "restart" in only and "1" in nodes:
        plans.append(("restart", lambda b, root: run_restart(b, root, results, sizes)))
    began = time.monotonic()
    for title, plan in plans:
        for broker in BROKERS:
            print(f"\n== {broker}, {title}", flush=True)
            root = Path(tempfile.mkdtemp(prefix=f"bench-vs-kafka-{broker.lower()}-"))
            try:
                with section(results, f"{title} deployment", broker):
                    plan(broker, root)
            finally:
                shutil.rmtree(root, ignore_errors=True)
    print(
        f"\n## pylog vs Apache Kafka {kafka_version()} (ratio = pylog / Kafka, same run; "
        f"{time.monotonic() - began:.0f} s, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)\n"
    )
    print(results.table())
    if results.errors:
        print("\nerrors:")
        for error in results.errors:
            print(f"- {error}")


if __name__ == "__main__":
    main()
