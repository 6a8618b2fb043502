"""TLS on a raw non-blocking socket: ``ssl.SSLObject`` over memory BIOs, driven by the event loop.

``Connection`` keeps raw sockets (``os.sendfile`` for plaintext fetches); under TLS it hands its
byte stream to a ``TlsSession`` instead: ``handshake`` once, then ``recv_into`` / ``sendall``.
The kernel cannot encrypt, so file regions are read into memory and encrypted here (the caller
reads large regions off the event loop). Encryption happens in ``WRITE_CHUNK_BYTES`` pieces with a
yield between them, so one large response does not hold the loop for long.

Concurrency: the reader and the writer task share the SSLObject on one thread (the event loop),
so their calls never overlap; bytes the TLS layer produces (records, alerts, TLS 1.3 session
tickets and key updates) leave through ``_flush``, which a lock keeps in production order.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable

RECV_BYTES = 256 * 1024
WRITE_CHUNK_BYTES = 256 * 1024

# RFC 2253 short names Java's X500Principal.getName() uses (Kafka's DEFAULT principal mapping).
_DN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
    "emailAddress": "EMAILADDRESS",
}


class TlsSession:
    """Server side of one TLS connection on ``sock`` (already non-blocking)."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._send_lock = asyncio.Lock()

    async def handshake(self) -> None:
        """Complete the handshake; raises ``ssl.SSLError`` (a bad or plaintext peer) or
        ``ConnectionError`` (the peer left)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush(loop)
                if not await self._fill(loop):
                    raise ConnectionError("peer closed during the TLS handshake") from None
            except ssl.SSLError:
                await self._flush_quietly(loop)  # the alert tells the client why
                raise
        await self._flush(loop)

    def principal(self, mapping: Callable[[str], str] | None = None) -> str:
        """``User:`` + the client certificate's subject in RFC 2253 form (``User:CN=alice,OU=eng``,
        Kafka's DEFAULT mapping) or what ``mapping`` (``ssl.principal.mapping.rules``) makes of it,
        or ``User:ANONYMOUS`` without a client certificate. ``mapping`` may raise (no rule applies)."""
        cert = self._tls.getpeercert()
        subject = cert.get("subject") if cert else None
        if not subject:
            return "User:ANONYMOUS"
        parts = []
        for rdn in reversed(subject):  # RFC 2253 lists the most specific name first
            parts.append("+".join(f"{_DN_NAMES.get(str(k), str(k))}={_escape(str(v))}" for k, v in rdn))
        dn = ",".join(parts)
        return "User:" + (mapping(dn) if mapping is not None else dn)

    @property
    def version(self) -> str | None:
        return self._tls.version()

    async def recv_into(self, view: memoryview) -> int:
        """Decrypted bytes into ``view``; 0 when the peer closed. It waits only while nothing is
        decryptable, then fills ``view`` with every record already received (one TLS record holds
        at most 16 KiB: returning after each would cost a read-loop pass per record)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                n: int = self._tls.read(len(view), view)  # type: ignore[assignment]  # with a buffer: a count
                break
            except ssl.SSLWantReadError:
                if self._outgoing.pending:
                    await self._flush(loop)
                if not await self._fill(loop):
                    return 0
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return 0
        while n < len(view):
            try:
                more: int = self._tls.read(len(view) - n, view[n:])  # type: ignore[assignment]
            except (ssl.SSLWantReadError, ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
            if not more:
                break
            n += more
        return n

    async def sendall(self, data: bytes | bytearray | memoryview) -> None:
        loop = asyncio.get_running_loop()
        with memoryview(data) as view:
            for start in range(0, len(view), WRITE_CHUNK_BYTES):
                self._tls.write(view[start : start + WRITE_CHUNK_BYTES])
                await self._flush(loop)

    async def _fill(self, loop: asyncio.AbstractEventLoop) -> bool:
        data = await loop.sock_recv(self._sock, RECV_BYTES)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    async def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        async with self._send_lock:
            data = self._outgoing.read()
            if data:
                await loop.sock_sendall(self._sock, data)

    async def _flush_quietly(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await self._flush(loop)
        except OSError:
            pass


def _escape(value: str) -> str:
    """RFC 2253 escaping of an attribute value."""
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
