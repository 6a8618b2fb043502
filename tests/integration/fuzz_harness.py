"""The harness of ``test_broker_fuzz``: raw frame exchange with one broker, the oracle every case
is checked against (answered whole or closed, broker alive), the librdkafka traffic that runs
beside the fuzzing, the valid base requests and the mutations applied to them."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.wire import ApiKey, decode_request, decode_response, encode_request
from pyspark_log.wire.errors import DecodeError
from pyspark_log.wire.errors import KafkaError as WireKafkaError
from tests.waiting import Deadline

REQUEST_MAX_BYTES = 1 << 20  # socket.request.max.bytes of the fuzzed broker
ANSWER_TIMEOUT_S = 10.0  # a case must be answered or closed within this (liveness, not speed)
LONG_POLL_SLACK_MS = 2000  # a (mutated) fetch may legitimately wait its max_wait_ms
CLIENT_ID = "fuzz"
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- a raw wire client ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What came back on one connection: whole response frames, then EOF (or a reset)."""

    frames: list[bytes] = field(default_factory=list)
    closed: bool = False  # EOF or reset seen
    timed_out: bool = False
    trailing: bytes = b""  # bytes after the last whole frame (must be empty)


def _split_frames(data: bytes) -> tuple[list[bytes], bytes]:
    frames, pos = [], 0
    while len(data) - pos >= 4:
        (size,) = _SIZE.unpack_from(data, pos)
        if size < 0 or len(data) - pos - 4 < size:
            break
        frames.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return frames, data[pos:]


def _read_until_eof(sock: socket.socket, timeout_s: float) -> Outcome:
    deadline = Deadline(timeout_s)
    chunks: list[bytes] = []
    out = Outcome()
    while True:
        remaining = deadline.remaining_s()
        if remaining <= 0:
            out.timed_out = True
            break
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            out.timed_out = True
            break
        except (ConnectionResetError, BrokenPipeError):
            out.closed = True
            break
        if not chunk:
            out.closed = True
            break
        chunks.append(chunk)
    out.frames, out.trailing = _split_frames(b"".join(chunks))
    return out


def exchange(
    addr: tuple[str, int], payload: bytes, *, half_close: bool = True, timeout_s: float = ANSWER_TIMEOUT_S
) -> Outcome:
    """Send ``payload`` on a fresh connection, optionally half-close, read until EOF or timeout."""
    with socket.create_connection(addr, timeout=timeout_s) as sock:
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (ConnectionResetError, BrokenPipeError):
            pass  # the broker closed first; what it sent before is still readable
        return _read_until_eof(sock, timeout_s)


def call(addr: tuple[str, int], api_key: int, version: int, body: dict[str, Any], correlation_id: int = 7) -> Any:
    """One well-formed request; returns the decoded response body."""
    out = exchange(addr, encode_request(api_key, version, correlation_id, CLIENT_ID, body))
    assert out.frames, f"no response to api {api_key} v{version}: {out}"
    got_id, resp = decode_response(api_key, version, out.frames[0])
    assert got_id == correlation_id
    return resp


def assert_alive(broker: EmbeddedBroker, addr: tuple[str, int], what: str) -> None:
    """The process runs and answers ApiVersions on a fresh connection."""
    assert broker.running, f"broker died after {what}; its output:\n{broker.output()}"
    frame = encode_request(ApiKey.API_VERSIONS, 3, 4242, CLIENT_ID, {"client_software_name": "fuzz"})
    out = exchange(addr, frame)
    assert out.frames, f"broker stopped answering after {what}: {out}"
    got_id, resp = decode_response(ApiKey.API_VERSIONS, 3, out.frames[0])
    assert got_id == 4242
    assert resp.error_code == 0


def check_answered_or_closed(out: Outcome, what: str) -> None:
    assert not out.timed_out, f"broker neither answered nor closed the connection after {what}"
    assert out.closed
    assert out.trailing == b"", f"a partial response frame after {what}: {out.trailing[:64]!r}"
    if currently_in_test_context():
        event(f"{len(out.frames)} response(s), then closed" if out.frames else "closed unanswered")


# -- background traffic: librdkafka produces and consumes throughout -----------------------------


