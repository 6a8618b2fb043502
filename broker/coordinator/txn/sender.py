"""A small broker-to-broker client: WriteTxnMarkers (27) to the leader of a partition on another
broker (Kafka ``TransactionMarkerChannelManager``'s network side), and any other inter-broker
request through ``request`` (KIP-932's persister RPCs to a share coordinator).

One connection per destination broker, one request at a time on it (markers are few and small):
each destination has one ``_Connection`` whose lock serialises the requests; the first request
opens the socket under that lock (so concurrent first requests share it), and a request that fails
or times out while holding the lock closes the socket for the next one to reopen (a waiter whose
own wait timed out touches nothing). Frames are built and parsed with ``pyspark_log.wire``
(request header v2 for the flexible v1).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broker.network.dial import Dialer
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import DecodeError, ErrorCode
from pyspark_log.wire.headers import decode_response, encode_request

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
REQUEST_TIMEOUT_S = 30.0
_SIZE = struct.Struct(">i")
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """The markers of one transaction for the partitions one broker leads."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


class _Connection:
    """The socket to one broker (None until opened, again after a failure) and its request lock."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lock = asyncio.Lock()

    def reset(self) -> None:
        writer, self.reader, self.writer = self.writer, None, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()


class BrokerSender:
    """Sends WriteTxnMarkers to other brokers; ``close()`` drops every connection."""

    def __init__(self, client_id: str = "pylog-txn-coordinator", dialer: Dialer | None = None) -> None:
        self._client_id = client_id
        self._dial = dialer or Dialer(client_id=client_id)  # the inter-broker listener's security
        self._connections: dict[tuple[str, int], _Connection] = {}
        self._correlation = itertools.count(1)

    async def write_txn_markers(self, host: str, port: int, request: MarkerRequest) -> dict[TopicPartition, int]:
        """Per partition the error code of the destination; a failure to get an answer (network,
        timeout, an unreadable or mismatched response) answers every partition
        ``REQUEST_TIMED_OUT`` (retriable)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in request.partitions:
            by_topic.setdefault(topic, []).append(partition)
        body = {
            "markers": [
                {
                    "producer_id": request.producer_id,
                    "producer_epoch": request.producer_epoch,
                    "transaction_result": request.commit,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": request.coordinator_epoch,
                }
            ]
        }
        try:
            response = await asyncio.wait_for(self._call(host, port, body), REQUEST_TIMEOUT_S)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            log.info("WriteTxnMarkers to %s:%s failed: %s", host, port, exc)
            return dict.fromkeys(request.partitions, int(ErrorCode.REQUEST_TIMED_OUT))
        except (DecodeError, ValueError) as exc:
            log.warning("WriteTxnMarkers to %s:%s: unreadable response: %s", host, port, exc)
            return dict.fromkeys(request.partitions, int(ErrorCode.REQUEST_TIMED_OUT))
        results: dict[TopicPartition, int] = {}
        for marker in response.markers:
            if marker.producer_id != request.producer_id:
                continue
            for topic in marker.topics:
                for part in topic.partitions:
                    results[(topic.name, part.partition_index)] = part.error_code
        for tp in request.partitions:
            results.setdefault(tp, int(ErrorCode.UNKNOWN_SERVER_ERROR))
        return results

    async def request(self, host: str, port: int, api_key: ApiKey, version: int, body: dict[str, Any]) -> Any:
        """One request to the broker at host:port and its decoded response, within
        ``REQUEST_TIMEOUT_S``. Raises OSError, TimeoutError, IncompleteReadError (network),
        DecodeError or ValueError (an unreadable or mismatched response)."""
        return await asyncio.wait_for(self._call(host, port, body, api_key, version), REQUEST_TIMEOUT_S)

    async def _call(
        self,
        host: str,
        port: int,
        body: dict[str, Any],
        api_key: ApiKey = ApiKey.WRITE_TXN_MARKERS,
        version: int = WRITE_TXN_MARKERS_VERSION,
    ) -> Any:
        conn = self._connections.get((host, port))
        if conn is None:  # no await since the lookup: concurrent first calls share this one
            conn = self._connections[(host, port)] = _Connection()
        async with conn.lock:
            try:
                return await self._exchange(conn, host, port, body, api_key, version)
            except BaseException:
                # Failed, timed out (cancelled) or desynchronised mid-request: the stream is in an
                # unknown state. Only the lock holder gets here, so the socket it closes is its own.
                conn.reset()
                raise

    async def _exchange(  # noqa: PLR0917
        self, conn: _Connection, host: str, port: int, body: dict[str, Any], api_key: ApiKey, version: int
    ) -> Any:
        """One request and its response on ``conn`` (opened first if needed); the lock is held."""
        if conn.writer is not None and self._dial.stale(conn.writer):  # KIP-368: the session is ending
            conn.reset()
        if conn.writer is None or conn.reader is None:
            conn.reader, conn.writer = await self._dial(host, port)
        correlation_id = next(self._correlation)
        frame = encode_request(api_key, version, correlation_id, self._client_id, body)
        conn.writer.write(frame)
        await conn.writer.drain()
        size = _SIZE.unpack(await conn.reader.readexactly(4))[0]
        payload = await conn.reader.readexactly(size)
        got, response = decode_response(api_key, version, payload)
        if got != correlation_id:
            raise ValueError(f"correlation id {got}, expected {correlation_id}")
        return response

    def close(self, keys: Iterable[tuple[str, int]] | None = None) -> None:
        for key in list(self._connections if keys is None else keys):
            conn = self._connections.pop(key, None)
            if conn is not None:
                conn.reset()
