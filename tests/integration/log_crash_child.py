"""Child process of ``test_log_crash.py``: append batches with ``flush.messages=1`` until killed.

Usage: ``python -m tests.integration.log_crash_child <partition dir> <seed>``. Opens the log
(recovering it after the previous kill), prints ``ready``, then for n = 0, 1, … appends batch
number ``first_batch + n`` and, once ``append`` returned (written and fsynced), prints
``<batch number> <first offset> <last offset>``. Batch contents are a function of the batch
number alone (``expected_records``), so the parent can check every byte it reads back.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from broker.log.config import LogConfig
from broker.log.log import Log
from broker.log.recovery import load_log
from pyspark_log.records.batch import ProducerRecord, encode_batch

CONFIG = LogConfig(flush_messages=1, segment_bytes=4 * 1024 * 1024, index_interval_bytes=4096)


def expected_records(number: int) -> list[tuple[bytes, bytes]]:
    """The (key, value) pairs of batch ``number``: 1-20 records of 10 B to 40 kB (batches up to
    800 kB, so that a kill sometimes lands inside a write and tears it)."""
    rng = random.Random(number)
    count = rng.randint(1, 20)
    return [(f"{number}:{i}".encode(), bytes([number % 251]) * rng.randint(10, 40_000)) for i in range(count)]


def batches_in(log: Log) -> int:
    """How many batches the log holds (each segment's batches, by header)."""
    from broker.log.scan import iter_headers

    return sum(sum(1 for _ in iter_headers(s.fd, 0, s.size_bytes)) for s in log.segments)


def main() -> None:
    directory = Path(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    if directory.exists():
        log = load_log(directory, "crash", 0, CONFIG, lambda: 1_700_000_000_000)
    else:
        directory.mkdir(parents=True)
        log = Log.create(directory, "crash", 0, CONFIG, lambda: 1_700_000_000_000)
    number = batches_in(log)
    print("ready", flush=True)
    while True:
        records = [ProducerRecord(k, v, 1_700_000_000_000) for k, v in expected_records(number)]
        info = log.append(encode_batch(records))
        print(f"{number} {info.first_offset} {info.last_offset}", flush=True)
        number += 1
        if rng.random() < 0.01:
            log.roll()


if __name__ == "__main__":
    main()
