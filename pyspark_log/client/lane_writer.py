"""``LaneWriter``: the one owner of the producer's lane (``Producer.send``'s common case).

A *lane* is the open ``futures.LaneChunk`` of one topic that caller threads append rows to
under the buffer pool's lock, one of keyed rows or of rows for the sticky partitioner (KIP-480),
sealed into the hand-off queue and placed in bulk by the loop (``handoff.py``, ``lane.py``). This
class holds everything that path shares between threads: the open lane and its fields, whether a
drain is pending (``scheduled``), whether the producer takes sends on this path at all
(``accepting``), the topics whose metadata is known, the ``buffer.memory`` reservation and the
futures' creation. Both fast paths go through it: ``sync.Producer.send`` (``append`` and
``put_record``) and the compiled ``LaneSender`` (``records/_speedups.c``), which knows this
class's contract below and nothing else of the client. (``AsyncProducer.send``, the coroutine
API, runs on the loop and appends to the accumulator itself: it shares none of this state.)

The contract the compiled send reads (by these names; ``tests/unit/client/test_lane_writer.py``
holds the C source to it):

* fixed for the writer's life, read once: ``lock`` (the pool's ``threading.Lock``: ``acquire``,
  ``release``), ``pool`` (its ``available`` byte count, read and written under ``lock``),
  ``cluster`` (its ``metadata``, replaced, never mutated, on a refresh), ``overhead``,
  ``size_limit``, ``chunk_limit``, ``ignore_keys``, ``future_type`` and ``future_slots`` (the
  future's type and the two data descriptors that set its chunk and position);
* read on each send: ``accepting`` (bool), ``lane`` (the open chunk or None) and, when ``lane``
  changed, ``lane_topic``, ``lane_sticky``, ``rows`` and ``sizes`` (the lists a row and its size
  are appended to, under ``lock``), ``scheduled`` (bool) after the append;
* called: ``known(metadata, topic)`` (a topic not yet seen in this metadata), ``open_lane(topic,
  sticky)`` (under ``lock``: seal the open lane, open another) and ``kick()`` (after the append,
  when no drain is pending or the lane is ``chunk_limit`` rows long).

Anything else (another argument, a record too large, an unknown topic, no room in
``buffer.memory``, ``accepting`` false) is left to the general ``send`` before anything changed.

``accepting`` is pushed, not polled: ``AsyncProducer`` calls ``set_healthy`` when it starts, closes,
dies or its transaction manager changes state (started, not closed, no fatal error, not
transactional, the idempotent state neither FATAL_ERROR nor ABORTABLE_ERROR: what
``AsyncProducer.check_send`` would let through without looking), and the sync facade ``shut`` s
it when it closes.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark_log.client.futures import DeliveryCallback, LaneChunk, LaneFuture, RecordFuture

if TYPE_CHECKING:
    from pyspark_log.client.bufferpool import BufferPool
    from pyspark_log.client.cluster import Cluster

_new_future = object.__new__


class LaneWriter:
    """The open lane and the state the common ``send`` shares with the loop (module doc)."""

    __slots__ = (
        "_healthy",
        "_kick",
        "_queue",
        "_shut",
        "_wide_chunk",
        "accepting",
        "chunk_limit",
        "clock_ns",
        "cluster",
        "future_slots",
        "future_type",
        "ignore_keys",
        "lane",
        "lane_sticky",
        "lane_topic",
        "lock",
        "meta",
        "overhead",
        "pool",
        "rows",
        "scheduled",
        "size_limit",
        "sizes",
        "topics",
    )

    def __init__(
        self,
        queue: deque[Any],
        kick: Callable[[], None],
        lock: threading.Lock,
        chunk_limit: int,
        wide_chunk: int,
    ) -> None:
        """``queue``: the hand-off queue a sealed lane (and a record sent with ``on_delivery``)
        goes to, under ``lock``; ``kick``: what makes sure a drain will see it
        (``Handoff.after_put``); ``chunk_limit``: lane rows after which a send kicks even with a
        drain pending; ``wide_chunk``: the same for entries of ``queue``."""
        self._queue = queue
        self._kick = kick
        self.lock = lock
        self.chunk_limit = chunk_limit
        self._wide_chunk = wide_chunk
        self.scheduled = False
        self.lane: LaneChunk | None = None
        self.lane_topic: str | None = None
        self.lane_sticky: bool | None = None
        self.rows: list[Any] | None = None
        self.sizes: list[int] | None = None
        self._healthy = False
        self._shut = False
        self.accepting = False
        self.meta: object = None
        self.topics: set[str] = set()
        # set by ``configure`` (a producer's); without it the fast path is never taken
        self.pool: BufferPool | None = None
        self.cluster: Cluster | None = None
        self.overhead = 0
        self.size_limit = -1
        self.ignore_keys = False
        self.clock_ns: Callable[[], int] = time.time_ns
        self.future_type = LaneFuture
        self.future_slots = (LaneFuture._chunk, LaneFuture._pos)

    def configure(self, pool: BufferPool, cluster: Cluster, overhead: int, size_limit: int, ignore_keys: bool) -> None:
        """The producer's side: its ``buffer.memory`` pool (whose lock must be ``lock``), its
        cluster, the per-record size overhead, the largest record size estimate that passes
        ``check_record_size`` and ``partitioner.ignore.keys``."""
        assert pool.lock is self.lock, "a lane is appended to under the buffer pool's lock"
        self.pool = pool
        self.cluster = cluster
        self.overhead = overhead
        self.size_limit = size_limit
        self.ignore_keys = ignore_keys

    # -- the gate --------------------------------------------------------------------------------

    def set_healthy(self, healthy: bool) -> None:
        """The core's verdict (see the module doc); the loop's thread."""
        self._healthy = healthy
        self.accepting = healthy and not self._shut

    def shut(self) -> None:
        """The sync facade closed: never again (any thread)."""
        self._shut = True
        self.accepting = False

    # -- topics ----------------------------------------------------------------------------------

    def known(self, meta: Any, topic: str) -> bool:
        """Is ``topic``'s metadata known in ``meta`` (``partition_count``)? Remembered per
        ``meta`` (the cluster replaces its metadata on each refresh: identity tells when to look
        again)."""
        if meta.partition_count(topic) is None:
            return False
        if meta is not self.meta:
            self.topics = set()
            self.meta = meta
        self.topics.add(topic)
        return True

    # -- the lane (under ``lock``) ---------------------------------------------------------------

    def open_lane(self, topic: str, sticky: bool = False) -> LaneChunk:
        """Under ``lock``: seal the open lane (queued) and open one for ``topic``, keyed or
        ``sticky`` (null keys, or ``partitioner.ignore.keys``)."""
        self.seal_locked()
        lane = self.lane = LaneChunk(topic, sticky)
        self.lane_topic, self.lane_sticky = topic, sticky
        self.rows, self.sizes = lane.rows, lane.sizes
        return lane

    def seal_locked(self) -> None:
        """Under ``lock``: queue the open lane, if any; the next row opens another."""
        lane = self.lane
        if lane is not None:
            self._queue.append(lane)
            self.lane = self.lane_topic = self.lane_sticky = self.rows = self.sizes = None

    def kick(self) -> None:
        """After an append: make sure a drain will run (``Handoff.after_put``)."""
        self._kick()

    # -- the Python fast path (what LaneSender does in C) ----------------------------------------

    def append(self, topic: str, key: bytes | None, value: bytes | None, size: int) -> LaneFuture | None:
        """Reserve ``size`` bytes of ``buffer.memory`` and append the row ``(key, value, now_ms,
        ())`` to the open lane of ``topic`` (a new lane when the topic or the keyed/sticky kind
        changes); the record's future. None, with nothing changed, when the pool has no room
        (the caller blocks for it on the general path). The caller checked ``accepting`` (or
        the producer's state), the size and the topic."""
        pool = self.pool
        lock = self.lock
        lock.acquire()
        available = pool.available  # type: ignore[union-attr]
        if available < size:
            lock.release()
            return None
        pool.available = available - size  # type: ignore[union-attr]
        sticky = key is None or self.ignore_keys
        lane = self.lane
        if lane is None or self.lane_topic != topic or self.lane_sticky is not sticky:
            lane = self.open_lane(topic, sticky)
        rows = self.rows
        pos = len(rows)  # type: ignore[arg-type]
        rows.append((key, value, self.clock_ns() // 1_000_000, ()))  # type: ignore[union-attr]
        self.sizes.append(size)  # type: ignore[union-attr]
        lock.release()
        future = _new_future(LaneFuture)
        future._chunk = lane
        future._pos = pos
        if not self.scheduled or pos >= self.chunk_limit:
            self._kick()  # if the loop is gone, its abort() gives the memory back
        return future

    def put_record(
        self, topic: str, key: bytes | None, value: bytes | None, size: int, on_delivery: DeliveryCallback
    ) -> RecordFuture | None:
        """Reserve ``size`` bytes and queue the record as a ``RecordFuture`` with its
        ``on_delivery`` behind the open lane (sealed first: the deque keeps the order of the
        calls); None, with nothing changed, when the pool has no room. The same checks as
        ``append`` are the caller's."""
        pool = self.pool
        lock = self.lock
        queue = self._queue
        lock.acquire()
        available = pool.available  # type: ignore[union-attr]
        if available < size:
            lock.release()
            return None
        pool.available = available - size  # type: ignore[union-attr]
        # RecordFuture(topic, None, key, value, now, (), size, on_delivery) without the call: the
        # class holds the other attributes' defaults
        record = _new_future(RecordFuture)
        record._row = (key, value, self.clock_ns() // 1_000_000, ())
        record._topic = topic
        record._size = size
        record._batch = None  # set here, the drain's link_records only updates them
        record._index = 0
        record._on_delivery = on_delivery
        record._hooked = True
        if self.lane is not None:
            self.seal_locked()
        queue.append(record)
        lock.release()
        if not self.scheduled or len(queue) >= self._wide_chunk:
            self._kick()  # if the loop is gone, its abort() gives the memory back
        return record
