"""Fuzz the broker's network layer, dispatcher and handlers with malformed input, on ONE real broker.

docs/architecture.md ("Kafka error codes for bad input, assertions for invariants"): "A client never sees a
Python traceback; the broker never dies on bad input."
Kafka's rule for what it cannot parse is to close the connection (``SocketServer``: a size outside
``0..socket.request.max.bytes`` closes it; ``RequestContext.parseRequest``: an undecodable request
closes it), except ApiVersions, which answers an unsupported version with UNSUPPORTED_VERSION and a
v0 body listing the broker's ranges (KIP-511).

Oracle after every case, each on its own connection:
- the broker either answers (whole size-prefixed frames; where the header is ours, with our
  correlation id and decodable as that API's response) or closes the connection, within a bound;
- the broker process is alive and answers ApiVersions on a fresh connection;
- produce requests whose records are corrupt batches are answered CORRUPT_MESSAGE (or the
  connection is closed) and nothing of them is stored.

Throughout, a second client (librdkafka: confluent-kafka producer and consumer in a background
thread) produces and consumes on the same broker; the last test checks that every record it
produced was consumed back, in order. Hypothesis runs derandomized (``derandomize=True``, no
example database): a failure reproduces with the same code; shrinking is off because the
broker's state changes from one example to the next.
"""

from __future__ import annotations

import socket
import struct
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.records.batch import decode_batches
from pyspark_log.wire import ApiKey, ErrorCode, all_apis, decode_response, encode_request
from tests.integration.fuzz_harness import (
    _HEAD,
    _SIZE,
    ANSWER_TIMEOUT_S,
    CLIENT_ID,
    FUZZ,
    REQUEST_MAX_BYTES,
    BackgroundTraffic,
    Fuzzed,
    _batch,
    _create_topic,
    _produce_body,
    _read_until_eof,
    base_requests,
    call,
    check_answered_or_closed,
    exchange,
    exchange_frame,
    mutate,
    mutations,
)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    data_dir: Path = tmp_path_factory.mktemp("fuzz-broker")
    overrides = {"socket.request.max.bytes": str(REQUEST_MAX_BYTES)}
    with EmbeddedBroker(data_dir, python=sys.executable, overrides=overrides) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        addr = (host, int(port))
        versions = call(addr, ApiKey.API_VERSIONS, 3, {"client_software_name": "fuzz"})
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        suffix = uuid.uuid4().hex[:8]
        records_topic, mutate_topic, bg_topic = f"fz-rec-{suffix}", f"fz-mut-{suffix}", f"fz-bg-{suffix}"
        records_id = _create_topic(addr, records_topic)
        mutate_id = _create_topic(addr, mutate_topic)
        _create_topic(addr, bg_topic)
        valid = [_batch(b"valid-%d" % i) for i in range(3)]
        for batch in valid:
            resp = call(addr, ApiKey.PRODUCE, 9, _produce_body(records_topic, batch))
            assert resp.responses[0].partition_responses[0].error_code == 0
            resp = call(addr, ApiKey.PRODUCE, 9, _produce_body(mutate_topic, batch))
            assert resp.responses[0].partition_responses[0].error_code == 0
        traffic = BackgroundTraffic(broker.bootstrap_servers, bg_topic).start()
        try:
            fz = Fuzzed(
                broker, addr, served, records_topic=records_topic, records_topic_id=records_id,
                mutate_topic=mutate_topic, mutate_topic_id=mutate_id, valid_batches=valid, traffic=traffic,
            )  # fmt: skip
            _topic_config_names(fz)
            base_requests(fz)
            yield fz
        finally:
            traffic.stop(drain_timeout_s=5)


# -- valid requests to mutate ----------------------------------------------------------------------


