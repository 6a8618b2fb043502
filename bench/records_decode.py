"""Consumer-side record decoding throughput: ``decode_records`` and ``columnar`` vs. the clients.

Builds a fetch-like buffer of consecutive RecordBatch v2 batches (16 KiB of records per batch,
the Java producer's default ``batch.size``) of 100 B and 1 KiB records, uncompressed and lz4,
then times, best of ``--repeat`` runs, in this process:

* ``kafka-python``  the baseline: ``MemoryRecords`` batch iteration, touching key and value;
* ``aiokafka``      for reference: the same walk through aiokafka's Cython record reader;
* ``decode_records``  ours, one ``Record`` per record (``batch.decode_batches``);
* ``columns``       ours, Python lists per column (``columnar.decode_columns``);
* ``arrow``         ours, a ``pyarrow.RecordBatch`` via the numpy kernels (``columnar.decode_arrow``).

MB/s counts the records' uncompressed batch bytes, so codecs compare on the same data; the
ratio column is records/s over kafka-python's in the same run. Figures only, nothing asserted.

    .venv/bin/python bench/records_decode.py [--repeat 5] [--records-mb 4]
"""

from __future__ import annotations

import argparse
import random
import time
import warnings
from collections.abc import Callable

from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords

from pyspark_log.records import compression
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch
from pyspark_log.records.columnar import decode_arrow, decode_columns

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

BATCH_BYTES = 16 * 1024
TS = 1_700_000_000_000


def make_value(rng: random.Random, size: int) -> bytes:
    """JSON-ish text with random numbers: compresses about 2-3x with lz4, like real events."""
    parts = []
    while sum(map(len, parts)) < size:
        parts.append(
            b'{"id":%d,"user":"u%05d","amount":%d.%02d},'
            % (rng.randrange(10**9), rng.randrange(10**5), rng.randrange(10**4), rng.randrange(100))
        )
    return b"".join(parts)[:size]


def make_fetch(record_bytes: int, codec: int, total_bytes: int) -> tuple[bytes, int, int, int]:
    """(buffer, number of records, number of batches, uncompressed batch bytes)."""
    rng = random.Random(record_bytes * 10 + codec)
    per_batch = max(1, BATCH_BYTES // record_bytes)
    n = max(per_batch, total_bytes // record_bytes)
    parts, plain_bytes, offset = [], 0, 0
    while offset < n:
        records = [
            ProducerRecord(b"key-%08d" % (offset + i), make_value(rng, record_bytes - 12), TS + offset + i)
            for i in range(per_batch)
        ]
        parts.append(encode_batch(records, base_offset=offset, codec=codec))
        plain_bytes += len(encode_batch(records, base_offset=offset)) if codec else len(parts[-1])
        offset += per_batch
    return b"".join(parts), offset, len(parts), plain_bytes


def kafka_python(buf: bytes) -> int:
    n = 0
    records = KpMemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        for record in batch:
            _ = record.key, record.value
            n += 1
    return n


def aiokafka(buf: bytes) -> int:
    n = 0
    records = AioMemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        for record in batch:
            _ = record.key, record.value
            n += 1
    return n


def ours_records(buf: bytes) -> int:
    return sum(len(records) for _, records in decode_batches(buf))


def ours_columns(buf: bytes) -> int:
    return len(decode_columns(buf))


def ours_arrow(buf: bytes) -> int:
    return len(decode_arrow(buf, topic="bench", partition=0))


CANDIDATES: list[tuple[str, Callable[[bytes], int]]] = [
    ("kafka-python", kafka_python),
    ("aiokafka (Cython)", aiokafka),
    ("decode_records", ours_records),
    ("columnar lists", ours_columns),
    ("columnar arrow", ours_arrow),
]


def best_time(fn: Callable[[bytes], int], buf: bytes, expected: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        count = fn(buf)
        best = min(best, time.perf_counter() - start)
        if count != expected:
            raise AssertionError(f"{fn.__name__} decoded {count} records, expected {expected}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs (default 5)")
    parser.add_argument("--records-mb", type=float, default=4.0, help="MB of records per case (default 4)")
    args = parser.parse_args()
    total = int(args.records_mb * 1_000_000)
    print(f"{'case':<16} {'decoder':<18} {'records/s':>12} {'MB/s':>9} {'vs kafka-python':>16}")
    for record_bytes in (100, 1000):
        for codec in (compression.NONE, compression.LZ4):
            buf, n, batches, plain = make_fetch(record_bytes, codec, total)
            case = f"{record_bytes} B {compression.CODEC_NAMES[codec]}"
            baseline = None
            for name, fn in CANDIDATES:
                fn(buf)  # warm up
                seconds = best_time(fn, buf, n, args.repeat)
                rate = n / seconds
                baseline = baseline or rate
                print(f"{case:<16} {name:<18} {rate:>12,.0f} {plain / seconds / 1e6:>9.1f} {rate / baseline:>15.2f}x")
            print(
                f"{'':<16} ({n} records in {batches} batches, {len(buf) / 1e6:.1f} MB on the wire, "
                f"{len(buf) / plain:.2f} of uncompressed)"
            )


if __name__ == "__main__":
    main()
