"""``DeliveryFuture``: the result of one sync ``Producer.send``.

It offers the ``concurrent.futures.Future`` interface a caller uses (``result``, ``exception``,
``done``, ``add_done_callback``, ``cancel``/``cancelled``/``running``) at a fraction of the cost:
``concurrent.futures.Future`` builds a ``Condition`` and an ``RLock`` per instance, which at one
future per record was a quarter of ``send``'s time. Here nothing is allocated until someone waits
(an ``Event``, created lazily) or registers a callback; one module-wide lock guards those rare
paths. A record cannot be cancelled once handed to the producer, so ``cancel`` returns False.

``result(timeout)`` raises ``TimeoutError`` (``concurrent.futures.TimeoutError`` is the same class
since Python 3.11) when the timeout passes first, and the delivery exception if it failed.

``RecordFuture`` is one ``send()``: the queued record and its future in one object until the
loop appends the record's row to a batch; from then on the future points at the batch
(``link_records``) and the batch does not hold the future, so nothing the garbage collector
tracks per record outlives the caller's interest in it (and the short hand-off queue: see
``handoff.HANDOFF_CHUNK``). A future is completed lazily from its batch's shared ``RecordOutcome``
when asked (``done``/``result``/``exception``); one that someone waits on, registers a callback
with, or that has an ``on_delivery`` callback is handed to its batch and completed with it
(``settle_records``, one lock acquisition per batch), so the callbacks run once the batch is
done, on the producer's I/O thread. The ``RecordMetadata`` is built only when someone asks.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, Generic, TypeVar

from pyspark_log.client.types import Header, RecordMetadata

log = logging.getLogger(__name__)

T = TypeVar("T")

_LOCK = threading.Lock()


class DeliveryFuture(Generic[T]):
    """Set once from the producer's I/O thread; read from any thread."""

    __slots__ = ("_callbacks", "_done", "_event", "_exc", "_value")

    def __init__(self) -> None:
        self._done = False
        self._value: T | None = None
        self._exc: BaseException | None = None
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[DeliveryFuture[T]], None]] | None = None

    def __repr__(self) -> str:
        if not self._done:
            return "<DeliveryFuture pending>"
        return f"<DeliveryFuture raised {self._exc!r}>" if self._exc else f"<DeliveryFuture {self._value!r}>"

    def set_result(self, value: T) -> None:
        self._finish(value, None)

    def set_exception(self, exc: BaseException) -> None:
        self._finish(None, exc)

    def _finish(self, value: T | None, exc: BaseException | None, *, wake_if_done: bool = False) -> None:
        """Complete (once) and wake waiters and callbacks; ``wake_if_done``: wake them even when a
        reader already marked it done without waking anyone (a lazily settled ``LaneFuture``)."""
        with _LOCK:
            if not self._done:
                self._value, self._exc, self._done = value, exc, True
            elif not wake_if_done:
                return
            event, callbacks, self._callbacks = self._event, self._callbacks, None
        if event is not None:
            event.set()
        for fn in callbacks or ():
            self._run_callback(fn)

    def _run_callback(self, fn: Callable[[DeliveryFuture[T]], None]) -> None:
        try:
            fn(self)
        except Exception:
            log.exception("DeliveryFuture callback raised")

    def done(self) -> bool:
        return self._done

    def running(self) -> bool:
        return not self._done

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """Records handed to the producer cannot be taken back."""
        return False

    def _wait(self, timeout: float | None) -> None:
        if self._done:
            return
        with _LOCK:
            if self._done:
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if not event.wait(timeout):
            raise TimeoutError(f"record not delivered within {timeout} s")

    def result(self, timeout: float | None = None) -> T:
        self._wait(timeout)
        if self._exc is not None:
            raise self._exc
        return self._value  # type: ignore[return-value]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._exc

    def add_done_callback(self, fn: Callable[[DeliveryFuture[T]], None]) -> None:
        """``fn(future)`` runs once it completes (at once if it already has)."""
        with _LOCK:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        self._run_callback(fn)


