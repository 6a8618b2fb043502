"""Request and response headers, and whole-frame helpers for the broker and the client.

Byte layouts (protocol guide "Headers"; KIP-482 for the tagged sections)::

    frame               int32 size, then size bytes: header + body
    request header v1   api_key int16 | api_version int16 | correlation_id int32 |
                        client_id nullable string (int16 length, -1 = null)
    request header v2   v1 + tagged fields   (client_id keeps its int16 length!)
    response header v0  correlation_id int32
    response header v1  v0 + tagged fields

Header versions follow the API's first flexible version: request v2 / response v1 from it on,
v1 / v0 before it; ApiVersions responses always use v0 (KIP-511), so a client can read the
broker's answer before it knows what the broker speaks.

Broker side::

    header, req = decode_request(frame)          # frame: the bytes after the int32 size
    ...                                          # req.topics[0].partitions[0].records
    out = encode_response(header.api_key, header.api_version, header.correlation_id,
                          {"responses": [...], "throttle_time_ms": 0})   # size-prefixed bytes

``decode_request`` raises ``UnsupportedVersionError`` (with ``.header``) for an unknown key or a
version outside the declared range: answer ApiVersions with ``encode_api_versions_fallback``,
anything else by closing the connection as Kafka does. ``DecodeError`` means a malformed frame.
Any ApiVersions response with a non-zero error code should carry a v0 body: kafka-python reads
every such body as v0.

Client side::

    out = encode_request(api_key, version, correlation_id, client_id, body)  # size-prefixed
    correlation_id, resp = decode_response(api_key, version, frame)
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import DecodeError, ErrorCode, UnsupportedVersionError
from pyspark_log.wire.message import Message
from pyspark_log.wire.registry import find_api, get_api
from pyspark_log.wire.types import INT32, read_nullable_string, read_tagged_fields, write_nullable_string
from pyspark_log.wire.versions import api_versions_entries

_REQUEST_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_NO_TAGS = b"\x00"


class RequestHeader(NamedTuple):
    """A decoded request header; ``header_version`` is 1 or 2."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions of a known API, else 1."""
    api = find_api(api_key)
    return api.request_header_version(api_version) if api is not None else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions of a known API (never ApiVersions), else 0."""
    api = find_api(api_key)
    return api.response_header_version(api_version) if api is not None else 0


def _skip_tags(frame: bytes | bytearray | memoryview, pos: int) -> int:
    if pos < len(frame) and frame[pos] == 0:
        return pos + 1
    return read_tagged_fields(frame, pos)[1]


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """The header of a request frame and the offset of its body.

    For an unknown API the header is read as v1 (its tagged section, if any, cannot be found)."""
    try:
        api_key, api_version, correlation_id = _REQUEST_HEAD.unpack_from(frame, 0)
    except struct.error as exc:
        raise DecodeError(f"request header: {exc}") from exc
    client_id, pos = read_nullable_string(frame, 8)
    version = request_header_version(api_key, api_version)
    if version == 2:
        pos = _skip_tags(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, version), pos


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, Message]:
    """Decode a request frame (without its int32 size) into its header and body."""
    header, pos = decode_request_header(frame)
    api = find_api(header.api_key)
    if api is None or header.api_version not in api.valid:
        raise UnsupportedVersionError(header.api_key, header.api_version, header)
    body, _ = api.request.decode_from(frame, pos, header.api_version)
    return header, body


def encode_response_parts(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> list[Any]:
    """A response frame as a list of chunks, the int32 size first. Records values are passed
    through as given (e.g. a file region the transport sends with sendfile); every other chunk
    is bytes. ``sum(map(len, parts[1:]))`` equals the size in ``parts[0]``."""
    api = get_api(api_key)
    head = INT32.pack(correlation_id)
    if api.response_header_version(api_version) == 1:
        head += _NO_TAGS
    parts: list[Any] = [b"", head]
    api.response.encode_into(body, api_version, parts)
    parts[0] = INT32.pack(sum(map(len, parts)))
    return parts


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """A whole response frame, int32 size included, ready for the socket."""
    return b"".join(encode_response_parts(api_key, api_version, correlation_id, body))


def encode_api_versions_fallback(correlation_id: int, *, include_controller_apis: bool = True) -> bytes:
    """KIP-511: the answer to an ApiVersions request of a version we do not support — a v0
    body with UNSUPPORTED_VERSION and our ranges, so the client retries with a version we know."""
    body = {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": api_versions_entries(include_controller_apis),
    }
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> bytes:
    """A whole request frame, int32 size included."""
    return b"".join(frame_chunks(encode_request_parts(api_key, api_version, correlation_id, client_id, body)))


def frame_chunks(parts: list[Any], direct_bytes: int | None = None) -> list[Any]:
    """The bytes of ``parts`` (``encode_request_parts``) in order, for writing: an object with
    ``parts`` is opened up; runs of chunks are joined into one ``bytes``, except chunks of at
    least ``direct_bytes`` (None: never), which stay as they are (written without a copy)."""
    out: list[Any] = []
    run: list[Any] = []
    for part in parts:
        for chunk in getattr(part, "parts", (part,)):
            if direct_bytes is not None and len(chunk) >= direct_bytes:
                if run:
                    out.append(run[0] if len(run) == 1 else b"".join(run))
                    run = []
                out.append(chunk)
            else:
                run.append(chunk)
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out


def encode_request_parts(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> list[Any]:
    """A request frame as a list of chunks, the int32 size first. Records values are passed
    through as given (bytes-like, or an object with ``parts`` and ``len`` such as
    ``records.batch.BatchParts``, which the producer writes to the socket piece by piece);
    every other chunk is bytes. ``sum(map(len, parts[1:]))`` equals the size in ``parts[0]``."""
    api = get_api(api_key)
    head = _REQUEST_HEAD.pack(api_key, api_version, correlation_id) + write_nullable_string(client_id)
    if api.request_header_version(api_version) == 2:
        head += _NO_TAGS
    parts: list[Any] = [b"", head]
    api.request.encode_into(body, api_version, parts)
    parts[0] = INT32.pack(sum(map(len, parts)))
    return parts


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame (without its int32 size)."""
    try:
        return int(INT32.unpack_from(frame, 0)[0])
    except struct.error as exc:
        raise DecodeError(f"response header: {exc}") from exc


def decode_response(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Message]:
    """Decode a response frame (without its int32 size) to the request sent as (key, version).

    ApiVersions (KIP-511): a broker that does not support the version asked answers with a v0
    body (UNSUPPORTED_VERSION and its ranges); as Kafka's client does, a body that does not
    parse at the version asked is read again as v0."""
    api = get_api(api_key)
    if api_version not in api.valid:
        raise UnsupportedVersionError(api_key, api_version)
    correlation_id = peek_correlation_id(frame)
    pos = 4
    if api.response_header_version(api_version) == 1:
        pos = _skip_tags(frame, pos)
    try:
        body, _ = api.response.decode_from(frame, pos, api_version)
    except DecodeError:
        if api_key != ApiKey.API_VERSIONS or api_version == 0:
            raise
        body, _ = api.response.decode_from(frame, pos, 0)
    return correlation_id, body