# -- the cases -------------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_truncated_frames_are_never_answered(fuzzed: Fuzzed, data: st.DataObject) -> None:
    """A frame cut short: the broker waits for the rest (serving others meanwhile), and on EOF
    closes without answering."""
    name, frame = data.draw(st.sampled_from(base_requests(fuzzed)), label="request")
    cut = data.draw(st.integers(1, len(frame) - 1), label="cut")
    with socket.create_connection(fuzzed.addr, timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(frame[:cut])
        fuzzed.alive(f"{name} truncated to {cut} bytes (still open)")
        sock.shutdown(socket.SHUT_WR)
        out = _read_until_eof(sock, ANSWER_TIMEOUT_S)
    check_answered_or_closed(out, f"{name} truncated to {cut}")
    assert out.frames == [], f"{name} truncated to {cut} bytes was answered"
    fuzzed.alive(f"{name} truncated to {cut} bytes")


@FUZZ
@given(
    size=st.one_of(
        st.integers(-(1 << 31), -1),
        st.integers(REQUEST_MAX_BYTES + 1, (1 << 31) - 1),
        st.sampled_from([-1, -(1 << 31), REQUEST_MAX_BYTES + 1, (1 << 31) - 1]),
    ),
    tail=st.binary(max_size=64),
)
def test_size_prefix_outside_limits_closes_without_reading(fuzzed: Fuzzed, size: int, tail: bytes) -> None:
    """``size < 0`` or ``> socket.request.max.bytes``: closed at once (no half-close needed),
    and a valid request pipelined behind it is not answered."""
    valid = encode_request(ApiKey.API_VERSIONS, 3, 1, CLIENT_ID, {})
    out = exchange(fuzzed.addr, _SIZE.pack(size) + tail + valid, half_close=False)
    check_answered_or_closed(out, f"size prefix {size}")
    assert out.frames == []
    fuzzed.alive(f"size prefix {size}")


def test_frame_of_exactly_the_limit_is_read(fuzzed: Fuzzed) -> None:
    """A garbage frame of exactly ``socket.request.max.bytes`` is read whole (then closed as
    undecodable); one byte more is refused unread."""
    garbage = _HEAD.pack(-77, 0, 1) + bytes(REQUEST_MAX_BYTES - _HEAD.size)
    out = exchange(fuzzed.addr, _SIZE.pack(REQUEST_MAX_BYTES) + garbage, half_close=False)
    check_answered_or_closed(out, "a frame at the size limit")
    assert out.frames == []
    out = exchange(fuzzed.addr, _SIZE.pack(REQUEST_MAX_BYTES + 1), half_close=False)
    check_answered_or_closed(out, "a size prefix one over the limit")
    fuzzed.alive("frames at the size limit")


@FUZZ
@given(garbage=st.binary(min_size=1, max_size=512), size_prefixed=st.booleans())
def test_garbage_bytes(fuzzed: Fuzzed, garbage: bytes, size_prefixed: bool) -> None:
    payload = _SIZE.pack(len(garbage)) + garbage if size_prefixed else garbage
    out = exchange(fuzzed.addr, payload)
    check_answered_or_closed(out, f"garbage {payload[:32].hex()}")
    fuzzed.alive(f"garbage {payload[:32].hex()}")


@FUZZ
@given(data=st.data(), count=st.integers(1, 4))
def test_requests_split_across_sends_are_reassembled(fuzzed: Fuzzed, data: st.DataObject, count: int) -> None:
    """Pipelined valid requests sent in arbitrary pieces (size prefixes split too, TCP_NODELAY on)
    are all answered, in request order."""
    frames = [encode_request(ApiKey.METADATA, 12, i, CLIENT_ID, {"topics": None}) for i in range(count)]
    stream = b"".join(frames)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(stream) - 1), max_size=12), label="cuts")))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    with socket.create_connection(fuzzed.addr, timeout=ANSWER_TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in pieces:
            sock.sendall(piece)
        sock.shutdown(socket.SHUT_WR)
        out = _read_until_eof(sock, ANSWER_TIMEOUT_S)
    check_answered_or_closed(out, f"{count} requests in {len(pieces)} pieces")
    assert [decode_response(ApiKey.METADATA, 12, f)[0] for f in out.frames] == list(range(count))


def _served_versions(fz: Fuzzed) -> list[tuple[int, int]]:
    return [(key, v) for key, (lo, hi) in sorted(fz.served.items()) for v in range(lo, hi + 1)]


@settings(FUZZ, max_examples=400)
@given(data=st.data(), body=st.binary(max_size=256), client_id=st.one_of(st.none(), st.text(max_size=8)))
def test_valid_header_garbage_body(fuzzed: Fuzzed, data: st.DataObject, body: bytes, client_id: str | None) -> None:
    """A well-formed header of a served (api, version) and a random body: answered with our
    correlation id and a decodable response of that API, or closed."""
    key, version = data.draw(st.sampled_from(_served_versions(fuzzed)), label="api")
    cid = client_id.encode() if client_id is not None else None
    head = _HEAD.pack(key, version, 99) + (_SIZE.pack(-1)[2:] if cid is None else struct.pack(">h", len(cid)) + cid)
    if _flexible(key, version):
        head += b"\x00"
    frame = head + body
    what = f"api {key} v{version} with body {body[:32].hex()}"
    out = exchange_frame(fuzzed, _SIZE.pack(len(frame)) + frame, what)
    for resp in out.frames:
        got_id, _ = decode_response(key, version, resp)
        assert got_id == 99, what
    fuzzed.alive(what)


def _flexible(key: int, version: int) -> bool:
    for api in all_apis():
        if api.key == key:
            return api.request_header_version(version) == 2
    return False


@FUZZ
@given(
    key=st.integers(-(1 << 15), (1 << 15) - 1),
    version=st.integers(-(1 << 15), (1 << 15) - 1),
    body=st.binary(max_size=64),
)
def test_unknown_api_keys_close(fuzzed: Fuzzed, key: int, version: int, body: bytes) -> None:
    if key in fuzzed.served:
        key = 1000 + key % 1000
    frame = _HEAD.pack(key, version, 5) + b"\x00\x04fuzz" + body
    out = exchange(fuzzed.addr, _SIZE.pack(len(frame)) + frame)
    check_answered_or_closed(out, f"api key {key}")
    assert out.frames == [], f"api key {key} is not served but was answered"
    fuzzed.alive(f"api key {key} v{version}")


def _unsupported_cases() -> list[tuple[int, int]]:
    """Every API the wire module knows: versions just outside its declared range, and extremes."""
    cases = []
    for api in all_apis():
        lo, hi = api.min_version, api.max_version
        cases += [(api.key, v) for v in sorted({lo - 1, hi + 1, 99, (1 << 15) - 1, -(1 << 15)})]
    return cases


@pytest.mark.parametrize(("key", "version"), _unsupported_cases())
def test_unsupported_version_closes_or_falls_back(fuzzed: Fuzzed, key: int, version: int) -> None:
    """Unsupported versions close the connection; ApiVersions answers with the KIP-511 fallback:
    a v0 body, UNSUPPORTED_VERSION, and the same ranges as a supported ApiVersions request."""
    frame = _HEAD.pack(key, version, 31) + b"\x00\x04fuzz" + b"\x00" * 8
    out = exchange(fuzzed.addr, _SIZE.pack(len(frame)) + frame)
    check_answered_or_closed(out, f"api {key} v{version}")
    if key == ApiKey.API_VERSIONS:
        assert len(out.frames) == 1, f"ApiVersions v{version} got no KIP-511 fallback"
        got_id, resp = decode_response(ApiKey.API_VERSIONS, 0, out.frames[0])
        assert got_id == 31
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == fuzzed.served
    else:
        assert out.frames == [], f"api {key} v{version} is unsupported but was answered"
    fuzzed.alive(f"api {key} v{version}")


def test_pipelined_requests_then_garbage(fuzzed: Fuzzed) -> None:
    """Requests before a bad frame are answered in order; then the connection closes."""
    good = [encode_request(ApiKey.API_VERSIONS, 3, i, CLIENT_ID, {}) for i in range(1, 6)]
    meta = encode_request(ApiKey.METADATA, 12, 6, CLIENT_ID, {"topics": None})
    bad = _SIZE.pack(8) + _HEAD.pack(ApiKey.METADATA, 12, 7)  # header cut inside client_id
    out = exchange(fuzzed.addr, b"".join(good) + meta + bad + good[0])
    check_answered_or_closed(out, "pipelined requests then a bad frame")
    assert [_SIZE.unpack_from(f)[0] for f in out.frames] == [1, 2, 3, 4, 5, 6]
    decode_response(ApiKey.METADATA, 12, out.frames[-1])
    fuzzed.alive("pipelined requests then a bad frame")


@settings(FUZZ, max_examples=800)
@given(data=st.data(), ops=mutations, fix_size=st.booleans())
def test_mutated_valid_requests(
    fuzzed: Fuzzed, data: st.DataObject, ops: list[tuple[Any, ...]], fix_size: bool
) -> None:
    """Real Produce/Fetch/Metadata/CreateTopics/ListOffsets/ApiVersions requests with bytes
    flipped, cut, inserted or deleted (the size prefix fixed up or left stale)."""
    name, frame = data.draw(st.sampled_from(base_requests(fuzzed)), label="request")
    body = mutate(frame[4:], ops)
    payload = _SIZE.pack(len(body)) + body if fix_size else frame[:4] + body
    what = f"{name} mutated by {ops} (size {'fixed' if fix_size else 'stale'})"
    exchange_frame(fuzzed, payload, what)
    fuzzed.alive(what)


# -- well-formed admin requests with arbitrary settings ------------------------------------------

_CONFIG_VALUES = st.one_of(
    st.none(),
    st.integers(-(1 << 63), (1 << 63) - 1).map(str),
    st.integers(-3, 100).map(str),
    st.sampled_from(["delete", "compact", "delete,compact", "CreateTime", "LogAppendTime", "producer", "zstd", "true"]),
    st.text(max_size=8),
)
# Small counts, and counts past the broker's per-request cap of 10000 new partitions.
_PARTITION_COUNTS = st.one_of(st.integers(-2, 3), st.sampled_from([10_002, 1 << 20, (1 << 31) - 1, -(1 << 31)]))


def _topic_config_names(fz: Fuzzed) -> list[str]:
    """The topic configs the broker describes (asked once: strategies must not depend on state)."""
    if not fz.config_names:
        body = {"resources": [{"resource_type": 2, "resource_name": fz.mutate_topic, "configuration_keys": None}]}
        resp = call(fz.addr, ApiKey.DESCRIBE_CONFIGS, 4, body)
        fz.config_names = [*sorted(c.name for c in resp.results[0].configs), "no.such.config"]
    return fz.config_names


def assert_topics_still_work(fz: Fuzzed, what: str) -> None:
    """A new topic can be created and produced to: no bad request poisoned the metadata."""
    name = f"fz-ok-{uuid.uuid4().hex[:10]}"
    _create_topic(fz.addr, name)
    resp = call(fz.addr, ApiKey.PRODUCE, 9, _produce_body(name, _batch(b"ok")))
    assert resp.responses[0].partition_responses[0].error_code == 0, f"produce fails after {what}: {resp}"


def _usable_or_refused(fz: Fuzzed, topic: str, what: str) -> None:
    """A topic the broker accepted takes a produce: stored, or refused with a Kafka error code
    (a closed connection here would be an internal error)."""
    out = exchange(fz.addr, encode_request(ApiKey.PRODUCE, 9, 3, CLIENT_ID, _produce_body(topic, _batch(b"v"))))
    assert out.frames, f"produce to {topic} after {what} closed the connection"
    _, resp = decode_response(ApiKey.PRODUCE, 9, out.frames[0])
    code = resp.responses[0].partition_responses[0].error_code
    assert code in (0, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_TIMESTAMP), (
        f"produce to {topic} after {what}: {resp}"
    )


@settings(FUZZ, max_examples=60)
@given(data=st.data(), version=st.sampled_from([0, 1, 4, 5, 7]), validate_only=st.booleans())
def test_create_topics_with_arbitrary_settings(
    fuzzed: Fuzzed, data: st.DataObject, version: int, validate_only: bool
) -> None:
    """Well-formed CreateTopics with arbitrary partition counts, replication factors and configs:
    each topic is created or refused with an error code, and bad settings never poison the
    metadata (later topics are still created and produced to)."""
    names = _topic_config_names(fuzzed)
    configs = data.draw(
        st.lists(st.tuples(st.sampled_from(names), _CONFIG_VALUES), max_size=3, unique_by=lambda c: c[0])
    )
    wanted = {
        "name": f"fz-ct-{uuid.uuid4().hex[:10]}",
        "num_partitions": data.draw(_PARTITION_COUNTS, label="partitions"),
        "replication_factor": data.draw(st.sampled_from([-1, 0, 1, 2, 0x7FFF, -0x8000]), label="replication"),
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in configs],
    }
    body = {"topics": [wanted], "timeout_ms": 1000, "validate_only": validate_only}
    what = f"CreateTopics v{version} {wanted}"
    out = exchange(fuzzed.addr, encode_request(ApiKey.CREATE_TOPICS, version, 41, CLIENT_ID, body))
    assert out.frames, f"{what}: no answer (closed={out.closed}, timed out={out.timed_out})"
    _, resp = decode_response(ApiKey.CREATE_TOPICS, version, out.frames[0])
    if resp.topics[0].error_code == 0 and not (validate_only and version >= 1):
        _usable_or_refused(fuzzed, wanted["name"], what)
    fuzzed.alive(what)
    assert_topics_still_work(fuzzed, what)


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_alter_configs_with_arbitrary_values(fuzzed: Fuzzed, data: st.DataObject) -> None:
    """IncrementalAlterConfigs with arbitrary values on a live topic: applied or refused, and the
    topic still takes produces."""
    names = _topic_config_names(fuzzed)
    ops = data.draw(
        st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(names), "config_operation": st.integers(-1, 4), "value": _CONFIG_VALUES}
            ),
            min_size=1,
            max_size=3,
            unique_by=lambda c: c["name"],
        )
    )
    topic = f"fz-alter-{uuid.uuid4().hex[:10]}"
    _create_topic(fuzzed.addr, topic)
    body = {"resources": [{"resource_type": 2, "resource_name": topic, "configs": ops}], "validate_only": False}
    what = f"IncrementalAlterConfigs {ops}"
    out = exchange(fuzzed.addr, encode_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, 42, CLIENT_ID, body))
    assert out.frames, f"{what}: no answer (closed={out.closed}, timed out={out.timed_out})"
    _usable_or_refused(fuzzed, topic, what)
    fuzzed.alive(what)
    assert_topics_still_work(fuzzed, what)


