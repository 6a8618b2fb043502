"""The blocking ``Consumer`` of the sync facade (``sync.py``): manual assignment, or a consumer
group with ``subscribe``.

Rebalance callbacks run on the thread that calls ``poll`` (or ``unsubscribe``/``close``), as in
Kafka's consumer, so they may call the consumer (``commit`` in ``on_partitions_revoked``): while
the core's ``poll`` runs on the loop thread, the caller's thread waits on a queue and runs each
callback the core hands it; time spent in callbacks does not count against the call's timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from pyspark_log.client.consumer import AsyncConsumer, RawFetch
from pyspark_log.client.errors import ClientClosedError, KafkaTimeoutError
from pyspark_log.client.group.subscription import Callback, ConsumerRebalanceListener, PartitionSet, run_inline
from pyspark_log.client.groups import ConsumerGroupMetadata, OffsetAndMetadata
from pyspark_log.client.loop_thread import _SyncClient, _wait_s
from pyspark_log.client.types import ConsumerRecord, IsolationLevel, OffsetAndTimestamp, TopicPartition

T = TypeVar("T")
_Handoff = tuple[Callback, PartitionSet, "concurrent.futures.Future[None]"] | None


class Consumer(_SyncClient):
    """The blocking consumer (manual assignment or ``subscribe``). Timeouts are ``timeout_ms``."""

    def __init__(self, config: Mapping[str, Any], **core_kwargs: Any) -> None:
        super().__init__("pylog-consumer")
        self._handoffs: queue.Queue[_Handoff] = queue.Queue()
        self._pumping: threading.Thread | None = None
        try:
            self._core = AsyncConsumer(config, **core_kwargs)
            self._core.callback_runner = self._run_on_caller
            self._api_ms = self._core.default_api_timeout_ms
            self._run(self._core.start(), _wait_s(self._api_ms, 0))
        except BaseException:
            self._shutdown()
            raise

    @property
    def core(self) -> AsyncConsumer:
        return self._core

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._call(self._core.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._call(self._core.assignment)

    def unassign(self) -> None:
        self._call(self._core.unassign)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._call(self._core.seek, tp, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._call(self._core.seek_to_beginning, None if partitions is None else list(partitions))

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._call(self._core.seek_to_end, None if partitions is None else list(partitions))

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._call(self._core.pause, list(partitions))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._call(self._core.resume, list(partitions))

    def highwater(self, tp: TopicPartition) -> int | None:
        return self._call(self._core.highwater, tp)

    def position(self, tp: TopicPartition, timeout_ms: float | None = None) -> int:
        return self._run(self._core.position(tp, timeout_ms), _wait_s(timeout_ms, self._api_ms))

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._pump(self._core.poll(timeout_ms, max_records), _wait_s(timeout_ms, 0))

    # -- consumer groups -------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str | None = None,
        *,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
    ) -> None:
        """Join ``group.id`` for ``topics`` or ``pattern`` (see ``AsyncConsumer.subscribe``)."""
        names = [topics] if isinstance(topics, str) else None if topics is None else list(topics)
        self._call(
            self._core.subscribe,
            names,
            pattern=pattern,
            listener=listener,
            on_assign=on_assign,
            on_revoke=on_revoke,
            on_lost=on_lost,
        )

    def unsubscribe(self, timeout_ms: float | None = None) -> None:
        self._pump(self._core.unsubscribe(), _wait_s(timeout_ms, self._api_ms))

    def subscription(self) -> set[str]:
        return self._call(self._core.subscription)

    async def _run_on_caller(self, callback: Callback, partitions: PartitionSet) -> None:
        """On the loop: hand a rebalance callback to the thread pumping (else run it here)."""
        if self._pumping is None:
            await run_inline(callback, partitions)
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._handoffs.put((callback, partitions, done))
        await asyncio.wrap_future(done)

    def _pump(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run ``coro`` on the loop; run the callbacks it hands over on this thread meanwhile."""
        if self._closed:
            coro.close()
            raise ClientClosedError()
        self._pumping = threading.current_thread()
        try:
            fut = self._thread.submit(coro)
            fut.add_done_callback(lambda _f: self._handoffs.put(None))
            deadline = time.monotonic() + timeout_s
            while not fut.done():
                try:
                    item = self._handoffs.get(timeout=max(deadline - time.monotonic(), 0.0))
                except queue.Empty:
                    fut.cancel()
                    raise KafkaTimeoutError(f"operation did not complete within {timeout_s:.1f} s") from None
                if item is not None:
                    started = time.monotonic()
                    self._run_handoff(*item)
                    deadline += time.monotonic() - started
        finally:
            self._pumping = None
        try:
            return fut.result()
        except concurrent.futures.CancelledError:
            raise ClientClosedError("the operation was cancelled because the client closed") from None

    @staticmethod
    def _run_handoff(callback: Callback, partitions: PartitionSet, done: concurrent.futures.Future[None]) -> None:
        try:
            callback(partitions)
        except BaseException as exc:  # noqa: BLE001 - handed back to the loop, which logs it
            done.set_exception(exc)
        else:
            done.set_result(None)

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None, *, skip_missing: bool = False
    ) -> dict[TopicPartition, int]:
        coro = self._core.beginning_offsets(list(partitions), timeout_ms, skip_missing=skip_missing)
        return self._run(coro, _wait_s(timeout_ms, self._api_ms))

    def end_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        skip_missing: bool = False,
        isolation_level: IsolationLevel | str | None = None,
    ) -> dict[TopicPartition, int]:
        coro = self._core.end_offsets(
            list(partitions), timeout_ms, skip_missing=skip_missing, isolation_level=isolation_level
        )
        return self._run(coro, _wait_s(timeout_ms, self._api_ms))

    def offsets_for_times(
        self,
        timestamps: Mapping[TopicPartition, int],
        timeout_ms: float | None = None,
        *,
        skip_missing: bool = False,
        isolation_level: IsolationLevel | str | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        coro = self._core.offsets_for_times(
            dict(timestamps), timeout_ms, skip_missing=skip_missing, isolation_level=isolation_level
        )
        return self._run(coro, _wait_s(timeout_ms, self._api_ms))

    def list_topics(self, timeout_ms: float | None = None) -> dict[str, list[int]]:
        return self._run(self._core.list_topics(timeout_ms), _wait_s(timeout_ms, self._api_ms))

    def partitions_for(self, topic: str, timeout_ms: float | None = None) -> list[int]:
        return self._run(self._core.partitions_for(topic, timeout_ms), _wait_s(timeout_ms, self._api_ms))

    def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        self._run(
            self._core.commit(None if offsets is None else dict(offsets), timeout_ms), _wait_s(timeout_ms, self._api_ms)
        )

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._call(self._core.group_metadata)

    def committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._run(self._core.committed(list(partitions), timeout_ms), _wait_s(timeout_ms, self._api_ms))

    def fetch_raw(
        self,
        tp: TopicPartition,
        offset: int,
        max_bytes: int,
        isolation_level: IsolationLevel | str | None = None,
        *,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        timeout_ms: float | None = None,
    ) -> RawFetch:
        coro = self._core.fetch_raw(
            tp, offset, max_bytes, isolation_level, max_wait_ms=max_wait_ms, min_bytes=min_bytes, timeout_ms=timeout_ms
        )
        return self._run(coro, _wait_s(timeout_ms, self._api_ms) + max_wait_ms / 1000.0)

    def metrics(self) -> dict[str, dict[str, float]]:
        """Kafka's consumer metrics by group and name (see ``pyspark_log.client.metrics``);
        read on the client's I/O thread. After ``close`` the last values stay readable."""
        if self._closed:
            return self._core.metrics()
        return self._call(self._core.metrics)

    def close(self, timeout_ms: float | None = None) -> None:
        if self._closed:
            return
        try:
            self._pump(self._core.close(), _wait_s(timeout_ms, 30000))
        finally:
            self._shutdown()
