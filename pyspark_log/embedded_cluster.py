"""Start a pylog cluster of several processes on loopback: for tests, benchmarks and demos.

``EmbeddedCluster`` starts controllers (``process.roles=controller``, the KIP-595 voters) and
brokers (``process.roles=broker``), or nodes with both roles (``combined=True``), each a real
``python -m broker`` process (``EmbeddedBroker``), all with the same cluster id and voters. Faults
are real: ``kill`` is SIGKILL, ``pause`` SIGSTOP, ``resume`` SIGCONT, ``restart`` starts the same
node id on the same data and port.

Voter ports must be known before the voters start, so they come from the OS and a start whose
port was taken meanwhile is retried on fresh ports (``start``).

    with EmbeddedCluster(Path("/tmp/c")) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap()})
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from pyspark_log.embedded import BrokerStartError, EmbeddedBroker, random_cluster_id
from pyspark_log.wire import ApiKey, decode_response, encode_request

CLUSTER_ID = "cGlsb2cta3JhZnQtdGVzdA"
QUORUM_TIMEOUTS = {
    "quorum.election.timeout.ms": "1000",
    "quorum.fetch.timeout.ms": "2000",
    "quorum.election.backoff.max.ms": "1000",
    "quorum.request.timeout.ms": "2000",
}
START_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(
    address: str,
    api_key: int,
    version: int,
    body: Mapping[str, Any],
    *,
    timeout_s: float = 10,
    client_id: str = "embedded-cluster",
    ssl_context: ssl.SSLContext | None = None,
) -> Any:
    """One request on a fresh connection (TLS with ``ssl_context``); the decoded response body
    (``ConnectionError`` when the broker closes the connection instead of answering)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
        sock = ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context is not None else raw
        sock.sendall(encode_request(api_key, version, 1, client_id, body))
        size = struct.unpack(">i", _read(sock, 4))[0]
        _, response = decode_response(api_key, version, _read(sock, size))
    return response


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


@dataclass(frozen=True)
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


def partitions(address: str, topic: str, ssl_context: ssl.SSLContext | None = None) -> dict[int, PartitionView]:
    """One broker's Metadata answer for ``topic``: every partition's leader, replicas, ISR."""
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    response = request(address, ApiKey.METADATA, 12, body, ssl_context=ssl_context)
    out = {}
    for t in response.topics:
        for p in t.partitions:
            out[p.partition_index] = PartitionView(
                p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas)
            )
    return out


