"""Apache Kafka, the reference: a real Kafka 4.x cluster and Kafka's own command-line tools.

The jars come from Maven Central through the checked-in recipe ``refs/kafka/pom.xml`` into the
ignored cache ``.refs/kafka/libs`` (``./dev refs``; ``kafka_libs()`` runs the same recipe when the
cache is missing). Nothing here is pylog code: the broker is ``kafka.Kafka`` in its own JVM,
formatted by ``kafka.tools.StorageTool``, and the tools are Kafka's main classes.

``ApacheKafkaCluster`` has the shape of ``pyspark_log.embedded_cluster.EmbeddedCluster`` (``start``,
``close``, ``kill``/``pause``/``resume``/``restart``, ``bootstrap``, ``address``, ``partitions``,
``broker_ids``) so that a test or benchmark can run the same scenario on either broker::

    with ApacheKafkaCluster(tmp / "kafka", brokers=(1, 2, 3)) as kafka:
        run_scenario(kafka.bootstrap())

Nodes are combined ``broker,controller`` KRaft nodes (KIP-595; Kafka's ``process.roles``), each
with a PLAINTEXT client listener and a CONTROLLER listener on free loopback ports. The topic
defaults match a pylog cluster of the same size (the internal topics' replication factor is the
node count, at most 3, as pylog caps it), and the first rebalance of a group is not delayed in
either (``group.initial.rebalance.delay.ms=0`` is what the tests' brokers use).

``kafka_tool("kafka-topics", "--bootstrap-server", b, "--list")`` runs one of Kafka's CLI tools by
its script name (the ``bin/*.sh`` of Kafka's distribution) and returns the completed process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from pyspark_log.embedded_cluster import CLUSTER_ID, PartitionView, free_port, partitions, request
from pyspark_log.wire import ApiKey
from tests.refs_cache import REPO, RefsUnavailable, cached_jars
from tests.waiting import Deadline

CACHE = REPO / ".refs" / "kafka" / "libs"
START_ATTEMPTS = 3
START_TIMEOUT_S = 120.0

# Kafka's bin/*.sh scripts and the main class each one runs (Kafka 4.x).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",  # KIP-932
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",  # reads KIP-630 .checkpoint files too
}

# JVM options of the tools and of test brokers: a small heap and the serial collector, as a test
# machine of 2 cores wants. Benchmarks pass Kafka's own (``KAFKA_SERVER_JVM_OPTS``).
TEST_JVM_OPTS = ("-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TOOL_JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# kafka-server-start.sh's heap and kafka-run-class.sh's performance options
KAFKA_SERVER_JVM_OPTS = (
    "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
)  # fmt: skip

_LOG4J2 = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
"""


class KafkaUnavailable(RefsUnavailable):
    """The reference jars could not be had (no Maven, no network to Maven Central)."""


def kafka_libs() -> Path:
    """The cache of Kafka's jars, filled by the recipe first if it is empty."""
    return cached_jars("kafka", "kafka_2.13-*.jar", KafkaUnavailable)


def kafka_version() -> str:
    """The version of the cached Kafka broker (e.g. ``4.1.1``)."""
    jar = next(kafka_libs().glob("kafka_2.13-*.jar"))
    return jar.stem.removeprefix("kafka_2.13-")


def _log4j_config() -> Path:
    path = CACHE.parent / "log4j2.yaml"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_LOG4J2)
    return path


def _java(main_class: str, args: Sequence[str], jvm_opts: Sequence[str]) -> list[str]:
    classpath = f"{kafka_libs()}/*"
    java = shutil.which("java") or "java"
    return [java, *jvm_opts, f"-Dlog4j2.configurationFile={_log4j_config()}", "-cp", classpath, main_class, *args]


def kafka_tool(
    script: str, *args: str, timeout_s: float = 120.0, input_text: str | None = None, check: bool = False,
    jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run Kafka's CLI tool ``script`` (e.g. ``kafka-topics``) with ``args``; its output as text."""
    command = _java(TOOLS[script], args, jvm_opts)
    return subprocess.run(command, input=input_text, capture_output=True, text=True, timeout=timeout_s, check=check)


def kafka_tool_process(script: str, *args: str, jvm_opts: Sequence[str] = TOOL_JVM_OPTS) -> subprocess.Popen[str]:
    """Start Kafka's CLI tool ``script`` as a long-running child (a verifiable consumer, say);
    stdin, stdout and stderr are pipes. The caller stops it (``terminate``/``kill``) in a finally."""
    command = _java(TOOLS[script], args, jvm_opts)
    return subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        start_new_session=True,
    )  # fmt: skip


