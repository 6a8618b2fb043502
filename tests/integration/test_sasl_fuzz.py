"""Issue #15 fuzz: malformed SaslHandshake / SaslAuthenticate never stop the broker.

One broker with a SASL_PLAINTEXT listener (PLAIN). Cases, each on its own connection, ending in
a half-close: random mechanisms; random auth bytes (NULs, invalid UTF-8, long); SaslAuthenticate
before any handshake, a second handshake; byte-flipped and truncated SASL frames; a v0 handshake
followed by raw garbage tokens. Oracle: the broker answers (whole frames) or closes within a
bound, and afterwards still logs a real user in and answers Metadata on that connection.
"""

from __future__ import annotations

import socket
import struct
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ApiKey, decode_response, encode_request
from tests.integration.fuzz_harness import check_answered_or_closed, exchange

pytestmark = pytest.mark.integration

EXAMPLES = 40
FUZZ = settings(
    max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)  # fmt: skip
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'


def handshake(version: int = 1, mechanism: str = "PLAIN", cid: int = 1) -> bytes:
    return encode_request(ApiKey.SASL_HANDSHAKE, version, cid, "fuzz", {"mechanism": mechanism})


def authenticate(token: bytes, version: int = 2, cid: int = 2) -> bytes:
    return encode_request(ApiKey.SASL_AUTHENTICATE, version, cid, "fuzz", {"auth_bytes": token})


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, tuple[str, int]]]:
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("sasl-fuzz"), overrides=overrides, python=sys.executable) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        yield broker, (host, int(port))


def assert_alive(broker: EmbeddedBroker, addr: tuple[str, int], what: str) -> None:
    assert broker.running, f"broker died after {what}:\n{broker.output()}"
    metadata = encode_request(ApiKey.METADATA, 12, 3, "fuzz", {"topics": [], "allow_auto_topic_creation": False})
    out = exchange(addr, handshake() + authenticate(b"\0alice\0alice-pw") + metadata)
    assert len(out.frames) == 3, f"a real login stopped working after {what}: {out}"
    _, answer = decode_response(ApiKey.SASL_AUTHENTICATE, 2, out.frames[1])
    assert answer.error_code == 0


def flip(frame: bytes, at: int, value: int) -> bytes:
    at = 4 + at % max(1, len(frame) - 4)  # keep the size prefix: corrupt the header or body
    return frame[:at] + bytes([value]) + frame[at + 1 :]


def sasl_cases() -> st.SearchStrategy[bytes]:
    tokens = st.one_of(
        st.binary(max_size=300),
        st.builds(lambda *parts: b"\0".join(parts), *[st.binary(max_size=20)] * 3),
        st.just(b"\0alice\0" + b"x" * 70_000),
        st.just(b"\0\xff\xfe\0pw"),
    )  # fmt: skip
    return st.one_of(
        st.builds(lambda m: handshake(mechanism=m), st.text(max_size=40)),
        st.builds(lambda t: handshake() + authenticate(t), tokens),
        st.builds(authenticate, tokens),  # no handshake first
        st.just(handshake() + handshake()),
        st.just(handshake() + authenticate(b"\0alice\0alice-pw") + handshake()),
        st.builds(
            flip,
            st.sampled_from([handshake(), authenticate(b"\0a\0b")]),
            st.integers(0, 200),
            st.integers(0, 255),
        ),
        st.builds(
            lambda f, n: f[: max(4, n)], st.sampled_from([handshake(), authenticate(b"\0a\0b")]), st.integers(0, 40)
        ),
        st.builds(lambda t: handshake(version=0) + struct.pack(">i", len(t)) + t, tokens),  # v0: raw tokens
        st.builds(
            lambda n, rest: handshake(version=0) + struct.pack(">i", n) + rest,
            st.integers(-(2**31), 2**31 - 1),
            st.binary(max_size=8),
        ),
    )


def test_malformed_sasl_exchanges_are_answered_or_closed(target: tuple[EmbeddedBroker, tuple[str, int]]) -> None:
    broker, addr = target
    seen: list[int] = []

    @FUZZ
    @given(sasl_cases())
    def case(payload: bytes) -> None:
        seen.append(1)
        out = exchange(addr, payload)
        check_answered_or_closed(out, f"SASL payload {payload[:40]!r}")
        assert_alive(broker, addr, f"SASL payload {payload[:40]!r}")

    case()
    assert len(seen) >= EXAMPLES // 2


def test_v0_handshake_then_raw_tokens_logs_in(target: tuple[EmbeddedBroker, tuple[str, int]]) -> None:
    """SaslHandshake v0 (KIP-43): the PLAIN token goes as a bare frame, the answer is a bare frame."""
    broker, addr = target
    token = b"\0alice\0alice-pw"
    metadata = encode_request(ApiKey.METADATA, 12, 3, "fuzz", {"topics": [], "allow_auto_topic_creation": False})
    out = exchange(addr, handshake(version=0) + struct.pack(">i", len(token)) + token + metadata)
    assert len(out.frames) == 3
    assert out.frames[1] == b""  # PLAIN's empty server answer
    with socket.create_connection(addr, timeout=10) as sock:  # a wrong password: closed, no answer
        bad = b"\0alice\0nope"
        sock.sendall(handshake(version=0) + struct.pack(">i", len(bad)) + bad)
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
        assert len(data) == 4 + struct.unpack(">i", data[:4])[0]  # only the handshake response
    assert broker.running
