"""Network namespaces for the chaos harness: one namespace per node on a bridge the test creates.

``Network`` makes a Linux bridge in the root namespace (address ``.1`` of a private /24, where the
clients live) and, per node, a namespace ``<prefix><run>n<id>`` whose ``eth0`` is one end of a
veth pair, the other end enslaved to the bridge. Namespaces get an address on that /24 and
loopback only: no default route, no forwarding, so nothing leaves the machine. Names carry a
random run id so a crashed run's leftovers never collide; ``sweep_stale`` removes everything
(namespaces, links, tmpfs mounts) named with the harness's prefix (``PREFIX``) whose owning process
is gone (``OWNERS`` holds one pid file per run: two pytest workers may run chaos modules at once)
at the start of a run, ``close`` removes this run's (namespaces, links; a namespace's iptables
rules go with it) and is safe to call twice or after a failed setup.

Faults are iptables rules (``iptables`` package; the kernel's netfilter, no netem here) in a chain
``CHAOS`` of each node's namespace, jumped to from ``INPUT``: a packet is dropped on arrival at
the node that should not see it. ``heal`` flushes the chain.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

PREFIX = "pych"  # every namespace/link the harness creates starts with it (≤ 15-char link names)
CHAIN = "CHAOS"
OWNERS = Path("/run/pylog-chaos")  # <run id>.pid: the process that owns a run's namespaces and links


class NetnsUnavailable(RuntimeError):
    """Not root, or ``ip``/``iptables`` missing, or the kernel refuses namespaces."""


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} -> {proc.returncode}: {proc.stderr.strip()}")
    return proc


def available() -> str | None:
    """Why namespaces cannot be used here (``None``: they can)."""
    if os.geteuid() != 0:
        return "needs root (ip netns, iptables)"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (./dev test installs iptables as root)"
    return None


def _owner_alive(run_id: str) -> bool:
    try:
        pid = int((OWNERS / f"{run_id}.pid").read_text())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale(name: str) -> bool:
    return name.startswith(PREFIX) and not _owner_alive(name[len(PREFIX) : len(PREFIX) + 4])


def sweep_stale() -> list[str]:
    """Delete every namespace and link named with ``PREFIX`` whose run's owner is gone (a crashed run's)."""
    removed = []
    for line in _run("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if _stale(name):
            _run("ip", "netns", "del", name, check=False)
            removed.append(name)
    for line in _run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if _stale(name):
            _run("ip", "link", "del", name, check=False)
            removed.append(name)
    with contextlib.suppress(OSError):  # a crashed run's tmpfs log dirs (NamespacedCluster(disk_mb=...))
        for line in Path("/proc/mounts").read_text().splitlines():
            source, target = line.split()[:2]
            if _stale(source):
                _run("umount", "-l", target, check=False)
                removed.append(source)
    return removed


def _free_subnet(rng: random.Random) -> ipaddress.IPv4Network:
    used = [
        ipaddress.ip_interface(word).network
        for line in _run("ip", "-o", "-4", "addr", "show").stdout.splitlines()
        for i, word in enumerate(line.split())
        if i > 0 and line.split()[i - 1] == "inet"
    ]
    for _ in range(100):
        net = ipaddress.ip_network(f"10.{rng.randrange(160, 250)}.{rng.randrange(256)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise NetnsUnavailable("no free 10.x.y.0/24 for the chaos bridge")


class Network:
    """The bridge and one namespace per node id; a context manager (see the module docstring)."""

    def __init__(self, node_ids: Iterable[int], *, run_id: str | None = None) -> None:
        while run_id is None or _owner_alive(run_id):  # not another live run's id
            run_id = f"{random.randrange(16**4):04x}"
        self.run_id = run_id
        self.node_ids = tuple(node_ids)
        self.bridge = f"{PREFIX}{self.run_id}br"
        self.subnet: ipaddress.IPv4Network | None = None
        self._created_ns: list[str] = []
        self._created_links: list[str] = []

    @property
    def run_id_prefix(self) -> str:
        """What every name this run creates starts with (namespaces, links, tmpfs mount sources)."""
        return f"{PREFIX}{self.run_id}"

    def ns(self, node_id: int) -> str:
        return f"{PREFIX}{self.run_id}n{node_id}"

    def _veth(self, node_id: int) -> str:
        return f"{PREFIX}{self.run_id}v{node_id}"

    def address(self, node_id: int) -> str:
        assert self.subnet is not None
        return str(self.subnet.network_address + 10 + node_id)

    @property
    def client_address(self) -> str:
        """The root namespace's address on the bridge (clients' source address)."""
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    def exec_prefix(self, node_id: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(node_id)]

    def create(self) -> Network:
        why = available()
        if why:
            raise NetnsUnavailable(why)
        self.subnet = _free_subnet(random.Random())
        plen = self.subnet.prefixlen
        OWNERS.mkdir(parents=True, exist_ok=True)
        (OWNERS / f"{self.run_id}.pid").write_text(str(os.getpid()))
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            self._created_links.append(self.bridge)
            _run("ip", "addr", "add", f"{self.client_address}/{plen}", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            for n in self.node_ids:
                ns, veth = self.ns(n), self._veth(n)
                _run("ip", "netns", "add", ns)
                self._created_ns.append(ns)
                _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                self._created_links.append(veth)
                _run("ip", "link", "set", veth, "master", self.bridge, "up")
                _run("ip", "-n", ns, "addr", "add", f"{self.address(n)}/{plen}", "dev", "eth0")
                _run("ip", "-n", ns, "link", "set", "eth0", "up")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
                self.iptables(n, "-N", CHAIN)
                self.iptables(n, "-A", "INPUT", "-j", CHAIN)
        except NetnsUnavailable:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise NetnsUnavailable(f"cannot build the chaos network: {exc}") from exc
        return self

    def close(self) -> None:
        """Delete this run's namespaces (their rules and veth ends go with them) and links."""
        for ns in reversed(self._created_ns):
            _run("ip", "netns", "del", ns, check=False)
        for link in reversed(self._created_links):
            if _run("ip", "link", "show", link, check=False).returncode == 0:
                _run("ip", "link", "del", link, check=False)
        self._created_ns.clear()
        self._created_links.clear()
        (OWNERS / f"{self.run_id}.pid").unlink(missing_ok=True)

    def leftovers(self) -> list[str]:
        """This run's namespaces and links still present (empty after ``close``)."""
        names = [line.split()[0] for line in _run("ip", "netns", "list").stdout.splitlines() if line.strip()]
        links = [
            line.split(":")[1].strip().split("@")[0]
            for line in _run("ip", "-o", "link", "show").stdout.splitlines()
            if ":" in line
        ]
        mine = f"{PREFIX}{self.run_id}"
        return [n for n in [*names, *links] if n.startswith(mine)]

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- faults ------------------------------------------------------------------------------------
    def iptables(self, node_id: int, *args: str) -> None:
        _run(*self.exec_prefix(node_id), "iptables", "-w", *args)

    def drop(self, *, at: int, sources: Iterable[str], probability: float | None = None) -> None:
        """Drop packets arriving at node ``at`` from each source address (all of them, or each
        with ``probability``: iptables' ``statistic --mode random``)."""
        for source in sources:
            rule = ["-A", CHAIN, "-s", source]
            if probability is not None:
                rule += ["-m", "statistic", "--mode", "random", "--probability", f"{probability:.3f}"]
            self.iptables(at, *rule, "-j", "DROP")

    def rules(self, node_id: int) -> list[str]:
        out = _run(*self.exec_prefix(node_id), "iptables", "-w", "-S", CHAIN).stdout
        return [line for line in out.splitlines() if line.startswith("-A")]

    def heal(self) -> None:
        """Remove every fault rule (flush ``CHAOS`` in each namespace)."""
        for n in self.node_ids:
            with contextlib.suppress(RuntimeError):
                self.iptables(n, "-F", CHAIN)