class RecordOutcome:
    """How one batch ended, shared by the futures of its records (record ``i`` has offset
    ``base_offset + i``; -1 with acks=0; the timestamp is LogAppendTime when the broker set one,
    else the record's own CreateTime).

    It holds no reference to the batch's records: a future points at its outcome, so an outcome
    that held the records (the futures themselves) would make every record a reference cycle,
    freed only by the garbage collector's full collections instead of at once by refcounting."""

    __slots__ = ("base_offset", "log_append_time_ms", "partition", "topic")

    def __init__(self, topic: str, partition: int, base_offset: int, log_append_time_ms: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms

    def metadata(self, index: int, timestamp: int) -> RecordMetadata:
        """Record ``index``'s metadata; ``timestamp`` is its CreateTime."""
        base = self.base_offset
        lat = self.log_append_time_ms
        return RecordMetadata(
            self.topic,
            self.partition,
            base + index if base >= 0 else -1,
            lat if lat >= 0 else timestamp,
        )


DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], None]


class RecordFuture(DeliveryFuture[RecordMetadata]):
    """One record handed to the sync ``Producer.send`` *and* its future.

    Until the producer's loop appends it to a batch, this object is the queued record (``_row``
    is ``(key, value, timestamp, headers)``, also readable as ``key``, ``value``, ``timestamp``
    and ``headers``). The batch then keeps only the row tuple and the future points at the batch
    (``_batch``, ``_index``; ``link_records``): the batch does *not* hold the future, so a
    future the caller dropped is freed at once by refcounting rather than living (GC-tracked)
    until its batch is acknowledged. ``done``/``result``/``exception`` read the batch's outcome
    lazily; a future someone waits on, registers a callback with, or gave an ``on_delivery``
    (``_hooked``) is put into its batch's ``thunks`` and completed with the batch
    (``settle_records``), so blocking ``result()``, ``add_done_callback`` and ``on_delivery``
    (run on the producer's I/O thread) keep their ``concurrent.futures`` semantics.

    No ``__slots__``: the class holds the defaults, so ``send`` sets only ``_row``, ``_topic``,
    ``_size`` (and ``_batch``/``_index``, which the drain then updates rather than adds) on an
    instance made with ``object.__new__``."""

    _done = False
    _value = None
    _exc = None
    _event = None
    _callbacks: list[Callable[[DeliveryFuture[RecordMetadata]], None]] | None = None
    _outcome: RecordOutcome | None = None
    _index = 0
    _batch: Any = None  # the ProducerBatch it was appended to (accumulator.py)
    _partition: int | None = None
    _on_delivery: DeliveryCallback | None = None
    _hooked = False
    _row: tuple[bytes | None, bytes | None, int, tuple[Header, ...]]
    _topic: str
    _size: int

    def __init__(  # noqa: PLR0917 - send()'s record fields
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: tuple[Header, ...],
        size: int,
        on_delivery: DeliveryCallback | None,
    ) -> None:
        self._row = (key, value, timestamp, headers)
        self._topic = topic
        self._size = size
        self._batch = None  # (linking then updates attributes the instance has: cheaper)
        self._index = 0
        if partition is not None:
            self._partition = partition
        if on_delivery is not None:
            self._on_delivery = on_delivery
            self._hooked = True

    @property
    def key(self) -> bytes | None:
        return self._row[0]

    @property
    def value(self) -> bytes | None:
        return self._row[1]

    @property
    def timestamp(self) -> int:
        return self._row[2]

    @property
    def headers(self) -> tuple[Header, ...]:
        return self._row[3]

    def __repr__(self) -> str:
        if self.done() and self._outcome is not None:
            return f"<RecordFuture {self._outcome.metadata(self._index, self.timestamp)!r}>"
        return super().__repr__().replace("DeliveryFuture", "RecordFuture")

    def _settled(self) -> bool:
        """Done? Takes the outcome from the batch when it has completed (any thread)."""
        if self._done:
            return True
        batch = self._batch
        if batch is None:
            return False
        index = self._index
        if batch.split_parts is not None:
            batch, index = _follow_split(batch, index)
            self._batch, self._index = batch, index
        if not batch.done:
            return False
        err = batch.error
        if err is not None:
            self._exc = err
        else:
            self._outcome = batch.outcome
        self._done = True
        return True

    def _watch(self) -> None:
        """Under ``_LOCK``, not done: have the batch (or the drain) complete this future."""
        self._hooked = True
        batch = self._batch
        if batch is not None:  # appended already: its batch settles it with the others
            batch.thunks[self._index] = self

    def done(self) -> bool:
        return self._done or self._settled()

    def running(self) -> bool:
        return not self.done()

    def _wait(self, timeout: float | None) -> None:
        if self._done or self._settled():
            return
        with _LOCK:
            if self._settled():
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
            self._watch()
        if not event.wait(timeout):
            raise TimeoutError(f"record not delivered within {timeout} s")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        if self._exc is not None:
            raise self._exc
        if self._value is None and self._outcome is not None:
            self._value = self._outcome.metadata(self._index, self.timestamp)
        return self._value  # type: ignore[return-value]

    def add_done_callback(self, fn: Callable[[DeliveryFuture[RecordMetadata]], None]) -> None:
        with _LOCK:
            if not self._settled():
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                self._watch()
                return
        self._run_callback(fn)

    def __call__(self, meta: RecordMetadata | None, exc: BaseException | None) -> None:
        """Complete this record alone (parked records, failures before it joined a batch)."""
        if self._done:
            return
        self._finish(meta, exc)
        with _LOCK:
            on_delivery, self._on_delivery = self._on_delivery, None
        if on_delivery is not None:
            _deliver(on_delivery, meta, exc)