class EmbeddedCluster:
    """Controllers and brokers (or combined nodes) of one cluster; see the module docstring."""

    def __init__(
        self, root: Path, *, controllers: tuple[int, ...] = (1, 2, 3), brokers: tuple[int, ...] = (4, 5, 6),
        combined: bool = False, overrides: Mapping[str, str] | None = None, controller_listener: bool = False,
        client_protocol: str = "PLAINTEXT", controller_protocol: str = "PLAINTEXT",
        sasl_plain_jaas: str | None = None, metrics: bool = False, dynamic_quorum: bool = False,
    ) -> None:  # fmt: skip
        self.root = root
        self.combined = combined
        # KIP-853: ``controller.quorum.bootstrap.servers`` instead of ``controller.quorum.voters``; the
        # controllers are formatted with ``--initial-controllers`` (directory ids chosen here), the
        # brokers with nothing; ``add_controller`` starts a new one with ``--no-initial-controllers``
        self.dynamic_quorum = dynamic_quorum
        self.directory_ids: dict[int, str] = {}
        # a separate CONTROLLER listener (controller.listener.names) carries the quorum's RPCs;
        # clients use PLAINTEXT, which then refuses them (broker.security.listeners)
        self.controller_listener = controller_listener
        # with a controller listener: the client listener is named after its security protocol
        # (it is the inter-broker listener too), CONTROLLER uses ``controller_protocol``
        self.client_protocol = client_protocol
        self.controller_protocol = controller_protocol
        # with a separate controller listener: each broker also serves SASL_PLAINTEXT (PLAIN, users
        # from this JAAS line) after its client listener (``sasl_address``)
        if sasl_plain_jaas is not None and client_protocol == "SASL_PLAINTEXT":
            raise ValueError("sasl_plain_jaas adds a SASL_PLAINTEXT listener: the client listener must be another")
        self.sasl_plain_jaas = sasl_plain_jaas
        self._sasl_ports: dict[int, int] = {}
        self._client_ports: dict[int, int] = {}
        # each node serves /metrics (``metrics.port``) on a port of its own (``metrics_address``)
        self.metrics = metrics
        self._metrics_ports: dict[int, int] = {}
        self.controller_ids = brokers if combined else controllers
        self.broker_ids = brokers
        self.overrides = dict(overrides or {})
        self.nodes: dict[int, EmbeddedBroker] = {}
        self._ports: dict[int, int] = {}
        self.voters = ""
        self.bootstrap_servers = ""

    def _props(self, node_id: int) -> dict[str, str]:
        roles = "broker,controller" if self.combined else ("broker" if node_id in self.broker_ids else "controller")
        listeners: dict[str, str] = {}
        if self.controller_listener:
            uris = []
            if "broker" in roles:
                uris.append(f"{self.client_protocol}://127.0.0.1:{self._client_ports[node_id]}")
                if self.sasl_plain_jaas is not None:
                    uris.append(f"SASL_PLAINTEXT://127.0.0.1:{self._sasl_ports[node_id]}")
            if "controller" in roles:
                uris.append(f"CONTROLLER://127.0.0.1:{self._ports[node_id]}")
            listeners = {
                "listeners": ",".join(uris),
                "listener.security.protocol.map": (
                    f"{self.client_protocol}:{self.client_protocol},CONTROLLER:{self.controller_protocol}"
                ),
                "controller.listener.names": "CONTROLLER",
            }
            if self.sasl_plain_jaas is not None:
                listeners["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
                listeners["sasl.enabled.mechanisms"] = "PLAIN"
                listeners["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = self.sasl_plain_jaas
        quorum = (
            {"controller.quorum.bootstrap.servers": self.bootstrap_servers}
            if self.dynamic_quorum
            else {"controller.quorum.voters": self.voters}
        )
        return {
            **listeners,
            "process.roles": roles,
            "node.id": str(node_id),
            **quorum,
            "cluster.id": CLUSTER_ID,
            **({"metrics.port": str(self._metrics_ports[node_id])} if node_id in self._metrics_ports else {}),
            **QUORUM_TIMEOUTS,
            **self.overrides,
        }

    def __enter__(self) -> EmbeddedCluster:
        """Started; a start that fails for any reason leaves no process behind."""
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

    def _build(self) -> None:
        self._ports = {n: free_port() for n in self.controller_ids}
        self.voters = ",".join(f"{n}@127.0.0.1:{self._ports[n]}" for n in self.controller_ids)
        self.bootstrap_servers = ",".join(f"127.0.0.1:{self._ports[n]}" for n in self.controller_ids)
        self.directory_ids = {n: random_cluster_id() for n in self.controller_ids} if self.dynamic_quorum else {}
        initial = ",".join(f"{n}@127.0.0.1:{self._ports[n]}:{d}" for n, d in self.directory_ids.items())
        ids = sorted({*self.controller_ids, *self.broker_ids})
        self._metrics_ports = {n: free_port() for n in ids} if self.metrics else {}
        if self.controller_listener:  # fixed client ports too, so a restarted node keeps its addresses
            self._client_ports = {n: free_port() for n in self.broker_ids}
            self._sasl_ports = {n: free_port() for n in self.broker_ids} if self.sasl_plain_jaas is not None else {}
        root = self.root
        self.nodes = {
            n: EmbeddedBroker(
                root / f"node-{n}", port=self._client_ports.get(n, self._ports.get(n, 0)), overrides=self._props(n),
                format_args=self._format_args(n, initial),
            )
            for n in ids
        }  # fmt: skip

    def _format_args(self, node_id: int, initial: str) -> tuple[str, ...]:
        if not self.dynamic_quorum:
            return ()
        if node_id in self.controller_ids:
            return ("--initial-controllers", initial)
        return ("--no-initial-controllers",)

    def start(self) -> None:
        """Start every node (voters first); retried on fresh ports when one was taken meanwhile."""
        for attempt in range(START_ATTEMPTS):
            self._build()
            try:
                self._start_all()
                return
            except BrokerStartError as exc:
                outputs = self.outputs()
                self.close()
                if "Address already in use" not in str(exc) + outputs or attempt == START_ATTEMPTS - 1:
                    raise BrokerStartError(f"{exc}\n{outputs}") from None
                for node in self.nodes.values():
                    with contextlib.suppress(OSError):
                        _wipe(node.data_dir)

    def _start_all(self) -> None:
        if self.combined:  # a combined node is ready only once a quorum elected a leader: start together
            for node in self.nodes.values():
                node.start(wait=False)
            for node in self.nodes.values():
                node.wait_ready()
            return
        for n in self.controller_ids:
            self.nodes[n].start()
        for n in self.broker_ids:
            self.nodes[n].start()

    def add_broker(self, node_id: int) -> EmbeddedBroker:
        """Start one more broker (``process.roles=broker``) of this cluster, as an operator adds a
        machine (docs/operations.md "Add a broker"): same cluster id and voters, its log dir
        formatted by ``EmbeddedBroker``. Separate controllers only (``combined=False``); a new
        controller is ``add_controller`` (a dynamic quorum, KIP-853)."""
        if self.combined:
            raise ValueError("add_broker needs separate controllers (combined=False)")
        if node_id in self.nodes:
            raise ValueError(f"node {node_id} is already in the cluster")
        self.broker_ids = (*self.broker_ids, node_id)
        if self.metrics:
            self._metrics_ports[node_id] = free_port()
        if self.controller_listener:
            self._client_ports[node_id] = free_port()
            if self.sasl_plain_jaas is not None:
                self._sasl_ports[node_id] = free_port()
        node = EmbeddedBroker(
            self.root / f"node-{node_id}", port=self._client_ports.get(node_id, 0), overrides=self._props(node_id)
        )
        self.nodes[node_id] = node
        return node.start()

    def add_controller(self, node_id: int) -> EmbeddedBroker:
        """Start one more controller (``process.roles=controller``) of a dynamic quorum
        (``dynamic_quorum=True``), formatted with ``--no-initial-controllers`` as Kafka's "Add a
        controller" runbook does: it joins as an observer, and ``pylog metadata-quorum
        add-controller`` then makes it a voter (docs/operations.md "Add a controller")."""
        if not self.dynamic_quorum or self.combined:
            raise ValueError("add_controller needs dynamic_quorum=True and separate controllers")
        if node_id in self.nodes:
            raise ValueError(f"node {node_id} is already in the cluster")
        self._ports[node_id] = free_port()
        self.controller_ids = (*self.controller_ids, node_id)
        if self.metrics:
            self._metrics_ports[node_id] = free_port()
        node = EmbeddedBroker(
            self.root / f"node-{node_id}", port=self._ports[node_id], overrides=self._props(node_id),
            format_args=("--no-initial-controllers",),
        )  # fmt: skip
        self.nodes[node_id] = node
        return node.start()

    def move_controller(self, node_id: int) -> EmbeddedBroker:
        """Restart a controller of a dynamic quorum on a new port (its machine moved): it tells the
        leader with UpdateRaftVoter (KIP-853) and the voter set records the new endpoint."""
        if not self.dynamic_quorum or node_id not in self.controller_ids or self.combined:
            raise ValueError("move_controller needs a separate controller of a dynamic quorum")
        node = self.nodes[node_id]
        if node.running:
            node.stop()
        self._ports[node_id] = free_port()
        node.overrides = self._props(node_id)
        node.port = self._ports[node_id]
        return node.start()

    def outputs(self) -> str:
        return "\n".join(f"--- node {n}:\n{node.output()}" for n, node in self.nodes.items())

    def close(self) -> None:
        for n in sorted(self.nodes, key=lambda n: n in self.controller_ids):  # brokers before controllers
            node = self.nodes[n]
            with contextlib.suppress(Exception):
                self.resume(n)
            with contextlib.suppress(Exception):
                node.stop()

    # -- faults ------------------------------------------------------------------------------------
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

    def pause(self, node_id: int) -> None:
        pid = self.nodes[node_id].pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        pid = self.nodes[node_id].pid
        if pid is not None and self.nodes[node_id].running:
            os.kill(pid, signal.SIGCONT)

    # -- views -------------------------------------------------------------------------------------
    def address(self, node_id: int) -> str:
        """The node's first listener: its client listener (a controller-only node: its voter address)."""
        return self.nodes[node_id].bootstrap_servers

    def metrics_address(self, node_id: int) -> str:
        """Where the node serves ``GET /metrics`` (``metrics=True``): ``host:port``."""
        return f"127.0.0.1:{self._metrics_ports[node_id]}"

    def sasl_address(self, node_id: int) -> str:
        """The broker's SASL_PLAINTEXT listener (``sasl_plain_jaas`` given)."""
        return f"127.0.0.1:{self._sasl_ports[node_id]}"

    def controller_address(self, node_id: int) -> str:
        """Where the node's quorum RPCs are served (its entry of ``controller.quorum.voters``)."""
        return f"127.0.0.1:{self._ports[node_id]}"

    def bootstrap(self, among: tuple[int, ...] | None = None) -> str:
        ids = among if among is not None else self.broker_ids
        return ",".join(self.address(n) for n in ids if self.nodes[n].running)

    def partitions(self, topic: str, via: int | None = None) -> dict[int, PartitionView]:
        node = via if via is not None else next(n for n in self.broker_ids if self.nodes[n].running)
        return partitions(self.address(node), topic)

    def log_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.nodes[node_id].data_dir / "logs" / f"{topic}-{partition}"

    def segment_bytes(self, node_id: int, topic: str, partition: int) -> bytes:
        """Every ``.log`` file of one replica, concatenated in offset order."""
        directory = self.log_dir(node_id, topic, partition)
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def _wipe(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
