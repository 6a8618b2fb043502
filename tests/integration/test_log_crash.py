"""Crash test of the log: SIGKILL a writer at a random moment, recover, check nothing acked is lost.

Kafka documentation §5.4.1 "Writes"/§5.4.4: with ``flush.messages=1`` every acknowledged batch was fsynced before
the acknowledgement, and recovery "truncates the log to the last valid offset" — so after any
crash the log must hold a prefix of what was written that includes every acknowledged batch,
with no torn batch. Each iteration kills a child writer (``log_crash_child.py``) and recovers
the same directory, so crashes pile up on one log. The seed is printed: rerun a failure with
``LOG_CRASH_SEED=<seed>``.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.log.recovery import load_log
from pyspark_log.records.batch import decode_records
from pyspark_log.records.header import iter_batch_headers
from tests.integration.log_crash_child import CONFIG, expected_records

ROOT = Path(__file__).resolve().parents[2]
ITERATIONS = 8
TIME_BUDGET_S = 15.0  # stop early (after at least 3 crashes) on a slow machine


def _spawn(directory: Path, seed: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.log_crash_child", str(directory), str(seed)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _acknowledged(output: bytes) -> list[tuple[int, int, int]]:
    lines = output.decode().split("\n")[:-1]  # a line cut by the kill has no newline: dropped
    return [(int(a), int(b), int(c)) for a, b, c in (line.split() for line in lines if line != "ready")]


def _check(directory: Path, acked: list[tuple[int, int, int]]) -> int:
    """Recover the log and check it; returns how many batches it holds."""
    log = load_log(directory, "crash", 0, CONFIG, lambda: 1_700_000_000_000)
    try:
        offsets: list[tuple[int, int]] = []  # (base, last) of batch number i
        for segment in log.segments:
            data = segment.log_path.read_bytes()
            assert len(data) == segment.size_bytes
            for pos, header in iter_batch_headers(data):  # whole batches only, CRC checked
                assert header.base_offset == (offsets[-1][1] + 1 if offsets else 0)
                _, records = decode_records(data, pos)
                assert [(r.key, r.value) for r in records] == expected_records(len(offsets))
                offsets.append((header.base_offset, header.last_offset))
        assert log.log_end_offset == (offsets[-1][1] + 1 if offsets else 0)
        for number, first, last in acked:
            assert number < len(offsets), f"acknowledged batch {number} lost: the log holds {len(offsets)}"
            assert offsets[number] == (first, last), f"batch {number} moved"
        return len(offsets)
    finally:
        log.close(flush=False)


def test_sigkill_never_loses_an_acknowledged_batch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="broker.log.recovery")
    seed = int(os.environ.get("LOG_CRASH_SEED", time.time_ns() % 1_000_000))
    print(f"log crash test seed={seed}")
    rng = random.Random(seed)
    directory = tmp_path / "crash-0"
    started = time.monotonic()
    total_acked = 0
    batches = 0
    for iteration in range(ITERATIONS):
        if iteration >= 3 and time.monotonic() - started > TIME_BUDGET_S:
            break
        child = _spawn(directory, rng.randrange(1 << 30))
        assert child.stdout is not None
        ready = child.stdout.readline()
        assert ready == b"ready\n", child.stderr.read() if child.stderr else ready
        time.sleep(rng.uniform(0.05, 0.4))
        child.send_signal(signal.SIGKILL)
        # read through the same buffered reader as readline (communicate() would skip what it
        # already buffered); the child is dead, so neither pipe can fill up meanwhile
        rest = child.stdout.read()
        errors = child.stderr.read() if child.stderr else b""
        child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL, errors.decode()
        acked = _acknowledged(ready + rest)
        assert not acked or acked[0][0] == batches, "the child did not restart from the recovered log"
        total_acked += len(acked)
        batches = _check(directory, acked)
        print(f"iteration {iteration}: {len(acked)} acknowledged, log holds {batches} batches")
    torn = sum("invalid bytes" in record.getMessage() for record in caplog.records)
    print(f"{total_acked} acknowledged batches checked; recovery cut a torn tail {torn} times")
    assert total_acked > 0
