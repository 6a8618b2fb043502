"""The chaos network itself (tests/chaos/netns.py): namespaces reach each other and the root
namespace over the bridge only, iptables rules in a namespace drop what they should (all of it, or
a random share with the ``statistic`` match), ``heal`` restores, and ``close`` leaves nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos import netns
from tests.chaos.netns import Network

# A UDP counter in a namespace: counts datagrams on port 7000; a TCP connection on port 7001 first
# drains the datagrams already queued, then gets the count.
COUNTER = r"""
import select, socket, sys
addr = sys.argv[1]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((addr, 7000)); u.setblocking(False)
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind((addr, 7001)); t.listen()
print("ready", flush=True)
n = 0
while True:
    r, _, _ = select.select([u, t], [], [])
    while True:
        try:
            u.recv(100); n += 1
        except BlockingIOError:
            break
    if t in r:
        c, _ = t.accept(); c.sendall(str(n).encode()); c.close(); n = 0
"""


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    why = netns.available()
    if why:
        pytest.skip(why)
    netns.sweep_stale()
    net = Network((1, 2))
    try:
        net.create()
        yield net
    finally:
        net.close()
        assert net.leftovers() == []


@pytest.fixture(scope="module")
def counter(network: Network) -> Iterator[str]:
    address = network.address(1)
    proc = subprocess.Popen(
        [*network.exec_prefix(1), sys.executable, "-c", COUNTER, address], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield address
    finally:
        proc.kill()
        proc.wait()


def _count(address: str) -> int:
    with socket.create_connection((address, 7001), timeout=10) as s:
        return int(s.recv(100))


def _blast(address: str, n: int) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        for _ in range(n):
            u.sendto(b"x", (address, 7000))
    return _count(address)


def test_nodes_have_only_the_bridge(network: Network) -> None:
    routes = subprocess.run(
        [*network.exec_prefix(1), "ip", "-4", "route"], capture_output=True, text=True, check=True
    ).stdout
    assert "default" not in routes
    assert str(network.subnet) in routes


def test_root_namespace_reaches_a_node_and_rules_drop(network: Network, counter: str) -> None:
    assert _blast(counter, 200) == 200
    # everything from the root namespace dropped at node 1: the TCP query cannot connect either
    network.drop(at=1, sources=[network.client_address])
    with pytest.raises(OSError), socket.create_connection((counter, 7001), timeout=2):
        pass
    network.heal()
    assert network.rules(1) == []
    assert _blast(counter, 100) == 100


def test_statistic_match_drops_a_random_share(network: Network, counter: str) -> None:
    """The kernel here has netfilter but no netem: random loss is iptables' ``statistic`` match.
    Only UDP from port 7002 is dropped, so the TCP count query is not."""
    network.iptables(1, "-A", netns.CHAIN, "-p", "udp", "--sport", "7002", "-m", "statistic",
                     "--mode", "random", "--probability", "0.5", "-j", "DROP")  # fmt: skip
    received = 0
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.bind((network.client_address, 7002))
            for _ in range(20):  # in chunks of 100, each counted: never more than the socket buffer holds
                for _ in range(100):
                    u.sendto(b"x", (counter, 7000))
                received += _count(counter)
    finally:
        network.heal()
    assert 700 < received < 1300, received  # 1000 expected; 7 sigma either way


def test_node_to_node_partition(network: Network, counter: str) -> None:
    probe = [*network.exec_prefix(2), sys.executable, "-c",
             f"import socket; socket.create_connection(('{counter}', 7001), timeout=2).close()"]  # fmt: skip
    assert subprocess.run(probe, capture_output=True, check=False).returncode == 0
    network.drop(at=1, sources=[network.address(2)])
    started = time.monotonic()
    assert subprocess.run(probe, capture_output=True, check=False).returncode != 0
    assert time.monotonic() - started < 30
    assert _count(counter) >= 0  # the root namespace still reaches node 1
    network.heal()
    assert subprocess.run(probe, capture_output=True, check=False).returncode == 0


def test_sweep_removes_only_runs_whose_owner_is_gone(network: Network, tmp_path: Path) -> None:
    stale = f"{netns.PREFIX}zzzzn1"  # no pid file for run "zzzz": a crashed run's namespace
    disk = f"{netns.PREFIX}zzzzdisk1"  # and its tmpfs log dir
    subprocess.run(["ip", "netns", "add", stale], check=True)
    mount_point = tmp_path / "logs"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", disk, str(mount_point)], check=True)
    try:
        removed = netns.sweep_stale()
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True, check=False)
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, check=False)
    assert stale in removed
    assert disk in removed
    assert not any(name.startswith(f"{netns.PREFIX}{network.run_id}") for name in removed)
    assert set(network.leftovers()) >= {network.ns(1), network.ns(2), network.bridge}
