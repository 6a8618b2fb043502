"""Issue #15 fuzz: TLS garbage never stops the broker (docs/architecture.md ("Kafka error codes for bad input,
assertions for invariants")).

One broker with a PLAINTEXT and an SSL listener. Cases, each on its own connection:
- bytes that are not a TLS ClientHello (random, plaintext Kafka, a TLS record header announcing
  any length, a ClientHello cut anywhere) sent to the SSL port, then half-closed: the broker
  closes the connection (after at most a TLS alert) within a bound;
- a completed TLS handshake followed by raw bytes that corrupt the record layer: closed;
- well-formed TLS carrying malformed Kafka frames (negative or huge sizes, random bodies):
  closed or answered, as on a plaintext listener.
Oracle after every case: the process runs and answers ApiVersions over TLS and over PLAINTEXT.
Hypothesis runs derandomized, without shrinking (the broker's state changes between examples).
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import struct
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ApiKey, decode_response, encode_request
from tests.integration.fuzz_harness import ANSWER_TIMEOUT_S, Outcome, _split_frames, exchange
from tests.tls_certs import Certs, make_certs
from tests.waiting import Deadline

pytestmark = pytest.mark.integration

EXAMPLES = 40
FUZZ = settings(
    max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)  # fmt: skip


class TlsBroker:
    def __init__(self, broker: EmbeddedBroker, addresses: dict[str, str], certs: Certs) -> None:
        self.broker = broker
        self.plain = _addr(addresses["PLAINTEXT"])
        self.tls = _addr(addresses["SSL"])
        self.client = ssl.create_default_context(cafile=str(certs.ca))
        self.client_hello = self._client_hello()

    def _client_hello(self) -> bytes:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = self.client.wrap_bio(incoming, outgoing, server_hostname="localhost")
        with pytest.raises(ssl.SSLWantReadError):
            obj.do_handshake()
        return outgoing.read()

    def tls_exchange(self, payload: bytes, *, raw_after: bytes = b"") -> Outcome:
        """A TLS connection (memory BIOs, so it can half-close with close_notify and go on
        reading): ``payload`` as application data, ``raw_after`` beneath the record layer; then
        close_notify, and everything the broker sends until it closes, decrypted."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = self.client.wrap_bio(incoming, outgoing, server_hostname="localhost")
        deadline = Deadline(ANSWER_TIMEOUT_S)
        with socket.create_connection(self.tls, timeout=ANSWER_TIMEOUT_S) as sock:
            while True:
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    sock.sendall(outgoing.read())
                    data = sock.recv(1 << 16)
                    assert data, "the broker closed during a client's handshake"
                    incoming.write(data)
            if payload:
                tls.write(payload)
            sock.sendall(outgoing.read())
            if raw_after:
                sock.sendall(raw_after)
            with contextlib.suppress(ssl.SSLError):
                tls.unwrap()  # close_notify: the TLS way of half-closing
            with contextlib.suppress(OSError):
                sock.sendall(outgoing.read())
            plain = bytearray()
            out = Outcome()
            while not out.closed:
                if deadline.expired():
                    out.timed_out = True
                    break
                try:
                    data = sock.recv(1 << 16)
                except (ConnectionResetError, BrokenPipeError):
                    data = b""
                if not data:
                    incoming.write_eof()
                    out.closed = True
                else:
                    incoming.write(data)
                while True:
                    try:
                        plain += tls.read(1 << 16)
                    except ssl.SSLWantReadError:
                        break
                    except (ssl.SSLZeroReturnError, ssl.SSLError):
                        out.closed = True
                        break
        out.frames, out.trailing = _split_frames(bytes(plain))
        return out

    def assert_alive(self, what: str) -> None:
        assert self.broker.running, f"broker died after {what}; its output:\n{self.broker.output()}"
        frame = encode_request(ApiKey.API_VERSIONS, 3, 4242, "fuzz", {"client_software_name": "fuzz"})
        for out in (exchange(self.plain, frame), self.tls_exchange(frame)):
            assert out.frames, f"broker stopped answering after {what}: {out}"
            got_id, resp = decode_response(ApiKey.API_VERSIONS, 3, out.frames[0])
            assert (got_id, resp.error_code) == (4242, 0)


def _addr(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server.both),
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("tls-fuzz"), overrides=overrides, python=sys.executable) as broker:
        ready = re.search(r"pylog broker ready: .*listeners=(\S+)", broker.output())
        assert ready is not None
        yield TlsBroker(broker, dict(uri.split("://") for uri in ready.group(1).split(",")), certs)


def not_a_client_hello(target: TlsBroker) -> st.SearchStrategy[bytes]:
    hello = target.client_hello
    return st.one_of(
        st.binary(min_size=1, max_size=4096),
        st.builds(lambda n: struct.pack(">BHH", 0x16, 0x0301, n), st.integers(0, 0xFFFF)),
        st.builds(lambda cut: hello[:cut], st.integers(1, len(hello) - 1)),
        st.builds(
            lambda i, b: hello[:i] + bytes([b]) + hello[i + 1 :], st.integers(0, len(hello) - 1), st.integers(0, 255)
        ),
        st.just(encode_request(ApiKey.API_VERSIONS, 3, 1, "plaintext", {"client_software_name": "x"})),
        st.just(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    )


def test_garbage_instead_of_a_handshake_is_closed(target: TlsBroker) -> None:
    @FUZZ
    @given(st.data())
    def case(data: st.DataObject) -> None:
        seen.append(1)
        payload = data.draw(not_a_client_hello(target))
        out = exchange(target.tls, payload)
        assert out.closed, f"TLS port neither closed nor refused after {payload[:32]!r}: {out}"
        target.assert_alive(f"pre-handshake garbage {payload[:32]!r}")

    seen: list[int] = []
    case()
    assert len(seen) >= EXAMPLES // 2  # the cases ran (hypothesis may skip duplicates)


def test_garbage_under_an_established_tls_session_is_closed(target: TlsBroker) -> None:
    @FUZZ
    @given(st.binary(min_size=1, max_size=2048))
    def case(garbage: bytes) -> None:
        seen.append(1)
        out = target.tls_exchange(b"", raw_after=garbage)
        assert out.closed, f"corrupt TLS records were neither refused nor closed: {out}"
        target.assert_alive(f"post-handshake garbage {garbage[:32]!r}")

    seen: list[int] = []
    case()
    assert len(seen) >= EXAMPLES // 2  # the cases ran (hypothesis may skip duplicates)


def test_malformed_kafka_frames_inside_tls_are_answered_or_closed(target: TlsBroker) -> None:
    @FUZZ
    @given(st.one_of(
        st.builds(lambda n, rest: struct.pack(">i", n) + rest, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=9)),
        st.builds(lambda body: struct.pack(">i", len(body)) + body, st.binary(min_size=0, max_size=512)),
    ))  # fmt: skip
    def case(frame: bytes) -> None:
        seen.append(1)
        out = target.tls_exchange(frame)
        assert not out.timed_out, f"neither answered nor closed after {frame[:32]!r}"
        assert out.trailing == b""
        target.assert_alive(f"a malformed frame inside TLS {frame[:32]!r}")

    seen: list[int] = []
    case()
    assert len(seen) >= EXAMPLES // 2  # the cases ran (hypothesis may skip duplicates)