_HOOKED = attrgetter("_hooked")


class LaneChunk:
    """The rows of consecutive common-case ``send()`` calls to one topic (a "lane"), appended by
    caller threads under the buffer pool's lock, then sealed and placed in bulk by the loop
    (``lane.place_chunk``). A record's future is ``(chunk, position)`` (``LaneFuture``); the
    chunk records where its rows went compactly and a future looks its batch up only when asked.

    Until placed (``placed`` False) futures that someone waits on or hooks a callback to are
    listed in ``hooked`` (under ``_LOCK``) and the placement puts them into their batches.
    Placed: sorted position ``s`` holds record ``order[s]`` (``order`` None: identity), so
    record ``pos`` is at sorted position ``rank[pos]``, the inverse permutation, computed when a
    future first asks (most never do); the sorted positions from ``starts[k]`` on went to
    ``targets[k] = (batch, first index)``. Or ``error`` (failed before placement), or
    ``proxies`` (metadata vanished: each record was parked as its own ``RecordFuture``)."""

    __slots__ = (
        "error",
        "hooked",
        "order",
        "placed",
        "proxies",
        "rank",
        "rows",
        "sizes",
        "starts",
        "sticky",
        "targets",
        "topic",
    )

    def __init__(self, topic: str, sticky: bool = False) -> None:
        self.topic = topic
        self.sticky = sticky  # partitioned by the sticky partitioner (no keys, or keys ignored)
        self.rows: list[tuple[bytes | None, bytes | None, int, tuple[Header, ...]]] = []
        self.sizes: list[int] = []
        self.placed = False
        self.hooked: list[LaneFuture] = []
        self.order: Any = None
        self.rank: Any = None
        self.starts: list[int] = []
        self.targets: list[tuple[Any, int]] = []
        self.error: BaseException | None = None
        self.proxies: list[RecordFuture] | None = None

    def locate(self, pos: int) -> tuple[Any, int]:
        """The batch (before any split) and index of placed record ``pos``."""
        rank = self.rank
        if rank is None and self.order is not None:
            rank = self.rank = _inverse(self.order)
        s = pos if rank is None else int(rank[pos])
        k = bisect.bisect_right(self.starts, s) - 1
        batch, first = self.targets[k]
        return batch, first + s - self.starts[k]

    def publish(self) -> list[tuple[LaneFuture, Any, Any]]:
        """Under ``_LOCK``, once placed (or failed: ``error``): let the rows go (their batches,
        or the parked proxies, hold them; a failed chunk keeps them for ``timestamp``), hook
        the futures that asked before. Returns ``(future, event, callbacks)`` of those failed
        here, for ``notify`` outside the lock."""
        if self.error is None:
            self.rows = []
        self.sizes = []
        self.placed = True
        hooked, self.hooked = self.hooked, []
        failed: list[tuple[LaneFuture, Any, Any]] = []
        for fut in hooked:
            if self.error is not None:
                fut._exc, fut._done = self.error, True
                failed.append((fut, fut._event, fut._callbacks))
                fut._callbacks = None
            elif not fut._settled():
                fut._hook_placed()
        return failed


