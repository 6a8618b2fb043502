"""``broker.runtime.heap_trim``: after start-up the broker returns the heap pages that start-up's
transient data (the KIP-630 metadata tail replay) freed; glibc keeps them mapped otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.runtime.heap_trim import trim_heap

pytestmark = pytest.mark.unit


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError):
        return False


@pytest.mark.skipif(not glibc(), reason="malloc_trim is glibc's")
def test_freed_small_objects_leave_the_resident_set_once_trimmed() -> None:
    """Many small payloads (below glibc's mmap threshold, like metadata entries) allocated and
    freed: the resident size drops back once trimmed, and what is still in use is untouched."""
    keep = [bytes(1400) + i.to_bytes(4, "big") for i in range(1000)]
    assert trim_heap()  # free pages earlier tests left resident go first: the transient needs new ones
    before = rss_kib()
    transient = [bytes(1400) + i.to_bytes(4, "big") for i in range(40_000)]  # ~55 MiB
    grown = rss_kib()
    del transient
    assert trim_heap()
    trimmed = rss_kib()
    assert grown - before > 40 * 1024
    assert trimmed - before < (grown - before) / 4
    assert all(k[-4:] == i.to_bytes(4, "big") for i, k in enumerate(keep))
