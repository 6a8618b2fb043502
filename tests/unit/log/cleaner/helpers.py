"""Helpers of the cleaner tests: keyed batches, one synchronous clean, reading a whole log."""

from __future__ import annotations

import threading

from broker.log.cleaner.choose import cleanable_range
from broker.log.cleaner.cleaner import log_facts, make_plan
from broker.log.cleaner.offset_map import OffsetMap
from broker.log.cleaner.recopy import CleanResult, Throttler, clean
from broker.log.cleaner.swap import install
from broker.log.log import Log
from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.header import iter_batch_headers
from pyspark_log.records.record import Record
from tests.unit.log.helpers import T0_MS, FakeClock

MAP_BYTES = 24 * 4096


def keyed(*pairs: tuple[str | None, str | None], ts: int = T0_MS, **kwargs: object) -> bytes:
    """One batch of ``(key, value)`` records (None: null key / tombstone)."""
    records = [
        ProducerRecord(None if k is None else k.encode(), None if v is None else v.encode(), ts) for k, v in pairs
    ]
    return encode_batch(records, **kwargs)  # type: ignore[arg-type]


def prepare(log: Log, clock: FakeClock, *, first_dirty: int | None = None, map_bytes: int = MAP_BYTES) -> CleanResult:
    """Build the map and write the ``.cleaned`` files (the worker's part), no swap."""
    dirty = log.log_start_offset if first_dirty is None else first_dirty
    cleanable = cleanable_range(log_facts(log, dirty), clock())
    plan = make_plan(log, cleanable, clock())
    return clean(plan, OffsetMap(map_bytes), Throttler(float("inf")), threading.Event())


def clean_log(log: Log, clock: FakeClock, *, first_dirty: int | None = None, map_bytes: int = MAP_BYTES) -> CleanResult:
    """One whole clean of ``log``: plan, clean, swap."""
    result = prepare(log, clock, first_dirty=first_dirty, map_bytes=map_bytes)
    assert install(log, result, clock())
    return result


def read_all(log: Log) -> list[Record]:
    """Every data record from the log start to the log end, in offset order."""
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        data = chunk.read_bytes()
        for pos, header in iter_batch_headers(data):
            if not header.is_control:  # as consumers do: markers are not records
                out.extend(decode_records(data, pos)[1])
        assert chunk.next_offset > offset
        offset = chunk.next_offset
    return out


def as_pairs(records: list[Record]) -> list[tuple[int, str, str | None]]:
    return [(r.offset, (r.key or b"").decode(), None if r.value is None else r.value.decode()) for r in records]