def _inverse(order: Any) -> Any:
    """The inverse of the permutation ``order`` (a list, or a numpy array of positions)."""
    n = len(order)
    if isinstance(order, list):
        ranks = [0] * n
        for s, i in enumerate(order):
            ranks[i] = s
        return ranks
    import numpy as np

    rank = np.empty(n, np.intp)
    rank[order] = np.arange(n)
    return rank


def notify(failed: list[tuple[LaneFuture, Any, Any]]) -> None:
    """Wake the waiters and run the callbacks of futures ``LaneChunk.publish`` failed."""
    for fut, event, callbacks in failed:
        if event is not None:
            event.set()
        for fn in callbacks or ():
            fut._run_callback(fn)


class LaneFuture(RecordFuture):
    """The future of a record sent through a lane: ``(chunk, position)`` until someone asks
    (see ``LaneChunk``); then it behaves as a ``RecordFuture`` of the batch it was placed in.
    Its ``_row`` (so ``key``, ``value``, ``timestamp``, ``headers``) is read where the record is:
    the chunk, then its batch (a future keeps its chunk, the chunk its batches: a kept future
    holds its batch's rows, as a ``RecordFuture`` holds its own row)."""

    # slots: a future nobody asks about is created and freed without an instance dict
    __slots__ = ("_chunk", "_pos")

    _chunk: LaneChunk
    _pos: int

    @property
    def _row(self) -> tuple[Any, ...]:  # type: ignore[override]
        """The record's ``(key, value, timestamp, headers)``: in the chunk until placed, then
        in its batch (or its parked proxy)."""
        batch = self._batch
        if batch is None:
            with _LOCK:  # (the placement lets the chunk's rows go under it)
                chunk = self._chunk
                if not chunk.placed or chunk.error is not None:
                    return chunk.rows[self._pos]
                if chunk.proxies is not None:
                    return chunk.proxies[self._pos]._row
                batch, index = chunk.locate(self._pos)
        else:
            index = self._index
        batch, index = _follow_split(batch, index)
        row = batch.records[index]
        return row if row.__class__ is tuple else (row.key, row.value, row.timestamp, row.headers)

    def _settled(self) -> bool:
        if self._done:
            return True
        if self._batch is None:
            chunk = self._chunk
            if not chunk.placed:
                return False
            if chunk.error is not None:
                self._exc = chunk.error
                self._done = True
                return True
            if chunk.proxies is not None:
                proxy = chunk.proxies[self._pos]
                if not proxy.done():
                    return False
                self._exc, self._value = proxy._exc, proxy._value
                self._outcome, self._index = proxy._outcome, proxy._index
                self._done = True
                return True
            self._batch, self._index = chunk.locate(self._pos)
        return RecordFuture._settled(self)

    def _watch(self) -> None:
        self._hooked = True
        if not self._chunk.placed:
            self._chunk.hooked.append(self)
        else:
            self._hook_placed()

    def _hook_placed(self) -> None:
        """Under ``_LOCK``, placed and not done (``_settled`` just said so)."""
        self._hooked = True
        proxies = self._chunk.proxies
        if proxies is None:
            self._batch.thunks[self._index] = self
            return
        proxy = proxies[self._pos]  # parked: completed by its proxy
        if proxy._callbacks is None:
            proxy._callbacks = []
        proxy._callbacks.append(self._from_proxy)
        proxy._watch()

    def _from_proxy(self, proxy: DeliveryFuture[RecordMetadata]) -> None:
        """The parked proxy completed: complete this (a reader may have copied the outcome
        already, lazily) and run what waits on it, once."""
        exc = proxy._exc
        self._finish(None if exc is not None else proxy.result(), exc, wake_if_done=True)


