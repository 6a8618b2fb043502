"""A pylog cluster whose nodes each run in their own network namespace (tests/chaos/netns.py).

Same shape as ``pyspark_log.embedded_cluster.EmbeddedCluster(combined=True)``: ``broker,controller``
nodes with one cluster id and the same ``controller.quorum.voters``, but each node listens on its
namespace's address (``PLAINTEXT`` on 9092 for clients and replication, ``CONTROLLER`` on 9093 for
the quorum) instead of a loopback port, so iptables rules in a namespace cut it off for real. Each
node is ``EmbeddedBroker`` started through a two-line wrapper (``exec ip netns exec <ns> python``):
``ip netns exec`` execs, so the broker's pid is the one ``kill``/``pause`` signal. Clients run in the
root namespace and reach the nodes over the bridge.

``controllers``: with node ids given here, those nodes are KRaft controllers only
(``process.roles=controller``, the quorum's voters) and ``node_ids`` are brokers only — the
3-controller + 3-broker shape; each of the six in its own namespace. Without, every node is a
combined ``broker,controller`` node.

``faultfs``: each broker's log dir is a fault filesystem (tests/chaos/faultfs.py, FUSE) over a
backing directory; ``power_loss`` kills the node and drops its unsynced writes.

``disk_mb``: each node's log dir is a tmpfs of that size (mounted before the node is formatted,
unmounted by ``close``), so the ``disk-full`` nemesis fills it for real (``fill_disk`` writes a
ballast file until ENOSPC; ``free_disk`` deletes it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import CLUSTER_ID, QUORUM_TIMEOUTS, PartitionView, partitions, request
from pyspark_log.wire import ApiKey
from tests.chaos import faultfs
from tests.chaos.netns import Network

REPO = Path(__file__).resolve().parents[2]  # where ``python -m tests.chaos.faultfs`` is found
CLIENT_PORT = 9092
CONTROLLER_PORT = 9093
READY_LINE = b"pylog broker ready:"
FATAL_LINE = b"pylog-broker: fatal:"
FULL_DISK = b"No space left on device"


class NamespacedCluster:
    """Combined nodes, one per namespace of ``network``; ``start``/``close``; faults by signal."""

    def __init__(
        self, root: Path, network: Network, *, overrides: Mapping[str, str] | None = None,
        controllers: tuple[int, ...] = (), disk_mb: int | None = None, faultfs: bool = False,
    ) -> None:  # fmt: skip
        self.root = root
        self.network = network
        self.controller_ids = controllers
        self.node_ids = tuple(n for n in network.node_ids if n not in controllers)  # the brokers
        self.all_ids = network.node_ids
        self.overrides = dict(overrides or {})
        voters = controllers or self.node_ids
        self.voters = ",".join(f"{n}@{network.address(n)}:{CONTROLLER_PORT}" for n in voters)
        self.disk_mb = disk_mb
        self.faultfs = faultfs
        self._fuse: dict[int, subprocess.Popen[bytes]] = {}
        self._mounts: list[Path] = []
        self._full_disk_scan: dict[int, tuple[int, bool]] = {}  # node -> (broker.out read up to, fatal seen)
        self.nodes: dict[int, EmbeddedBroker] = {}
        for n in self.all_ids:
            wrapper = root / f"python-in-ns-{n}"
            root.mkdir(parents=True, exist_ok=True)
            wrapper.write_text(f'#!/bin/sh\nexec {" ".join(network.exec_prefix(n))} {sys.executable} "$@"\n')
            wrapper.chmod(0o755)
            self.nodes[n] = EmbeddedBroker(
                root / f"node-{n}", port=CLIENT_PORT, overrides=self._props(n), python=str(wrapper)
            )

    def _props(self, n: int) -> dict[str, str]:
        address = self.network.address(n)
        if not self.controller_ids:
            roles = "broker,controller"
            listeners = f"PLAINTEXT://{address}:{CLIENT_PORT},CONTROLLER://{address}:{CONTROLLER_PORT}"
        elif n in self.controller_ids:
            roles, listeners = "controller", f"CONTROLLER://{address}:{CONTROLLER_PORT}"
        else:
            roles, listeners = "broker", f"PLAINTEXT://{address}:{CLIENT_PORT}"
        return {
            "listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "process.roles": roles,
            "node.id": str(n),
            "controller.quorum.voters": self.voters,
            "cluster.id": CLUSTER_ID,
            **QUORUM_TIMEOUTS,
            **self.overrides,
        }

    def start(self) -> NamespacedCluster:
        """Every node (together: a combined node is ready once a quorum elected a leader)."""
        if self.disk_mb is not None:
            for n in self.node_ids:
                logs = self.nodes[n].data_dir / "logs"
                logs.mkdir(parents=True, exist_ok=True)
                source = f"{self.network.run_id_prefix}disk{n}"  # named for netns.sweep_stale
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.disk_mb}m", source, str(logs)],
                               check=True, capture_output=True, timeout=30)  # fmt: skip
                self._mounts.append(logs)
        if self.faultfs:
            for n in self.node_ids:
                self._mount_faultfs(n)
        for node in self.nodes.values():
            node.start(wait=False)
        for node in self.nodes.values():
            node.wait_ready()
        return self

    def _mount_faultfs(self, n: int) -> None:
        logs, backing = self.nodes[n].data_dir / "logs", self.nodes[n].data_dir / "backing"
        logs.mkdir(parents=True, exist_ok=True)
        backing.mkdir(parents=True, exist_ok=True)
        out = open(self.nodes[n].data_dir / "faultfs.out", "ab")  # noqa: SIM115 - the process owns it
        self._fuse[n] = subprocess.Popen([sys.executable, "-m", "tests.chaos.faultfs", str(backing), str(logs)],
                                         stdout=out, stderr=subprocess.STDOUT, cwd=REPO)  # fmt: skip
        out.close()
        deadline = time.monotonic() + 60
        while not os.path.ismount(logs):
            if time.monotonic() > deadline or self._fuse[n].poll() is not None:
                raise RuntimeError(f"the fault filesystem of node {n} did not mount")
            time.sleep(0.05)
        self._mounts.append(logs)

    def power_loss(self, n: int) -> None:
        """A power loss of node ``n``: SIGKILL, then its fault filesystem drops every unsynced write
        (tests/chaos/faultfs.py); ``restart`` brings it back on what was synced."""
        self.kill(n)
        faultfs.power_loss(self.nodes[n].data_dir / "backing")

    def close(self) -> None:
        for n in self.all_ids:
            with contextlib.suppress(Exception):
                self.resume(n)
            with contextlib.suppress(Exception):
                self.nodes[n].stop()
        for logs in reversed(self._mounts):
            subprocess.run(["umount", "-l", str(logs)], check=False, capture_output=True, timeout=30)
        self._mounts.clear()
        for proc in self._fuse.values():
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        self._fuse.clear()

    def outputs(self) -> str:
        return "\n".join(f"--- node {n}:\n{node.output()[-4000:]}" for n, node in self.nodes.items())

    # -- faults ------------------------------------------------------------------------------------
    def kill(self, n: int) -> None:
        self.resume(n)
        self.nodes[n].kill()

    def restart(self, n: int) -> None:
        node = self.nodes[n]
        if node.running:
            node.stop()
        node.start()

    def pause(self, n: int) -> None:
        pid = self.nodes[n].pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)

    def resume(self, n: int) -> None:
        node = self.nodes[n]
        if node.pid is not None and node.running:
            os.kill(node.pid, signal.SIGCONT)

    def _ballast(self, n: int) -> Path:
        return self.nodes[n].data_dir / "logs" / ".chaos-ballast"

    def fill_disk(self, n: int) -> int:
        """Write a ballast file into node ``n``'s log dir until ENOSPC; returns the bytes written."""
        chunk = b"\0" * (1 << 20)
        written = 0
        with open(self._ballast(n), "ab", buffering=0) as f:
            try:
                while True:
                    written += f.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        return written

    def free_disk(self, n: int) -> None:
        self._ballast(n).unlink(missing_ok=True)

    def stopped_on_full_disk(self, n: int) -> bool:
        """Node ``n``'s current (or last) run printed a fatal error on a full disk after its ready
        line: it is stopping, or has stopped, by itself (as Kafka halts when its metadata log dir
        fails). Reads ``broker.out`` from where the previous call stopped."""
        offset, fatal = self._full_disk_scan.get(n, (0, False))
        with open(self.nodes[n].data_dir / "broker.out", "rb") as f:
            f.seek(offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        for line in complete.splitlines():
            if line.startswith(READY_LINE):
                fatal = False
            elif line.startswith(FATAL_LINE) and FULL_DISK in line:
                fatal = True
        self._full_disk_scan[n] = (offset + len(complete), fatal)
        return fatal

    # -- views -------------------------------------------------------------------------------------
    def address(self, n: int) -> str:
        return f"{self.network.address(n)}:{CLIENT_PORT}"

    def bootstrap(self) -> str:
        return ",".join(self.address(n) for n in self.node_ids)

    def partitions(self, topic: str, via: int) -> dict[int, PartitionView]:
        return partitions(self.address(via), topic)

    def active_controller(self) -> int | None:
        """The metadata quorum's leader (DescribeQuorum, KIP-595/KIP-836) as the first node that
        answers sees it; ``None`` when none answers or none is leader."""
        body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
        for n in self.controller_ids or self.node_ids:
            if not self.nodes[n].running:
                continue
            try:
                response = request(f"{self.network.address(n)}:{CONTROLLER_PORT}", ApiKey.DESCRIBE_QUORUM, 1, body,
                                   timeout_s=3)  # fmt: skip
            except (OSError, ConnectionError):
                continue
            leader = response.topics[0].partitions[0].leader_id
            if leader in self.all_ids:
                return int(leader)
        return None
