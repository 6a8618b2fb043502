"""``DeliveryFuture``: the result of one sync ``Producer.send``.

It offers the ``concurrent.futures.Future`` interface a caller uses (``result``, ``exception``,
``done``, ``add_done_callback``, ``cancel``/``cancelled``/``running``) at a fraction of the cost:
``concurrent.futures.Future`` builds a ``Condition`` and an ``RLock`` per instance, which at one
future per record was a quarter of ``send``'s time. Here nothing is allocated until someone waits
(an ``Event``, created lazily) or registers a callback; one module-wide lock guards those rare
paths. A record cannot be cancelled once handed to the producer, so ``cancel`` returns False.

``result(timeout)`` raises ``TimeoutError`` (``concurrent.futures.TimeoutError`` is the same class
since Python 3.11) when the timeout passes first, and the delivery exception if it failed.

``RecordFuture`` is one ``send()``: the record and its future in one object. Its batch completes
all of its futures at once (``settle_records``, one lock acquisition per batch) by pointing them
at a shared ``RecordOutcome``; the ``RecordMetadata`` is built only when someone asks for it.
Its ``on_delivery`` callback (if any) runs once the future is done, on the producer's I/O thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pyspark_log.client.types import Header, RecordMetadata

if TYPE_CHECKING:
    from pyspark_log.records.batch import RecordFields

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

    def _finish(self, value: T | None, exc: BaseException | None) -> None:
        with _LOCK:
            if self._done:
                return
            self._value, self._exc, self._done = value, exc, True
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
    ``base_offset + i``; -1 with acks=0; the timestamp is LogAppendTime when the broker set one)."""

    __slots__ = ("base_offset", "log_append_time_ms", "partition", "records", "topic")

    def __init__(
        self, topic: str, partition: int, base_offset: int, log_append_time_ms: int, records: Sequence[RecordFields]
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.records = records

    def metadata(self, index: int) -> RecordMetadata:
        base = self.base_offset
        lat = self.log_append_time_ms
        return RecordMetadata(
            self.topic,
            self.partition,
            base + index if base >= 0 else -1,
            lat if lat >= 0 else self.records[index].timestamp,
        )


DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], None]


class RecordFuture(DeliveryFuture[RecordMetadata]):
    """One record handed to the sync ``Producer.send`` *and* its future: the producer queues,
    batches and encodes this object itself (it has the ``key``, ``value``, ``timestamp`` and
    ``headers`` of a ``ProducerRecord``), so a ``send`` allocates one object the garbage
    collector tracks instead of three (record, hand-off entry, future). Completed in bulk by
    its batch (``settle_records``)."""

    __slots__ = (
        "_index",
        "_on_delivery",
        "_outcome",
        "_partition",
        "_size",
        "_topic",
        "headers",
        "key",
        "timestamp",
        "value",
    )

    def __init__(  # noqa: PLR0917 - built once per send() on the hot path
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
        self._done = False
        self._value = None
        self._exc = None
        self._event = None
        self._callbacks = None
        self._outcome: RecordOutcome | None = None
        self._index = 0
        self._on_delivery = on_delivery
        self._topic = topic
        self._partition = partition
        self._size = size
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def __repr__(self) -> str:
        if self._done and self._outcome is not None:
            return f"<RecordFuture {self._outcome.metadata(self._index)!r}>"
        return super().__repr__().replace("DeliveryFuture", "RecordFuture")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        if self._exc is not None:
            raise self._exc
        if self._value is None and self._outcome is not None:
            self._value = self._outcome.metadata(self._index)
        return self._value  # type: ignore[return-value]

    def __call__(self, meta: RecordMetadata | None, exc: BaseException | None) -> None:
        """Complete this record alone (parked records, failures before it joined a batch)."""
        if self._done:
            return
        self._finish(meta, exc)
        if self._on_delivery is not None:
            _deliver(self._on_delivery, meta, exc)


def settle_records(futures: Sequence[Any], outcome: RecordOutcome | None, exc: BaseException | None) -> list[int]:
    """Complete every not-yet-done ``RecordFuture`` in ``futures`` (record ``i`` of a batch) with
    ``outcome`` (or ``exc``) under one lock acquisition, then wake its waiters and run its
    callbacks. Returns the indices of the other entries (plain callables; None entries are
    skipped), which the caller completes itself."""
    others: list[int] = []
    notify: list[RecordFuture] = []
    with _LOCK:
        for i, fut in enumerate(futures):
            if fut.__class__ is RecordFuture:
                if fut._done:
                    continue
                fut._done = True
                if exc is not None:
                    fut._exc = exc
                else:
                    fut._outcome = outcome
                    fut._index = i
                if fut._event is not None or fut._callbacks is not None or fut._on_delivery is not None:
                    notify.append(fut)
            elif fut is not None:
                others.append(i)
    for fut in notify:
        event, callbacks, fut._callbacks = fut._event, fut._callbacks, None
        if event is not None:
            event.set()
        for fn in callbacks or ():
            fut._run_callback(fn)
        if fut._on_delivery is not None:
            meta = None if exc is not None else fut.result()
            _deliver(fut._on_delivery, meta, exc)
    return others


def _deliver(fn: DeliveryCallback, meta: RecordMetadata | None, exc: BaseException | None) -> None:
    try:
        fn(meta, exc)
    except Exception:
        log.exception("producer delivery callback raised")
