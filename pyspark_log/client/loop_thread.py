"""The loop thread under the sync facade: a private asyncio loop in a daemon thread, and the
base class of the sync clients that own one (see ``sync.py``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pyspark_log.client.errors import ClientClosedError, KafkaTimeoutError

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread, until ``stop``."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError("a pylog sync client was called from its own I/O thread (e.g. a delivery callback)")
        if not self.alive:
            coro.close()
            raise ClientClosedError()
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it; on timeout cancel it and raise KafkaTimeoutError."""
        fut = self.submit(coro)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise KafkaTimeoutError(f"operation did not complete within {timeout_s:.1f} s") from None
        except concurrent.futures.CancelledError:
            raise ClientClosedError("the operation was cancelled because the client closed") from None

    def stop(self, join_timeout_s: float = 10.0) -> None:
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            return
        if not self.in_loop_thread():
            self._thread.join(join_timeout_s)


def _stop_thread(thread: LoopThread) -> None:
    thread.stop(join_timeout_s=1.0)


class _SyncClient(ABC):
    """Owns the loop thread and stops it when closed or collected."""

    def __init__(self, name: str) -> None:
        self._thread = LoopThread(name)
        self._finalizer = weakref.finalize(self, _stop_thread, self._thread)
        self._closed = False

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        if self._closed:
            coro.close()
            raise ClientClosedError()
        return self._thread.run(coro, timeout_s)

    def _shutdown(self) -> None:
        self._closed = True
        self._finalizer()

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a plain (non-async) core method on the loop thread, where its state lives."""

        async def call() -> T:
            return fn(*args, **kwargs)

        return self._run(call(), _SLACK_S)

    @abstractmethod
    def close(self, timeout_ms: float | None = None) -> None: ...


_SLACK_S = 5.0


def _wait_s(timeout_ms: float | None, default_ms: float) -> float:
    """How long the facade waits for a core call bounded by ``timeout_ms``: that plus slack, so
    the core reports its own timeout with its own message."""
    return (default_ms if timeout_ms is None else max(timeout_ms, 0.0)) / 1000.0 + _SLACK_S
