"""``DeliveryFuture``: the result of one sync ``Producer.send``.

It offers the ``concurrent.futures.Future`` interface a caller uses (``result``, ``exception``,
``done``, ``add_done_callback``, ``cancel``/``cancelled``/``running``) at a fraction of the cost:
``concurrent.futures.Future`` builds a ``Condition`` and an ``RLock`` per instance, which at one
future per record was a quarter of ``send``'s time. Here nothing is allocated until someone waits
(an ``Event``, created lazily) or registers a callback; one module-wide lock guards those rare
paths. A record cannot be cancelled once handed to the producer, so ``cancel`` returns False.

``result(timeout)`` raises ``TimeoutError`` (``concurrent.futures.TimeoutError`` is the same class
since Python 3.11) when the timeout passes first, and the delivery exception if it failed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

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
