"""Free heap pages handed back to the operating system once start-up is over (glibc ``malloc_trim``).

Start-up makes and drops large transient data: the metadata log after the newest snapshot is
read, decoded and replayed (KIP-630), then its payloads are released (``broker.raft.driver``).
CPython frees those objects at once, but glibc's allocator keeps the freed pages of its heap
mapped (only a free top of the heap shrinks by itself), so the process's resident size would stay
at start-up's peak for good. ``trim_heap`` asks glibc to return every wholly free page
(``malloc_trim(0)``; since glibc 2.8 also pages inside the heap); it frees nothing in use and
costs milliseconds. Where the C library has no ``malloc_trim`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)


def trim_heap() -> bool:
    """Return the C heap's free pages to the OS; False where ``malloc_trim`` is not available."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols: the C library it runs on
    except (OSError, AttributeError, TypeError):
        log.debug("malloc_trim is not available: the start-up heap's free pages stay mapped")
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True