class BackgroundTraffic:
    """A confluent-kafka producer and consumer on one topic, in one thread, until ``stop()``."""

    def __init__(self, bootstrap: str, topic: str, pace_s: float = 0.002) -> None:
        self.topic = topic
        self._pace_s = pace_s
        self.sent: list[bytes] = []
        self.delivered: list[bytes] = []
        self.errors: list[str] = []
        self.consumed: list[bytes] = []
        self._stop = threading.Event()
        self._producer: Producer | None = Producer({
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 2,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,  # order is kept across retries
            "message.timeout.ms": 60000,
        })  # fmt: skip
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"fuzz-bg-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        })  # fmt: skip
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._run, name="fuzz-background", daemon=True)

    def start(self) -> BackgroundTraffic:
        self._thread.start()
        return self

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered.append(msg.value())

    def _consume(self, timeout_s: float) -> None:
        msg = self._consumer.poll(timeout_s)
        if msg is None:
            return
        if msg.error() is not None:
            if msg.error().code() != KafkaError._PARTITION_EOF:
                self.errors.append(f"consumer: {msg.error()}")
            return
        self.consumed.append(msg.value())

    def _run(self) -> None:
        i = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            assert self._producer is not None
            if time.monotonic() >= next_at:
                value = f"bg-{i:08d}".encode()
                self._producer.produce(self.topic, value=value, partition=0, on_delivery=self._on_delivery)
                self.sent.append(value)
                i += 1
                next_at += self._pace_s
            self._producer.poll(0)
            self._consume(0.001)

    @property
    def stopped(self) -> bool:
        return self._producer is None

    def stop(self, drain_timeout_s: float = 30.0) -> None:
        """Stop producing, wait for every delivery, then consume until all are back."""
        if self._producer is None:
            return
        self._stop.set()
        self._thread.join()
        self._producer.flush(drain_timeout_s)
        self._producer = None  # destroys the librdkafka handle before the broker stops
        deadline = Deadline(drain_timeout_s)
        while len(self.consumed) < len(self.delivered) and not deadline.expired():
            self._consume(0.1)
        self._consumer.close()


# -- fixtures ------------------------------------------------------------------------------------


class Fuzzed:
    """The fuzzed broker and what the cases need to know about it (a plain class: Hypothesis
    prints its repr in failure reports)."""

    def __init__(
        self, broker: EmbeddedBroker, addr: tuple[str, int], served: dict[int, tuple[int, int]], *,
        records_topic: str, records_topic_id: uuid.UUID, mutate_topic: str, mutate_topic_id: uuid.UUID,
        valid_batches: list[bytes], traffic: BackgroundTraffic,
    ) -> None:  # fmt: skip
        self.broker = broker
        self.addr = addr
        self.served = served  # api key -> advertised range
        self.records_topic = records_topic  # corrupt-records target: only ``valid_batches`` stored
        self.records_topic_id = records_topic_id
        self.mutate_topic = mutate_topic  # target of whole-request mutations
        self.mutate_topic_id = mutate_topic_id
        self.valid_batches = valid_batches
        self.traffic = traffic
        self.config_names: list[str] = []

    def __repr__(self) -> str:
        return f"Fuzzed(broker at {self.addr[0]}:{self.addr[1]})"

    def alive(self, what: str) -> None:
        assert_alive(self.broker, self.addr, what)


def _create_topic(addr: tuple[str, int], name: str) -> uuid.UUID:
    body = {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 10000,
    }
    resp = call(addr, ApiKey.CREATE_TOPICS, 7, body)
    assert resp.topics[0].error_code == 0, resp
    return resp.topics[0].topic_id


def _batch(value: bytes, n: int = 2) -> bytes:
    now_ms = int(time.time() * 1000)
    return encode_batch([ProducerRecord(key=b"k%d" % i, value=value, timestamp=now_ms + i) for i in range(n)])


