"""``VoterPeers``: a metadata-quorum replica's connections to the other voters, for ``RaftDriver``.

One ``PeerConnection`` per voter (its own connection for the Raft RPCs, KIP-595), first at the
endpoints of ``controller.quorum.bootstrap.servers`` and ``controller.quorum.voters``, then at the
endpoint the voter set in effect records (KIP-853: ``sync`` gives a new voter a connection and a
voter whose endpoint changed a new one). A replica asked to reach a node whose endpoint it does not
know (a leader learnt from a bootstrap server before any VotersRecord reached its log) asks a
known peer for the voters' endpoints (``discover``: DescribeQuorum v2 ``Nodes``), one search at
a time. ``forward`` sends one request to a voter on a connection of its own (AddRaftVoter,
RemoveRaftVoter and UpdateRaftVoter forwarded to the leader may wait long for their answer).

Background work (closing a replaced connection, a discovery) runs in tasks made by ``spawn``, the
driver's, so that its shutdown cancels and awaits them with the rest.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any

from broker.network.dial import Dialer
from broker.network.peer import PeerConnection
from broker.raft.log import VotersRecord
from broker.raft.messages import DescribeQuorumRequest
from broker.raft.rpc import request_to_wire
from pyspark_log.wire.api_keys import ApiKey

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]


class VoterPeers:
    """The connections of replica ``node_id`` to the other voters (module docstring)."""

    def __init__(
        self,
        node_id: int,
        endpoints: Mapping[int, tuple[str, int]],
        *,
        request_timeout_ms: int,
        dialer: Dialer | None,
        rng: random.Random,
        spawn: Spawn,
    ) -> None:
        self.node_id = node_id
        self._request_timeout_ms = request_timeout_ms
        self._dialer = dialer
        self._rng = rng
        self._spawn = spawn
        self._peers = {
            voter: self._connection(voter, host, port) for voter, (host, port) in endpoints.items() if voter != node_id
        }
        self._synced: VotersRecord | None = None  # the VotersRecord the connections were last built from
        self._discovery: asyncio.Task[None] | None = None

    def _connection(self, node_id: int, host: str, port: int) -> PeerConnection:
        return PeerConnection(
            node_id, host, port, client_id=f"raft-{self.node_id}", request_timeout_ms=self._request_timeout_ms,
            dialer=self._dialer,
        )  # fmt: skip

    def get(self, node_id: int) -> PeerConnection | None:
        return self._peers.get(node_id)

    def __iter__(self) -> Iterator[PeerConnection]:
        return iter(list(self._peers.values()))

    def unknown_connections(self) -> int:
        """KIP-595's ``number-unknown-voter-connections``: voters with no open connection."""
        return sum(1 for peer in self._peers.values() if not peer.connected)

    def sync(self, record: VotersRecord | None) -> None:
        """KIP-853: a connection to every voter of ``record`` (the voter set in effect), at the
        endpoint it records."""
        if record is None or record is self._synced:
            return
        self._synced = record
        for spec in record.voters:
            if spec.voter_id != self.node_id and spec.port:
                self.ensure(spec.voter_id, spec.host, spec.port)

    def ensure(self, node_id: int, host: str, port: int) -> None:
        """Reach ``node_id`` at ``host:port`` from now on (a connection elsewhere is closed)."""
        peer = self._peers.get(node_id)
        if peer is not None and (peer.host, peer.port) == (host, port):
            return
        if peer is not None:
            self._spawn(peer.close(), f"raft-close-{node_id}")
        log.info("raft: node %d reaches voter %d at %s:%d", self.node_id, node_id, host, port)
        self._peers[node_id] = self._connection(node_id, host, port)

    def discover(self) -> None:
        """Ask a known peer for the voters' endpoints (DescribeQuorum v2 ``Nodes``, KIP-853), one
        search at a time."""
        if self._discovery is not None and not self._discovery.done():
            return
        candidates = list(self._peers.values())
        if candidates:
            self._discovery = self._spawn(self._discover_from(self._rng.choice(candidates)), "raft-discover")

    async def _discover_from(self, peer: PeerConnection) -> None:
        try:
            api_key, version, body = request_to_wire(DescribeQuorumRequest())
            answer = await peer.request(api_key, version, body)
        except Exception as exc:  # noqa: BLE001 - the core retries; the next miss asks again
            log.debug("raft: endpoint discovery through %r failed: %r", peer, exc)
            return
        for node in answer.get("nodes") or ():
            listeners = node["listeners"]
            if node["node_id"] != self.node_id and listeners:
                self.ensure(node["node_id"], listeners[0]["host"], listeners[0]["port"])

    async def forward(
        self, node_id: int, api_key: int, version: int, body: Mapping[str, Any], timeout_ms: int
    ) -> Mapping[str, Any] | None:
        """Send one request to voter ``node_id`` on a connection of its own and return the answer
        (it may take up to ``timeout_ms``); None when the voter is unknown or the request failed."""
        peer = self._peers.get(node_id)
        if peer is None:
            return None
        forward = PeerConnection(
            node_id, peer.host, peer.port, client_id=f"raft-{self.node_id}-forward",
            request_timeout_ms=timeout_ms + self._request_timeout_ms, dialer=self._dialer,
        )  # fmt: skip
        try:
            return await forward.request(api_key, version, body)
        except Exception as exc:  # noqa: BLE001 - any failure: the caller answers "no leader now"
            log.info("raft: %s forwarded to %d failed: %r", ApiKey(api_key).name, node_id, exc)
            return None
        finally:
            await forward.close()

    async def close(self) -> None:
        await asyncio.gather(*(peer.close() for peer in self._peers.values()), return_exceptions=True)
