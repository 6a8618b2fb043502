"""The cleaner's worker processes: ``clean`` off the broker's interpreter.

Kafka documentation §4.8 "Log Compaction": cleaning does not block reads and must not disturb producers and consumers
— cleaning must not block reads nor affect producers and consumers. A cleaner *thread* shares
the GIL with the event loop: measured with ``bench/compaction.py``, the loop's appends waited
tens of milliseconds at p99 while a thread cleaned (every loop syscall hands the GIL to the
thread for a whole switch interval). So each of ``log.cleaner.threads`` cleans runs in a worker
process of a ``ProcessPoolExecutor`` (``spawn``: nothing of the broker's state is inherited):

* a job is a ``CleaningPlan`` without ``LogSegment`` objects (``CleaningPlan.detached``); the
  worker opens the source files by path and writes the ``.cleaned`` files, and returns the
  ``CleanResult``; the swap happens back on the loop;
* each worker keeps its offset map (``log.cleaner.dedupe.buffer.size`` / threads bytes) from job
  to job, and throttles to ``log.cleaner.io.max.bytes.per.second`` / threads;
* it stops between batches when the broker sets the shared stop flag (shutdown) or dies (its
  parent process changes), and a watchdog thread ends it within ``PARENT_CHECK_S`` of the
  broker's death even when idle, so a killed broker leaves at most a stray ``.cleaned`` file,
  which the next start-up removes.

``spawn`` starts each worker as a fresh interpreter that imports the parent's main module
(``broker.__main__`` for ``pylog-broker`` / ``python -m broker``, whose ``main()`` is guarded):
a program that runs ``BrokerServer`` in its own process needs the usual
``if __name__ == "__main__":`` guard, as for any ``multiprocessing`` user.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from broker.log.cleaner.offset_map import OffsetMap
from broker.log.cleaner.recopy import CleaningPlan, CleanResult, Throttler, clean

PARENT_CHECK_S = 0.1


@dataclass(frozen=True, slots=True)
class CleanJob:
    plan: CleaningPlan
    map_bytes: int
    load_factor: float
    bytes_per_second: float


class _WorkerState:
    stop: Any = None  # a multiprocessing Event, set by the broker at shutdown
    parent_pid: int | None = None
    offset_map: OffsetMap | None = None


def init_worker(stop: Any) -> None:
    """``ProcessPoolExecutor`` initializer: remember the stop flag and the broker's pid; leave
    SIGINT/SIGTERM to the broker (it stops the workers through the flag); start the watchdog
    that ends this process when the broker is gone (an idle worker waits on its job queue, which
    a killed broker never closes for it)."""
    _WorkerState.stop = stop
    _WorkerState.parent_pid = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(_WorkerState.parent_pid,), daemon=True).start()


def _exit_with_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


class _Stop:
    """True once the broker asked to stop or is gone."""

    def is_set(self) -> bool:
        if _WorkerState.stop is not None and _WorkerState.stop.is_set():
            return True
        return _WorkerState.parent_pid is not None and os.getppid() != _WorkerState.parent_pid


def run_job(job: CleanJob) -> CleanResult:
    """Clean one plan with this worker's offset map (made on first use, or when the size changed)."""
    current = _WorkerState.offset_map
    if current is None or current.memory_bytes != (job.map_bytes // 24) * 24:
        current = _WorkerState.offset_map = OffsetMap(job.map_bytes, job.load_factor)
    return clean(job.plan, current, Throttler(job.bytes_per_second), _Stop())
