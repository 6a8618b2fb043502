"""The registry of declared APIs: ``get_api(api_key) -> Api`` and body codecs by (key, version).

Handler code rarely needs more than ``headers.decode_request`` / ``headers.encode_response``;
these helpers are for code that already holds the header (tests, the client, Raft RPCs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark_log.wire.errors import UnsupportedVersionError
from pyspark_log.wire.message import Message
from pyspark_log.wire.schema import Api
from pyspark_log.wire.schemas import ALL_APIS

_APIS: dict[int, Api] = {int(a.key): a for a in ALL_APIS}


def get_api(api_key: int) -> Api:
    """The declared API for ``api_key``; raises ``UnsupportedVersionError`` for an unknown key."""
    api = _APIS.get(api_key)
    if api is None:
        raise UnsupportedVersionError(api_key, -1)
    return api


def find_api(api_key: int) -> Api | None:
    """The declared API for ``api_key``, or None."""
    return _APIS.get(api_key)


def all_apis() -> tuple[Api, ...]:
    """Every declared API, sorted by key."""
    return tuple(_APIS[k] for k in sorted(_APIS))


def _checked(api_key: int, version: int) -> Api:
    api = get_api(api_key)
    if version not in api.valid:
        raise UnsupportedVersionError(api_key, version)
    return api


def encode_request_body(api_key: int, version: int, body: Mapping[str, Any]) -> bytes:
    return _checked(api_key, version).request.encode(body, version)


def decode_request_body(api_key: int, version: int, buf: bytes | memoryview) -> Message:
    return _checked(api_key, version).request.decode(buf, version)


def encode_response_body(api_key: int, version: int, body: Mapping[str, Any]) -> bytes:
    return _checked(api_key, version).response.encode(body, version)


def decode_response_body(api_key: int, version: int, buf: bytes | memoryview) -> Message:
    return _checked(api_key, version).response.decode(buf, version)


def compile_all() -> int:
    """Generate every encoder and decoder now (about 0.2 s) instead of on first use; a broker may
    call this at start-up so the first request of each kind pays nothing. Returns the count."""
    count = 0
    for api in _APIS.values():
        for version in range(api.min_version, api.max_version + 1):
            for schema in (api.request, api.response):
                schema.encoder(version)
                schema.decoder(version)
                count += 2
    return count
