"""One TCP connection to one broker: framed requests, pipelined, responses matched in order.

Lifecycle (the connection is the single owner of its socket)::

    new --connect()--> negotiating (ApiVersions) --> ready --close(exc)--> closed (for good)

* ``connect`` opens the socket (``socket.connection.setup.timeout.ms``) and negotiates versions
  (KIP-511): it sends ApiVersions at our highest version; a broker that does not know it answers
  UNSUPPORTED_VERSION with a v0 body listing its ranges, and we retry with the highest version in
  that range. Afterwards ``version_for(api)`` is the highest version both sides speak.
* ``request`` assigns the next correlation id, writes the frame and waits for the response, at
  most ``max_in_flight`` requests outstanding (pipelining); ``expect_response=False`` (acks=0
  produce) returns once the frame is written. Each request has its own timeout
  (``request.timeout.ms``); since responses come back strictly in order, a timed-out request
  closes the connection (as Kafka's NetworkClient does).
* One reader task owns the read side. When it stops (EOF, reset, a frame that does not match the
  oldest request) the connection closes and **every request waiting on it fails** with the same
  ``BrokerConnectionError`` / ``ProtocolError`` (docs/architecture.md ("one owner per file and per background
  loop")). A response body that does
  not decode fails only its own request with ``ProtocolError``; framing is intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from pyspark_log.client.errors import (
    BrokerConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedFeatureError,
    error_for,
)
from pyspark_log.client.stream import open_stream
from pyspark_log.wire import (
    ApiKey,
    ErrorCode,
    KafkaError,
    Message,
    decode_response,
    encode_request_parts,
    frame_chunks,
    peek_correlation_id,
)
from pyspark_log.wire.registry import find_api

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 1 << 30
# Chunks of a request frame this big (a batch-API records section) are written as they are,
# without joining them into the frame's bytes: one copy fewer, the kernel's being the only one.
DIRECT_WRITE_BYTES = 64 * 1024

# The versions this client knows how to build and read, per API (intersected with the declared
# schemas and the broker's ranges). Fetch stops at 12: from 13 topics are named by id;
# OffsetFetch at 7: from 8 requests are batched per group; AddPartitionsToTxn at 3: v4 is
# broker-to-broker only (KIP-890).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 10),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 8),
    ApiKey.METADATA: (1, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),  # KIP-455 (v1: KIP-860)
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.FIND_COORDINATOR: (1, 3),
    ApiKey.OFFSET_COMMIT: (2, 9),  # v9: member epochs of KIP-848 consumer groups
    ApiKey.OFFSET_FETCH: (1, 7),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),  # v5: group types (KIP-848)
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),  # KIP-848 groups (the admin describes them first)
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),  # group.protocol=consumer (group/consumer_member.py)
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
}


class Reader(Protocol):
    """The read half of a transport (``stream.StreamReader``, ``asyncio.StreamReader`` or a fake)."""

    async def readexactly(self, n: int) -> bytes | bytearray: ...


class Writer(Protocol):
    """The write half of a transport (``stream.StreamWriter``, ``asyncio.StreamWriter`` or a fake)."""

    def write(self, data: bytes | memoryview) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


Connector = Callable[[str, int], Awaitable[tuple[Reader, Writer]]]


async def open_tcp(host: str, port: int) -> tuple[Reader, Writer]:
    """The default connector: a plain TCP stream (``stream.open_stream``: responses are received
    straight into their frame buffers; TCP_NODELAY is set by asyncio)."""
    return await open_stream(host, port)


def client_range(api_key: int) -> tuple[int, int] | None:
    """Versions this client speaks for ``api_key`` (within the declared schemas), or None."""
    ours = CLIENT_VERSIONS.get(api_key)
    api = find_api(api_key)
    if ours is None or api is None:
        return None
    lo, hi = max(ours[0], api.valid.lo), min(ours[1], api.valid.hi)
    return (lo, hi) if lo <= hi else None


class BrokerConnection:
    """A connection to ``host:port`` (``node_id`` is the broker id, negative for bootstrap)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int,
        client_id: str,
        request_timeout_ms: float = 30000,
        max_in_flight: int = 5,
        connector: Connector = open_tcp,
        software: tuple[str, str] = ("pylog-python", "0"),
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight
        self._connector = connector
        self._software = software
        self._max_frame_bytes = max_frame_bytes
        self._writer: Writer | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._in_flight: deque[tuple[int, int, int, asyncio.Future[Message]]] = deque()
        self._slots = asyncio.Semaphore(max_in_flight)
        self._next_correlation_id = 1
        self._closed_exc: KafkaError | None = None
        self._pending_writes = 0
        self.api_versions: dict[int, tuple[int, int]] = {}
        # KIP-219: a response's throttle_time_ms holds further requests back until this loop time
        self.throttled_until = 0.0
        self.throttle_time_ms_total = 0  # sum of the throttle times the broker asked for
        self.on_close: Callable[[BrokerConnection, KafkaError], None] | None = None
        # the client's ClientMetrics (metrics.py), set by Cluster: bytes and latency per request
        self.metrics: Any = None

    def __repr__(self) -> str:
        return f"BrokerConnection(node={self.node_id}, {self.host}:{self.port})"

    @property
    def closed(self) -> bool:
        return self._closed_exc is not None

    @property
    def ready(self) -> bool:
        return self._writer is not None and not self.closed and bool(self.api_versions)

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight) + self._pending_writes

    def has_capacity(self) -> bool:
        return self.ready and self.in_flight_count < self.max_in_flight

    # -- connect and negotiate -----------------------------------------------------------------

    async def connect(self, timeout_ms: float) -> None:
        """Open the socket and negotiate API versions; raises BrokerConnectionError on failure."""
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                reader, writer = await self._connector(self.host, self.port)
        except TimeoutError:
            self.close(BrokerConnectionError(f"connect to {self.host}:{self.port} timed out after {timeout_ms:.0f} ms"))
            raise self._closed_exc from None  # type: ignore[misc]
        except OSError as exc:
            self.close(BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}"))
            raise self._closed_exc from None  # type: ignore[misc]
        self._writer = writer
        self._reader_task = asyncio.get_running_loop().create_task(
            self._read_loop(reader), name=f"pylog-conn-reader-{self.node_id}"
        )
        try:
            await self._negotiate()
        except KafkaError as exc:
            self.close(exc)
            raise
        except BaseException:  # cancelled mid-negotiation: leave nothing half-open
            self.close(BrokerConnectionError(f"connect to {self.host}:{self.port} was abandoned"))
            raise

    async def _negotiate(self) -> None:
        lo, version = client_range(ApiKey.API_VERSIONS) or (0, 0)
        name, ver = self._software
        for _ in range(3):
            body = {"client_software_name": name, "client_software_version": ver}
            resp = await self._send(ApiKey.API_VERSIONS, version, body, True, self.request_timeout_ms)
            assert resp is not None
            broker = {int(e.api_key): (int(e.min_version), int(e.max_version)) for e in resp.api_keys}
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                theirs = broker.get(ApiKey.API_VERSIONS, (0, 0))
                retry = min(version - 1, theirs[1])
                if retry < max(lo, theirs[0]):
                    raise UnsupportedFeatureError(f"broker {self} speaks no ApiVersions version we know")
                version = retry
                continue
            if resp.error_code != ErrorCode.NONE:
                raise error_for(resp.error_code, context=f"ApiVersions from {self.host}:{self.port}")
            self.api_versions = broker
            return
        raise UnsupportedFeatureError(f"ApiVersions negotiation with {self} did not converge")

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        """The versions both sides speak for ``api_key`` (None if none)."""
        ours = client_range(api_key)
        theirs = self.api_versions.get(int(api_key))
        if ours is None or theirs is None:
            return None
        lo, hi = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        return (lo, hi) if lo <= hi else None

    def supports(self, api_key: int) -> bool:
        return self.version_range(api_key) is not None

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both sides speak; UnsupportedFeatureError if none."""
        common = self.version_range(api_key)
        if common is None:
            name = ApiKey(api_key).title if api_key in ApiKey._value2member_map_ else str(api_key)
            raise UnsupportedFeatureError(
                f"broker {self.host}:{self.port} and this client share no version of {name} "
                f"(broker: {self.api_versions.get(int(api_key))}, client: {client_range(api_key)})"
            )
        return common[1]

    # -- requests ------------------------------------------------------------------------------

    async def request(
        self,
        api_key: int,
        body: Mapping[str, Any],
        *,
        version: int | None = None,
        expect_response: bool = True,
        timeout_ms: float | None = None,
    ) -> Message | None:
        """Send one request and return its decoded response body (None when none is expected)."""
        if not self.ready:
            raise self._closed_exc or BrokerConnectionError(f"{self} is not connected")
        if version is None:
            version = self.version_for(api_key)
        return await self._send(api_key, version, body, expect_response, timeout_ms or self.request_timeout_ms)

    async def _send(
        self, api_key: int, version: int, body: Mapping[str, Any], expect_response: bool, timeout_ms: float
    ) -> Message | None:
        self._pending_writes += 1
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                await self._slots.acquire()
        except TimeoutError:
            raise KafkaTimeoutError(f"no free request slot on {self} within {timeout_ms:.0f} ms") from None
        finally:
            self._pending_writes -= 1
        try:
            await self._wait_throttle()
            if self._closed_exc is not None or self._writer is None:
                raise self._closed_exc or BrokerConnectionError(f"{self} is not connected")
            correlation_id = self._next_correlation_id
            self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
            chunks = frame_chunks(
                encode_request_parts(api_key, version, correlation_id, self.client_id, body), DIRECT_WRITE_BYTES
            )
            fut: asyncio.Future[Message] | None = None
            if expect_response:
                fut = asyncio.get_running_loop().create_future()
                self._in_flight.append((correlation_id, int(api_key), version, fut))
            metrics = self.metrics
            if metrics is not None:
                metrics.on_request(sum(map(len, chunks)))
                sent_at = asyncio.get_running_loop().time()
            try:
                for chunk in chunks:  # one frame: no await between its chunks
                    self._writer.write(chunk)
                await self._writer.drain()
            except (OSError, RuntimeError) as exc:
                self.close(BrokerConnectionError(f"write to {self} failed: {exc}"))
                raise self._closed_exc from None  # type: ignore[misc]
            if fut is None:
                return None
            try:
                async with asyncio.timeout(timeout_ms / 1000.0):
                    resp = await asyncio.shield(fut)
                if metrics is not None:
                    metrics.on_latency((asyncio.get_running_loop().time() - sent_at) * 1000.0)
                return resp
            except TimeoutError:
                name = ApiKey(api_key).title if api_key in ApiKey._value2member_map_ else str(api_key)
                timed_out = KafkaTimeoutError(f"{name} request to {self} timed out after {timeout_ms:.0f} ms")
                self.close(timed_out)
                raise timed_out from None
        finally:
            self._slots.release()

    async def _wait_throttle(self) -> None:
        """KIP-219: the broker answered a request at once with ``throttle_time_ms`` and mutes
        the channel for that long; the client sends nothing on it meanwhile (Kafka documentation §4.9 "Quotas":
        the client sends no more requests during the throttle time)."""
        delay = self.throttled_until - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(delay)

    async def _read_loop(self, reader: Reader) -> None:
        exc: KafkaError
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                self._check_frame_size(size)
                frame = await reader.readexactly(size)
                self._dispatch(frame)
        except asyncio.IncompleteReadError:
            exc = BrokerConnectionError(f"{self} closed by the broker")
        except (OSError, ConnectionError) as err:
            exc = BrokerConnectionError(f"{self} failed: {err}")
        except ProtocolError as err:
            exc = err
        except asyncio.CancelledError:
            return
        except Exception as err:
            log.exception("connection reader for %s died", self)
            exc = ProtocolError(f"reader of {self} died: {err!r}")
        self.close(exc)

    def _check_frame_size(self, size: int) -> None:
        if size < 4 or size > self._max_frame_bytes:
            raise ProtocolError(f"bad response frame size {size} from {self}")

    def _dispatch(self, frame: bytes | bytearray) -> None:
        correlation_id = peek_correlation_id(frame)
        if self.metrics is not None:
            self.metrics.on_response(len(frame) + 4)
        if not self._in_flight:
            raise ProtocolError(f"{self} sent a response (correlation id {correlation_id}) nobody asked for")
        expected, api_key, version, fut = self._in_flight.popleft()
        if correlation_id != expected:
            raise ProtocolError(f"{self} answered correlation id {correlation_id}, expected {expected}")
        try:
            _, body = decode_response(api_key, version, frame)
        except KafkaError as err:
            if not fut.done():
                fut.set_exception(ProtocolError(f"cannot decode {ApiKey(api_key).title} v{version} response: {err}"))
            return
        throttle_ms = body.get("throttle_time_ms") or 0
        if throttle_ms > 0:
            self.throttle_time_ms_total += throttle_ms
            until = asyncio.get_running_loop().time() + throttle_ms / 1000
            self.throttled_until = max(self.throttled_until, until)
        if not fut.done():
            fut.set_result(body)

    def close(self, exc: KafkaError | None = None) -> None:
        """Close for good; every request still waiting fails with ``exc``."""
        if self._closed_exc is not None:
            return
        self._closed_exc = exc or BrokerConnectionError(f"{self} was closed")
        while self._in_flight:
            *_, fut = self._in_flight.popleft()
            if not fut.done():
                fut.set_exception(self._closed_exc)
                fut.exception()  # mark retrieved: a cancelled waiter must not log "never retrieved"
        task = self._reader_task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        if self.on_close is not None:
            self.on_close(self, self._closed_exc)