_SETTLED_HERE = frozenset((RecordFuture, LaneFuture))


def _follow_split(batch: Any, index: int) -> tuple[Any, int]:
    """The batch (and index in it) that holds record ``index`` of ``batch`` after splits."""
    while batch.split_parts is not None:
        first, second, half = batch.split_parts
        if index < half:
            batch = first
        else:
            batch, index = second, index - half
    return batch, index


def link_records(futures: Sequence[RecordFuture], placed: Sequence[tuple[Any, int, int, int]]) -> None:
    """Point ``futures`` at the batches the loop appended their rows to: ``placed`` holds
    ``(batch, position, i, j)`` for ``futures[i:j]`` at ``batch.thunks[position:]`` (from
    ``RecordAccumulator.append_many``). A hooked future (``_hooked``: waited on, with callbacks
    or an ``on_delivery``) goes into its batch's ``thunks``, so the batch completes it. Under
    ``_LOCK``: a caller thread that hooks a future at the same time sees either no batch (and
    the hook here) or the batch (and hooks it there)."""
    with _LOCK:
        for batch, position, i, j in placed:
            group = futures[i:j]
            for index, fut in enumerate(group, position):
                fut._batch = batch
                fut._index = index
            if any(map(_HOOKED, group)):
                thunks = batch.thunks
                for index, fut in enumerate(group, position):
                    if fut._hooked:
                        thunks[index] = fut


def settle_records(futures: Sequence[Any], outcome: RecordOutcome | None, exc: BaseException | None) -> list[int]:
    """Complete every ``RecordFuture`` in ``futures`` (record ``i`` of a batch) with ``outcome``
    (or ``exc``) under one lock acquisition, then wake its waiters and run its callbacks and
    ``on_delivery`` (each once). Returns the indices of the other entries (plain callables; None
    entries are skipped), which the caller completes itself."""
    others: list[int] = []
    notify: list[tuple[RecordFuture, DeliveryCallback | None, list[Any] | None]] = []
    with _LOCK:
        if futures.count(None) == len(futures):  # a sync batch nobody watches: nothing to do
            return others
        for i, fut in enumerate(futures):
            if fut.__class__ in _SETTLED_HERE:
                if not fut._done:
                    if exc is not None:
                        fut._exc = exc
                    else:
                        fut._outcome = outcome
                        fut._index = i
                    fut._done = True
                if fut._hooked:
                    fut._hooked = False
                    on_delivery, fut._on_delivery = fut._on_delivery, None
                    fns, fut._callbacks = fut._callbacks, None
                    notify.append((fut, on_delivery, fns))
            elif fut is not None:
                others.append(i)
    for fut, on_delivery, fns in notify:
        if fut._event is not None:
            fut._event.set()
        for fn in fns or ():
            fut._run_callback(fn)
        if on_delivery is not None:
            meta = None if fut._exc is not None else fut.result()
            _deliver(on_delivery, meta, fut._exc)
    return others


def _deliver(fn: DeliveryCallback, meta: RecordMetadata | None, exc: BaseException | None) -> None:
    try:
        fn(meta, exc)
    except Exception:
        log.exception("producer delivery callback raised")
