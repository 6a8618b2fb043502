"""Shared helpers of the log tests: an injected clock, batch builders, a log factory."""

from __future__ import annotations

from pathlib import Path

from broker.log.config import LogConfig
from broker.log.log import Log
from broker.log.recovery import load_log
from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.header import iter_batch_headers

T0_MS = 1_700_000_000_000


class FakeClock:
    """A ``Clock`` that tests move by hand (docs/architecture.md ("inject the clock and randomness; units last
    in names"): tests never sleep for time)."""

    def __init__(self, now_ms: int = T0_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


def batch(
    count: int = 1,
    *,
    timestamp_ms: int = T0_MS,
    value_bytes: int = 10,
    tag: int = 0,
    timestamps: list[int] | None = None,
    **kwargs: object,
) -> bytes:
    """One uncompressed v2 batch of ``count`` records (values carry ``tag`` and the index)."""
    stamps = timestamps if timestamps is not None else [timestamp_ms] * count
    records = [
        ProducerRecord(
            key=f"k{tag}-{i}".encode(),
            value=(f"v{tag}-{i}-".encode() + b"x" * value_bytes)[: max(value_bytes, 1)],
            timestamp=stamps[i],
        )
        for i in range(count)
    ]
    return encode_batch(records, **kwargs)  # type: ignore[arg-type]


def make_log(directory: Path, clock: FakeClock, **config: object) -> Log:
    """A new empty log ``t-0`` in ``directory / "t-0"`` with ``LogConfig(**config)``."""
    path = directory / "t-0"
    path.mkdir(parents=True, exist_ok=True)
    return Log.create(path, "t", 0, LogConfig(**config), clock)  # type: ignore[arg-type]


def reopen(log: Log, clock: FakeClock, *, clean: bool = False, recovery_point: int = 0) -> Log:
    """Load the log's directory again (after ``close`` or a simulated crash)."""
    return load_log(
        log.directory,
        log.topic,
        log.partition,
        log.config,
        clock,
        recovery_point=recovery_point,
        log_start_offset=log.log_start_offset,
        clean_shutdown=clean,
    )


def offsets_in(data: bytes) -> list[int]:
    """Every record offset in ``data`` (whole batches), decoding each batch."""
    result: list[int] = []
    for pos, _ in iter_batch_headers(data):
        _, records = decode_records(data, pos)
        result.extend(r.offset for r in records)
    return result


def batch_bases(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batch_headers(data)]


def read_all(log: Log, start: int | None = None, max_bytes: int = 1 << 20) -> list[int]:
    """Every record offset from ``start`` (default: log start) to the end, read by read()."""
    offset = log.log_start_offset if start is None else start
    seen: list[int] = []
    while offset < log.log_end_offset:
        with log.read(offset, max_bytes) as chunk:
            assert chunk.size > 0, f"empty read at {offset} below the end {log.log_end_offset}"
            seen.extend(o for o in offsets_in(chunk.read_bytes()) if o >= offset)
            offset = chunk.next_offset
    return seen
