"""Dial another node on one of its listeners: TCP, then TLS and/or the SASL login that listener asks for.

Every connection a node opens to another (replica fetchers, Raft RPCs, registration and
heartbeats, AlterPartition, forwarding, transaction markers) goes through ``Dialer``; which
listener's security it speaks is ``broker.security.outbound``'s decision.

``Dialer(security, client_id)(host, port)`` returns ``(reader, writer)`` of a connection that is
ready for requests: TLS handshake done (the peer's certificate verified), and for SASL listeners
SaslHandshake v1 then SaslAuthenticate v2 (KIP-152) with PLAIN or SCRAM-SHA-256/512 (RFC 5802 /
7677, the server's signature checked). When the peer answers a session lifetime (KIP-368,
``connections.max.reauth.ms``), ``Dialer.stale(writer)`` turns true at 80% of it: the callers then
open a fresh connection for their next request instead of sending on one the peer will close
(pylog's nodes re-connect rather than re-authenticate in band). Any failure raises ``DialError``
(an ``OSError``, so every caller's "connection failed, retry later" path takes it) with the
peer's message and never the password; the half-open connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time
import weakref
from collections.abc import Mapping
from typing import Any

from broker.security.outbound import PLAINTEXT, OutboundSecurity, SaslLogin
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.headers import decode_response, encode_request
from pyspark_log.wire.scram import ScramClient, ScramError

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
STREAM_LIMIT = 1 << 20
_MAX_SASL_FRAME = 1 << 20
STALE_AT = 0.8  # of the session lifetime: leaves time for the requests in flight
REFUSAL_LOG_INTERVAL_S = 10.0  # Raft retries every few ms: one warning per peer per interval
_last_refusal_log: dict[str, float] = {}


class DialError(ConnectionError):
    """A connection to a peer could not be made ready (TLS or SASL refused, peer closed it)."""


class AuthenticationError(DialError):
    """The peer refused this node's SASL login (SASL_AUTHENTICATION_FAILED or an unsupported mechanism)."""


class Dialer:
    """Opens connections secured as ``security`` says; one per kind of traffic, shared by its users."""

    def __init__(self, security: OutboundSecurity = PLAINTEXT, *, client_id: str = "pylog-node") -> None:
        self.security = security
        self.client_id = client_id
        self._stale_at: weakref.WeakKeyDictionary[asyncio.StreamWriter, float] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"Dialer({self.security.listener}, {self.security.protocol})"

    async def __call__(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        tls = self.security.tls
        if tls is not None:
            try:
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls.check_hostname else None, limit=STREAM_LIMIT
                )
            except ssl.SSLError as exc:
                _warn(
                    f"{host}:{port}", "TLS handshake with %s:%s (listener %s) failed: %s (check ssl.truststore.*, "
                    "the certificates' host names, ssl.endpoint.identification.algorithm)",
                    host, port, self.security.listener, exc,
                )  # fmt: skip
                raise
        else:
            reader, writer = await asyncio.open_connection(host, port, limit=STREAM_LIMIT)
        login = self.security.sasl
        if login is not None:
            try:
                lifetime_ms, sent_at = await sasl_login(reader, writer, login, self.client_id, f"{host}:{port}")
            except BaseException:
                writer.close()
                raise
            if lifetime_ms > 0:
                self._stale_at[writer] = sent_at + lifetime_ms * STALE_AT / 1000
        return reader, writer

    def stale(self, writer: asyncio.StreamWriter) -> bool:
        """The peer will soon end this connection's SASL session: use a fresh connection."""
        deadline = self._stale_at.get(writer)
        return deadline is not None and time.monotonic() >= deadline


async def sasl_login(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, login: SaslLogin, client_id: str, where: str
) -> tuple[int, float]:
    """Authenticate on a fresh connection (see the module docstring); DialError on any refusal.
    Returns the session lifetime the peer announced (ms; 0: none) and when (``time.monotonic``)
    the last SaslAuthenticate was sent: the peer starts the session after that instant, so a
    lifetime counted from it ends no later than the peer's, however long the answer took."""
    handshake = await _call(
        reader, writer, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": login.mechanism}, client_id=client_id, where=where
    )
    if handshake.error_code:
        offered = ", ".join(handshake.mechanisms) or "none"
        raise AuthenticationError(f"{where} does not offer SASL {login.mechanism} (it offers: {offered})")

    lifetime_ms = 0
    sent_at = time.monotonic()

    async def step(token: bytes) -> bytes:
        nonlocal lifetime_ms, sent_at
        sent_at = time.monotonic()
        answer = await _call(
            reader, writer, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}, client_id=client_id, where=where
        )
        if answer.error_code:
            name = _error_name(answer.error_code)
            _warn(
                where, "SASL %s login as %s at %s refused: %s %s (check the username/password of the "
                "listener's sasl.jaas.config)", login.mechanism, login.username, where, name,
                answer.error_message or "",
            )  # fmt: skip
            raise AuthenticationError(f"SASL {login.mechanism} login at {where} refused: {name} {answer.error_message}")
        lifetime_ms = int(answer.session_lifetime_ms)
        return bytes(answer.auth_bytes)

    if login.mechanism == "PLAIN":
        await step(b"\0" + login.username.encode() + b"\0" + login.password.encode())
        return lifetime_ms, sent_at
    scram = ScramClient(login.mechanism, login.username, login.password)
    try:
        server_first = await step(scram.first())
        # PBKDF2 takes milliseconds: off the event loop
        client_final = await asyncio.get_running_loop().run_in_executor(None, scram.final, server_first)
        scram.verify(await step(client_final))
    except ScramError as exc:
        raise AuthenticationError(f"{exc} ({where})") from None
    return lifetime_ms, sent_at


def _warn(where: str, message: str, *args: object) -> None:
    """A warning about a peer, at most once per ``REFUSAL_LOG_INTERVAL_S`` (retries are frequent)."""
    now = time.monotonic()
    if now - _last_refusal_log.get(where, -REFUSAL_LOG_INTERVAL_S) >= REFUSAL_LOG_INTERVAL_S:
        _last_refusal_log[where] = now
        log.warning(message, *args)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


async def _call(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int, version: int,
    body: Mapping[str, Any], *, client_id: str, where: str,
) -> Any:  # fmt: skip
    writer.write(encode_request(api_key, version, 0, client_id, body))
    await writer.drain()
    try:
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        if not 0 < size <= _MAX_SASL_FRAME:
            raise DialError(f"{where}: bad frame size {size} during SASL authentication")
        frame = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise DialError(f"{where} closed the connection during SASL authentication") from None
    try:
        return decode_response(api_key, version, frame)[1]
    except Exception as exc:  # noqa: BLE001 - an unreadable answer is a failed dial
        raise DialError(f"{where}: unreadable SASL response: {exc!r}") from None