def _produce_body(topic: str, records: bytes | None, acks: int = 1) -> dict[str, Any]:
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def _base_requests(fz: Fuzzed) -> list[tuple[str, bytes]]:
    """Real encoded requests (size-prefixed) of the APIs clients use most, at several versions."""
    t, tid = fz.mutate_topic, fz.mutate_topic_id
    batch = _batch(b"mutated")
    out: list[tuple[str, bytes]] = []
    for v in (3, 7, 9, 10):
        out.append((f"Produce v{v}", encode_request(ApiKey.PRODUCE, v, 11, CLIENT_ID, _produce_body(t, batch))))
    for v in (4, 11, 12, 13, 16):
        topic = {
            "topic": t,
            "topic_id": tid,
            "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16}],
        }
        body = {"max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [topic]}
        out.append((f"Fetch v{v}", encode_request(ApiKey.FETCH, v, 12, CLIENT_ID, body)))
    for v in (0, 4, 9, 12):
        body = {"topics": [{"name": t, "topic_id": tid}], "allow_auto_topic_creation": False}
        out.append((f"Metadata v{v}", encode_request(ApiKey.METADATA, v, 13, CLIENT_ID, body)))
    for v in (0, 4, 5, 7):
        # An existing name and validate_only (v1+): a mutation must hit the name to create anything.
        wanted = {"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": [
            {"name": "retention.ms", "value": "60000"}]}  # fmt: skip
        body = {"topics": [wanted], "timeout_ms": 1000, "validate_only": True}
        out.append((f"CreateTopics v{v}", encode_request(ApiKey.CREATE_TOPICS, v, 14, CLIENT_ID, body)))
    for v in (1, 8):
        body = {"replica_id": -1, "topics": [{"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
        out.append((f"ListOffsets v{v}", encode_request(ApiKey.LIST_OFFSETS, v, 15, CLIENT_ID, body)))
    out.append(("ApiVersions v3", encode_request(ApiKey.API_VERSIONS, 3, 16, CLIENT_ID, {"client_software_name": "x"})))
    return out


_BASES: dict[int, list[tuple[str, bytes]]] = {}


def base_requests(fz: Fuzzed) -> list[tuple[str, bytes]]:
    return _BASES.setdefault(id(fz), _base_requests(fz))


# A mutation: ("flip", pos, xor) | ("cut", pos) | ("insert", pos, bytes) | ("delete", pos, n) | ("int32", pos, value)
mutations = st.lists(
    st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(1, 255)),
        st.tuples(st.just("cut"), st.integers(0, 1 << 16)),
        st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=16)),
        st.tuples(st.just("delete"), st.integers(0, 1 << 16), st.integers(1, 16)),
        st.tuples(
            st.just("int32"),
            st.integers(0, 1 << 16),
            st.sampled_from([-1, 0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 1 << 20, 1 << 24]),
        ),
    ),
    min_size=1,
    max_size=4,
)


def mutate(body: bytes, ops: list[tuple[Any, ...]]) -> bytes:
    buf = bytearray(body)
    for op in ops:
        if not buf:
            break
        pos = op[1] % len(buf)
        if op[0] == "flip":
            buf[pos] ^= op[2]
        elif op[0] == "cut":
            del buf[pos:]
        elif op[0] == "insert":
            buf[pos:pos] = op[2]
        elif op[0] == "delete":
            del buf[pos : pos + op[2]]
        else:
            buf[pos : pos + 4] = _SIZE.pack(op[2])
    return bytes(buf)


def _long_poll_ms(payload: bytes) -> int:
    """How long the broker may legitimately hold these bytes: the longest max_wait_ms of the
    whole frames in them that decode as Fetch requests."""
    longest = 0
    for frame in _split_frames(payload)[0]:
        try:
            header, req = decode_request(frame)
        except (DecodeError, WireKafkaError, ValueError):
            break  # the broker closes the connection at the first undecodable frame
        if header.api_key == ApiKey.FETCH:
            longest = max(longest, int(req.max_wait_ms))
    return longest


def exchange_frame(fz: Fuzzed, payload: bytes, what: str) -> Outcome:
    """``exchange`` plus the oracle. A frame that decodes as a Fetch asking to wait longer than
    ``LONG_POLL_SLACK_MS`` may stay unanswered: its wait is its answer (the broker holds a
    half-closed connection for its pending responses up to 30 s), so it is given 1 s."""
    wait_ms = _long_poll_ms(payload)
    if wait_ms > LONG_POLL_SLACK_MS:
        out = exchange(fz.addr, payload, timeout_s=1.0)
        if out.timed_out:
            event("long-poll fetch left waiting")
            assert out.frames == [], what
            assert out.trailing == b"", what
            return out
    else:
        out = exchange(fz.addr, payload, timeout_s=ANSWER_TIMEOUT_S + wait_ms / 1000)
    check_answered_or_closed(out, what)
    return out
