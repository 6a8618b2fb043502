"""The connection from a group member to its group coordinator.

Kafka documentation §5.5 "Distribution": a consumer "issues a FindCoordinatorRequest to any Kafka broker" and
then talks to
the coordinator it names; when the coordinator moves it must be found again. The link finds the
coordinator, keeps its own connection to it — not the pooled one fetches use: a JoinGroup waits
for the whole rebalance and responses come back in request order, so sharing would hold up
fetches (Kafka's consumer does the same) — and forgets both on NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or a broken connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from pyspark_log.client.cluster import Cluster
from pyspark_log.client.config import client_software
from pyspark_log.client.connection import BrokerConnection, Connector
from pyspark_log.client.errors import BrokerConnectionError, error_for
from pyspark_log.wire import ErrorCode, KafkaError, Message

log = logging.getLogger(__name__)

COORDINATOR_GONE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


class CoordinatorLink:
    """FindCoordinator plus a dedicated connection; all on the consumer's loop."""

    def __init__(self, cluster: Cluster, group_id: str, config: Mapping[str, Any], connector: Connector) -> None:
        self._cluster = cluster
        self.group_id = group_id
        self._config = config
        self._connector = connector
        self.node_id: int | None = None
        self._conn: BrokerConnection | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()

    @property
    def known(self) -> bool:
        return self._conn is not None and self._conn.ready

    def mark_unknown(self, reason: str = "") -> None:
        if self._conn is not None:
            log.info("group %s: forgetting coordinator %s (%s)", self.group_id, self.node_id, reason)
            self._conn.close(BrokerConnectionError(f"coordinator of {self.group_id!r} forgotten: {reason}"))
        self._conn = None
        self.node_id = None

    def close(self) -> None:
        self.mark_unknown("closing")

    async def connection(self) -> BrokerConnection:
        """A ready connection to the coordinator; raises a (retriable) KafkaError if there is none yet."""
        conn = self._conn
        if conn is not None and conn.ready:
            return conn
        async with self._connecting:
            if self._conn is not None and self._conn.ready:
                return self._conn
            if self._conn is not None:
                self.mark_unknown("reconnecting")
            node = await self._cluster.find_coordinator(
                0, self.group_id, context=f"find coordinator of group {self.group_id!r}"
            )
            broker = self._cluster.metadata.brokers.get(node)
            if broker is None:
                raise error_for(ErrorCode.COORDINATOR_NOT_AVAILABLE, context=f"coordinator {node} has no address")
            c = self._config
            conn = BrokerConnection(
                broker.host,
                broker.port,
                node_id=node,
                client_id=c["client.id"],
                request_timeout_ms=c["request.timeout.ms"],
                connector=self._connector,
                software=client_software(),
            )
            await conn.connect(c["socket.connection.setup.timeout.ms"])
            self._conn, self.node_id = conn, node
            log.debug("group %s: coordinator is node %s", self.group_id, node)
            return conn

    async def request(self, api_key: int, body: Mapping[str, Any], *, timeout_ms: float | None = None) -> Message:
        """Send to the coordinator; a broken connection forgets it (and raises)."""
        conn = await self.connection()
        try:
            resp = await conn.request(api_key, body, timeout_ms=timeout_ms)
        except KafkaError as exc:
            if exc.retriable or isinstance(exc, BrokerConnectionError):
                self.mark_unknown(str(exc))
            raise
        assert resp is not None
        return resp

    def version_for(self, api_key: int) -> int:
        if self._conn is None:
            raise BrokerConnectionError("no coordinator connection")
        return self._conn.version_for(api_key)

    def on_error(self, code: int) -> None:
        """Forget the coordinator if ``code`` says it moved or is unavailable."""
        if code in COORDINATOR_GONE:
            self.mark_unknown(ErrorCode.of(code).name)
