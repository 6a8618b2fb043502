"""The cleaner's throttle and worker job (Kafka documentation §4.8 "Log Compaction": cleaning can be throttled
to a configured I/O rate — ``log.cleaner.io.max.bytes.per.second``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.cleaner import worker
from broker.log.cleaner.choose import cleanable_range
from broker.log.cleaner.cleaner import log_facts, make_plan
from broker.log.cleaner.recopy import Throttler, throttle_delay_s
from broker.log.cleaner.swap import install
from tests.unit.log.cleaner.helpers import as_pairs, keyed, read_all
from tests.unit.log.helpers import FakeClock, make_log


def test_section_4_8_io_is_capped_at_the_configured_rate() -> None:
    """the setting that caps the cleaner's I/O rate: bytes over a window take at least their
    time at the rate."""
    assert throttle_delay_s(1000, 0.0, 1000.0) == 1.0
    assert throttle_delay_s(1000, 0.4, 1000.0) == pytest.approx(0.6)
    assert throttle_delay_s(1000, 2.0, 1000.0) == 0.0


def test_throttler_sleeps_with_an_injected_clock() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(1000.0, clock=lambda: now[0], sleep=sleep)
    assert throttler.acquire(100) == pytest.approx(0.1)
    assert throttler.acquire(500) == pytest.approx(0.5)  # window over: a new window from here
    assert sum(slept) == pytest.approx(0.6)
    assert Throttler(float("inf"), clock=lambda: 0.0, sleep=sleep).acquire(10**9) == 0.0


def test_worker_job_cleans_a_detached_plan(tmp_path: Path) -> None:
    """What a worker process runs: a plan without ``LogSegment`` objects, files opened by path."""
    clock = FakeClock()
    log = make_log(tmp_path, clock, segment_bytes=300, cleanup_policy=("compact",))
    for r in range(6):
        for k in range(3):
            log.append(keyed((f"k{k}", f"v{r}")))
    log.roll()
    now = clock()
    plan = make_plan(log, cleanable_range(log_facts(log, 0), now), now)
    job = worker.CleanJob(plan.detached(), 24 * 1024, 0.9, float("inf"))
    assert all(source.segment is None for source in job.plan.sources)
    result = worker.run_job(job)
    by_base = {source.base_offset: source for source in plan.sources}
    for group in result.groups:
        group.sources = [by_base[s.base_offset] for s in group.sources]
    assert install(log, result, now)
    assert as_pairs(read_all(log)) == [(15, "k0", "v5"), (16, "k1", "v5"), (17, "k2", "v5")]
    assert worker._WorkerState.offset_map is not None
