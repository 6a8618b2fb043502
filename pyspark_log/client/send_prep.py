"""What ``send`` checks and builds before a record is queued (pure; thread-safe).

``prepare_record`` turns ``send``'s arguments into the record the producer queues, with its size
estimate (``producer_batch.estimate_record_bytes``: what it reserves of ``buffer.memory`` and counts
against ``batch.size``). It raises at once for what is wrong before queueing:

* ``TypeError`` / ``ValueError``: a topic that is not a non-empty str, a key, value or header
  value that is not bytes-like, str (UTF-8) or None, a header name that is not a str, a negative
  partition or timestamp;
* ``RecordTooLargeError``: above ``max.request.size`` or ``buffer.memory`` (``check_record_size``).

The record is a ``futures.RecordFuture``: the sync ``send`` returns it as the record's future;
the async ``send`` queues it as the record and completes its own asyncio future. The common case
(bytes or None key and value, no headers) takes a fast path without conversions; it builds the
same record with the same size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyspark_log.client.errors import RecordTooLargeError
from pyspark_log.client.futures import DeliveryCallback, RecordFuture
from pyspark_log.client.producer_batch import BATCH_OVERHEAD_BYTES, HEADER_OVERHEAD_BYTES, RECORD_OVERHEAD_BYTES
from pyspark_log.client.types import Header

HeadersArg = Mapping[str, Any] | Iterable[tuple[str, Any]] | None


def to_bytes(value: Any, what: str) -> bytes | None:
    """None, bytes-like or str (UTF-8) to bytes; anything else is a TypeError."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__} (serialize it first)")


def to_headers(headers: HeadersArg) -> tuple[Header, ...]:
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"header names must be str, not {type(name).__name__}")
        out.append((name, to_bytes(value, f"header {name!r}")))
    return tuple(out)


def check_record_size(size: int, max_request_bytes: int, buffer_memory_bytes: int) -> None:
    """``RecordTooLargeError`` for a record whose size estimate exceeds the limits."""
    if size + BATCH_OVERHEAD_BYTES > max_request_bytes:
        raise RecordTooLargeError(f"a record of about {size} bytes is larger than max.request.size={max_request_bytes}")
    if size > buffer_memory_bytes:
        raise RecordTooLargeError(f"a record of about {size} bytes is larger than buffer.memory={buffer_memory_bytes}")


def prepare_record(  # noqa: PLR0917 - send()'s arguments, on the hot path
    topic: Any,
    value: Any,
    key: Any,
    headers: HeadersArg,
    partition: Any,
    timestamp_ms: Any,
    now_ms: Callable[[], int],
    max_request_bytes: int,
    buffer_memory_bytes: int,
    on_delivery: DeliveryCallback | None = None,
) -> RecordFuture:
    """Validate ``send``'s arguments and build the record (with its size estimate in ``_size``);
    ``now_ms`` is the wall clock (CreateTime when no timestamp is given)."""
    if not isinstance(topic, str) or not topic:
        raise TypeError("topic must be a non-empty str")
    if partition is not None and (not isinstance(partition, int) or partition < 0):
        raise ValueError(f"partition must be a non-negative int, not {partition!r}")
    if timestamp_ms is None:
        ts = now_ms()
    else:
        ts = int(timestamp_ms)
        if ts < 0:
            raise ValueError(f"timestamp_ms must be >= 0, not {ts}")
    if not headers and (value is None or value.__class__ is bytes) and (key is None or key.__class__ is bytes):
        size = RECORD_OVERHEAD_BYTES + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
        hs: tuple[Header, ...] = ()
    else:
        key = to_bytes(key, "key")
        value = to_bytes(value, "value")
        hs = to_headers(headers)
        size = RECORD_OVERHEAD_BYTES + len(key or b"") + len(value or b"")
        for hkey, hvalue in hs:
            size += HEADER_OVERHEAD_BYTES + len(hkey.encode()) + len(hvalue or b"")
    if size + BATCH_OVERHEAD_BYTES > max_request_bytes or size > buffer_memory_bytes:
        check_record_size(size, max_request_bytes, buffer_memory_bytes)
    return RecordFuture(topic, partition, key, value, ts, hs, size, on_delivery)