@settings(FUZZ, max_examples=30)
@given(count=_PARTITION_COUNTS, validate_only=st.booleans())
def test_create_partitions_with_arbitrary_counts(fuzzed: Fuzzed, count: int, validate_only: bool) -> None:
    topic = f"fz-cp-{uuid.uuid4().hex[:10]}"
    _create_topic(fuzzed.addr, topic)
    body = {
        "topics": [{"name": topic, "count": count, "assignments": None}],
        "timeout_ms": 1000,
        "validate_only": validate_only,
    }
    what = f"CreatePartitions count={count}"
    out = exchange(fuzzed.addr, encode_request(ApiKey.CREATE_PARTITIONS, 3, 43, CLIENT_ID, body))
    assert out.frames, f"{what}: no answer (closed={out.closed}, timed out={out.timed_out})"
    fuzzed.alive(what)
    assert_topics_still_work(fuzzed, what)


def _log_end_offset(fz: Fuzzed) -> int:
    body = {
        "replica_id": -1,
        "topics": [{"name": fz.records_topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    resp = call(fz.addr, ApiKey.LIST_OFFSETS, 8, body)
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return int(part.offset)


_RECORDS_KINDS = ("flip", "truncate", "trailing", "length", "garbage", "second-batch")


@st.composite
def corrupt_records(draw: Callable[..., Any], valid: bytes) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(_RECORDS_KINDS))
    if kind == "flip":  # magic, CRC, or any CRC-covered byte: CRC-32C detects every 1-byte error
        pos = draw(st.integers(16, len(valid) - 1))
        buf = bytearray(valid)
        buf[pos] ^= draw(st.integers(1, 255))
        return f"flip@{pos}", bytes(buf)
    if kind == "truncate":
        cut = draw(st.integers(1, len(valid) - 1))
        return f"truncate@{cut}", valid[:cut]
    if kind == "trailing":
        tail = draw(st.binary(min_size=1, max_size=60))
        return f"trailing {tail.hex()}", valid + tail
    if kind == "length":
        length = draw(st.integers(-(1 << 31), (1 << 31) - 1).filter(lambda n: n != len(valid) - 12))
        return f"batchLength={length}", valid[:8] + _SIZE.pack(length) + valid[12:]
    if kind == "garbage":
        garbage = draw(st.binary(min_size=1, max_size=200))
        return f"garbage {garbage[:32].hex()}", garbage
    pos = draw(st.integers(16, len(valid) - 1))
    buf = bytearray(valid)
    buf[pos] ^= draw(st.integers(1, 255))
    return f"valid batch + batch flipped@{pos}", valid + bytes(buf)


@settings(FUZZ, max_examples=300)
@given(data=st.data(), version=st.sampled_from([3, 5, 7, 8, 9, 10]), acks=st.sampled_from([1, -1, 0]))
def test_corrupt_record_batches_are_refused_and_not_stored(
    fuzzed: Fuzzed, data: st.DataObject, version: int, acks: int
) -> None:
    """Kafka documentation §5.4 "Log": the broker checks each batch's CRC-32C before it stores it. A produce
    whose records are not whole valid batches is answered CORRUPT_MESSAGE (or closed; acks=0:
    not answered), and the log end offset does not move."""
    valid = _batch(b"x" * data.draw(st.integers(0, 40), label="value size"), data.draw(st.integers(1, 3), label="n"))
    kind, records = data.draw(corrupt_records(valid), label="records")
    before = _log_end_offset(fuzzed)
    frame = encode_request(ApiKey.PRODUCE, version, 77, CLIENT_ID, _produce_body(fuzzed.records_topic, records, acks))
    out = exchange(fuzzed.addr, frame)
    what = f"Produce v{version} acks={acks} with records {kind}"
    check_answered_or_closed(out, what)
    if acks == 0:
        assert out.frames == [], f"{what} was answered"
    for resp_frame in out.frames:
        got_id, resp = decode_response(ApiKey.PRODUCE, version, resp_frame)
        assert got_id == 77
        code = resp.responses[0].partition_responses[0].error_code
        # bytes whose first batch's attributes carry the transactional bit are refused before they
        # are validated, for the missing transactional_id, as Kafka's handleProduceRequest does
        assert code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), (
            f"{what}: error code {code}"
        )
    event(f"records: {kind.split('@')[0].split(' ')[0].split('=')[0]}")
    assert _log_end_offset(fuzzed) == before, f"{what}: the broker stored something"
    fuzzed.alive(what)


def test_only_valid_batches_were_stored(fuzzed: Fuzzed) -> None:
    """After all the corrupt produces, the records topic holds exactly the valid batches."""
    topic = {
        "topic": fuzzed.records_topic,
        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
    }
    body = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [topic]}
    resp = call(fuzzed.addr, ApiKey.FETCH, 12, body)
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0
    stored = [[r.value for r in records] for _, records in decode_batches(bytes(part.records))]
    expected = [[r.value for r in records] for _, records in (decode_batches(b)[0] for b in fuzzed.valid_batches)]
    assert stored == expected


def test_background_client_consumed_everything_in_order(fuzzed: Fuzzed) -> None:
    """Last: the librdkafka producer/consumer that ran beside every case saw no error, and every
    record it produced came back once, in order."""
    traffic = fuzzed.traffic
    traffic.stop()
    assert traffic.errors == []
    assert len(traffic.sent) > 100, "the background client barely ran"
    assert traffic.delivered == traffic.sent
    assert traffic.consumed == traffic.sent