class KafkaStartError(RuntimeError):
    """A Kafka node exited, or the cluster did not serve metadata in time; carries the output."""


class KafkaNode:
    """One ``kafka.Kafka`` process: its properties file, data directory and output."""

    def __init__(self, directory: Path, node_id: int, props: Mapping[str, str], jvm_opts: Sequence[str]) -> None:
        self.directory = directory
        self.node_id = node_id
        self.props = dict(props)
        self.jvm_opts = tuple(jvm_opts)
        self.data_dir = directory / "data"
        self.config_path = directory / "server.properties"
        self._proc: subprocess.Popen[str] | None = None
        self._output: deque[str] = deque(maxlen=400)
        self._pump: threading.Thread | None = None
        self.started_at = 0.0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        return "".join(self._output)

    def format(self) -> None:
        """``kafka-storage format`` of a new node (a formatted one is left as it is)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        if (self.data_dir / "meta.properties").exists():
            return
        config = str(self.config_path)
        done = kafka_tool("kafka-storage", "format", "-t", CLUSTER_ID, "-c", config, "--ignore-formatted")
        if done.returncode != 0:
            raise KafkaStartError(f"kafka-storage format failed on node {self.node_id}:\n{done.stdout}{done.stderr}")

    def start(self) -> None:
        if self.running:
            raise RuntimeError(f"node {self.node_id} already running")
        self.format()
        command = _java("kafka.Kafka", [str(self.config_path)], self.jvm_opts)
        self._proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True,
        )  # fmt: skip
        self.started_at = time.monotonic()
        self._pump = threading.Thread(target=self._pump_output, args=(self._proc,), daemon=True)
        self._pump.start()

    def _pump_output(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(self.directory / "kafka.out", "a", encoding="utf-8") as log_file:
            for line in proc.stdout:
                self._output.append(line)
                log_file.write(line)
                log_file.flush()

    def terminate(self) -> None:
        """SIGTERM: Kafka's controlled shutdown begins; ``stop`` waits for it."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM (Kafka's controlled shutdown) and wait; SIGKILL after ``timeout_s``."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self.terminate()
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._join_pump()

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        self._join_pump()

    def _join_pump(self) -> None:
        if self._pump is not None:
            self._pump.join(timeout=5)
            self._pump = None


