"""Real ``RaftDriver`` s on loopback sockets in one process, served by the real handlers of
``broker.api.raft`` (the broker's dispatcher and listener are replaced by a small frame server)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from broker.api.context import Request
from broker.api.raft import handle_metadata_fetch, raft_handlers
from broker.raft.config import RaftConfig, VoterEndpoint
from broker.raft.driver import RaftDriver
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.headers import decode_request, encode_response

CLUSTER_ID = "driver-test-cluster"
# Quick, yet a follower must miss its leader for 1.5 s before it starts an election: the tests
# compare epochs read earlier, and every node shares one event loop (an fsync or a busy CI machine
# stalls them all).
FAST = {
    "election_timeout_ms": 300,
    "fetch_timeout_ms": 1500,
    "election_backoff_max_ms": 150,
    "request_timeout_ms": 1000,
    "retry_backoff_ms": 20,
    "retry_backoff_max_ms": 200,
    "fetch_max_wait_ms": 100,
}
_SIZE = struct.Struct(">i")


class Node:
    """One replica: a frame server on a loopback port and (once started) its driver."""

    def __init__(self, node_id: int, root: Path) -> None:
        self.node_id = node_id
        self.dir = root / f"node-{node_id}" / "__cluster_metadata-0"
        self.server: asyncio.Server | None = None
        self.port = 0
        self.driver: RaftDriver | None = None
        self.committed: list[tuple[int, bytes]] = []
        self.fatal: list[str] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def listen(self, port: int = 0) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]

    def make_driver(self, voters: dict[int, int], cluster_id: str | None = CLUSTER_ID, **config: int) -> RaftDriver:
        endpoints = {v: VoterEndpoint(v, "127.0.0.1", port) for v, port in voters.items()}
        raft_config = RaftConfig(
            node_id=self.node_id, voters=frozenset(endpoints), voter_endpoints=endpoints, **{**FAST, **config}
        )
        self.committed = []
        self.driver = RaftDriver(raft_config, self.node_id, cluster_id, self.dir, on_fatal=self.fatal.append)
        self.driver.add_committed_listener(lambda offset, payload: self.committed.append((offset, payload)))
        return self.driver

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                task = asyncio.create_task(self._answer(frame, writer))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer(self, frame: bytes, writer: asyncio.StreamWriter) -> None:
        header, body = decode_request(frame)
        request = Request(header, body, None)  # type: ignore[arg-type]
        broker: Any = SimpleNamespace(raft=self.driver)
        try:
            if header.api_key == ApiKey.FETCH:
                result = await handle_metadata_fetch(broker, request)
            else:
                result = await raft_handlers()[header.api_key](broker, request)  # type: ignore[misc]
        except Exception:  # the real dispatcher closes the connection
            writer.close()
            return
        writer.write(encode_response(header.api_key, header.api_version, header.correlation_id, result))

    async def stop_listening(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in list(self._writers):
                writer.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
            self.server = None


async def start_cluster(
    root: Path, ids: tuple[int, ...], observers: tuple[int, ...] = (), **config: int
) -> dict[int, Node]:
    nodes = {i: Node(i, root) for i in (*ids, *observers)}
    for node in nodes.values():
        await node.listen()
    voters = {i: nodes[i].port for i in ids}
    for node in nodes.values():
        node.make_driver(voters, **config)
    for node in nodes.values():
        assert node.driver is not None
        await node.driver.start()
    return nodes


def leaders(nodes: dict[int, Node]) -> set[int]:
    return {n.driver.leader_id for n in nodes.values() if n.driver is not None and n.driver.running}


async def stop_all(nodes: dict[int, Node]) -> None:
    for node in nodes.values():
        if node.driver is not None:
            await node.driver.shutdown(graceful=False)
        await node.stop_listening()