class ApacheKafkaCluster:
    """Combined KRaft nodes of Apache Kafka on loopback; see the module docstring.

    ``overrides`` are server.properties keys given to every node (after the defaults).
    """

    def __init__(
        self, root: Path, *, brokers: tuple[int, ...] = (1, 2, 3), overrides: Mapping[str, str] | None = None,
        jvm_opts: Sequence[str] = TEST_JVM_OPTS, start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:  # fmt: skip
        self.root = root
        self.broker_ids = brokers
        self.controller_ids = brokers
        self.overrides = dict(overrides or {})
        self.jvm_opts = tuple(jvm_opts)
        self.start_timeout_s = start_timeout_s
        self.nodes: dict[int, KafkaNode] = {}
        self._client_ports: dict[int, int] = {}
        self._controller_ports: dict[int, int] = {}
        self.voters = ""

    def _props(self, node_id: int) -> dict[str, str]:
        internal_rf = str(min(3, len(self.broker_ids)))
        client, controller = self._client_ports[node_id], self._controller_ports[node_id]
        return {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{client}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.root / f"node-{node_id}" / "data"),
            "offsets.topic.replication.factor": internal_rf,
            "transaction.state.log.replication.factor": internal_rf,
            "transaction.state.log.min.isr": str(min(2, len(self.broker_ids))),
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }

    def _build(self) -> None:
        self._client_ports = {n: free_port() for n in self.broker_ids}
        self._controller_ports = {n: free_port() for n in self.broker_ids}
        self.voters = ",".join(f"{n}@127.0.0.1:{self._controller_ports[n]}" for n in self.broker_ids)
        self.nodes = {n: KafkaNode(self.root / f"node-{n}", n, self._props(n), self.jvm_opts) for n in self.broker_ids}

    def __enter__(self) -> ApacheKafkaCluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        """Format and start every node, then wait until each serves metadata naming all brokers;
        retried on fresh ports when one was taken meanwhile."""
        for attempt in range(START_ATTEMPTS):
            self._build()
            try:
                for node in self.nodes.values():
                    node.start()
                self.wait_ready()
                return
            except KafkaStartError as exc:
                outputs = self.outputs()
                self.close()
                if "Address already in use" not in str(exc) + outputs or attempt == START_ATTEMPTS - 1:
                    raise KafkaStartError(f"{exc}\n{outputs}") from None
                shutil.rmtree(self.root, ignore_errors=True)

    def prepare(self) -> None:
        """Choose the ports and format every node (``kafka-storage format``) without starting any:
        the caller starts ``nodes[n]`` itself (then ``wait_ready``), e.g. a benchmark that times a
        node's start apart from the format. No retry on a port taken meanwhile, unlike ``start``."""
        self._build()
        for node in self.nodes.values():
            node.format()

    def wait_ready(self, among: Sequence[int] | None = None) -> None:
        """Until every running node (or ``among``) answers Metadata with all running brokers."""
        ids = list(among) if among is not None else [n for n in self.broker_ids if self.nodes[n].running]
        deadline = Deadline(self.start_timeout_s)
        pending = set(ids)
        while pending:
            for n in sorted(pending):
                node = self.nodes[n]
                if not node.running:
                    raise KafkaStartError(f"Kafka node {n} exited during start")
                with contextlib.suppress(OSError, ConnectionError, ValueError):
                    body = {"topics": [], "allow_auto_topic_creation": False}
                    answer = request(self.address(n), ApiKey.METADATA, 12, body, timeout_s=5)
                    if {b.node_id for b in answer.brokers} >= set(ids):
                        pending.discard(n)
            if pending and deadline.expired():
                waited = f"{self.start_timeout_s} s"
                raise KafkaStartError(f"Kafka nodes {sorted(pending)} did not serve metadata in {waited}")
            if pending:
                time.sleep(0.2)

    def outputs(self) -> str:
        return "\n".join(f"--- kafka node {n}:\n{node.output()}" for n, node in self.nodes.items())

    def close(self, timeout_s: float = 60.0) -> None:
        """SIGTERM to every node at once, then wait (SIGKILL after ``timeout_s``): a combined node
        stopped after its peers would wait for a quorum that is gone."""
        for n, node in self.nodes.items():
            with contextlib.suppress(Exception):
                self.resume(n)
            with contextlib.suppress(Exception):
                node.terminate()
        deadline = Deadline(timeout_s)
        for node in self.nodes.values():
            with contextlib.suppress(Exception):
                node.stop(max(0.1, deadline.remaining_s()))

    # -- faults (real signals, as EmbeddedCluster's) -----------------------------------------------
    def kill(self, node_id: int) -> None:
        self.resume(node_id)
        self.nodes[node_id].kill()

    def stop(self, node_id: int) -> None:
        self.nodes[node_id].stop()

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.running:
            node.stop()
        node.start()
        self.wait_ready([node_id])

    def pause(self, node_id: int) -> None:
        pid = self.nodes[node_id].pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.pid is not None and node.running:
            os.kill(node.pid, signal.SIGCONT)

    # -- views -------------------------------------------------------------------------------------
    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{self._client_ports[node_id]}"

    def controller_address(self, node_id: int) -> str:
        return f"127.0.0.1:{self._controller_ports[node_id]}"

    def bootstrap(self, among: tuple[int, ...] | None = None) -> str:
        ids = among if among is not None else self.broker_ids
        return ",".join(self.address(n) for n in ids if self.nodes[n].running)

    def partitions(self, topic: str, via: int | None = None) -> dict[int, PartitionView]:
        node = via if via is not None else next(n for n in self.broker_ids if self.nodes[n].running)
        return partitions(self.address(node), topic)
