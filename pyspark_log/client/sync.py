"""The sync facade: ``Producer``, ``Consumer``, ``AdminClient`` for code without an event loop.

Each instance owns a ``LoopThread``: a private asyncio loop in a daemon thread on which its async
core (``AsyncProducer`` / ``AsyncConsumer`` / ``AsyncAdmin``) lives. A sync call submits a
coroutine to that loop (``run_coroutine_threadsafe``) and waits for its result with a timeout, so
the facade works the same in a plain script, a Spark executor, a worker thread, or inside a
coroutine of some *other* running loop (it never calls ``asyncio.run`` and never touches the
caller's loop — though a blocking call there blocks that loop, as any blocking call would).
Calling a facade method from a callback running on its own loop would deadlock; it raises
``RuntimeError`` instead.

The producer's hot path avoids a round trip per record: ``send`` validates the record, blocks for
topic metadata only the first time a topic is seen, reserves ``buffer.memory`` on the caller's
thread (blocking up to ``max.block.ms``: back-pressure), and hands the record to the loop through
an ordered queue (one loop wake-up per burst). It returns a ``DeliveryFuture`` (``futures.py``).

``close()`` (or leaving the ``with`` block) shuts the core down and stops the thread; an instance
that is garbage-collected unclosed stops its thread too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from pyspark_log.client.admin import (
    AlterConfigOp,
    AsyncAdmin,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from pyspark_log.client.cluster import TopicMetadata
from pyspark_log.client.consumer import AsyncConsumer, RawFetch
from pyspark_log.client.errors import BufferExhaustedError, ClientClosedError, KafkaTimeoutError
from pyspark_log.client.futures import DeliveryFuture
from pyspark_log.client.groups import OffsetAndMetadata
from pyspark_log.client.producer import AsyncProducer, DeliveryCallback, HeadersArg
from pyspark_log.client.types import (
    ConsumerRecord,
    IsolationLevel,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

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


class _SyncClient:
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

    def close(self, timeout_ms: float | None = None) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


_SLACK_S = 5.0


def _wait_s(timeout_ms: float | None, default_ms: float) -> float:
    """How long the facade waits for a core call bounded by ``timeout_ms``: that plus slack, so
    the core reports its own timeout with its own message."""
    return (default_ms if timeout_ms is None else max(timeout_ms, 0.0)) / 1000.0 + _SLACK_S


class Producer(_SyncClient):
    """The blocking producer. ``send`` returns a ``DeliveryFuture[RecordMetadata]`` (the
    ``concurrent.futures.Future`` interface); ``on_delivery(metadata, exception)`` runs on the
    client's I/O thread."""

    def __init__(self, config: Mapping[str, Any], **core_kwargs: Any) -> None:
        super().__init__("pylog-producer")
        try:
            self._core = AsyncProducer(config, **core_kwargs)
            self._run(self._core.start(), _wait_s(self._core.max_block_ms, 0))
        except BaseException:
            self._shutdown()
            raise

    @property
    def core(self) -> AsyncProducer:
        return self._core

    def send(  # noqa: PLR0917 - Kafka's record fields, positionally as in ProducerRecord
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> DeliveryFuture[RecordMetadata]:
        """Queue one record (blocking up to ``max.block.ms`` for metadata and buffer room)."""
        core = self._core
        if self._closed:
            raise ClientClosedError("the producer is closed")
        core._check_open()
        record, size = core.prepare(
            topic, value=value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms
        )
        if core.cluster.metadata.partition_count(topic) is None:
            self._run(core.cluster.wait_for_topic(topic, core.max_block_ms), _wait_s(core.max_block_ms, 0))
        core.check_partition(topic, partition)
        if not core.pool.try_reserve(size):
            if self._thread.in_loop_thread():  # from a delivery callback: blocking would deadlock
                raise BufferExhaustedError("buffer.memory is full and send() ran on the I/O thread")
            if not core.pool.reserve_blocking(size, core.max_block_ms / 1000.0):
                raise BufferExhaustedError(
                    f"failed to allocate {size} bytes within max.block.ms={core.max_block_ms:.0f}"
                )
        fut: DeliveryFuture[RecordMetadata] = DeliveryFuture()

        def thunk(meta: RecordMetadata | None, exc: BaseException | None) -> None:
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(meta)  # type: ignore[arg-type]
            if on_delivery is not None:
                on_delivery(meta, exc)

        try:
            core.enqueue_threadsafe(topic, partition, record, size, thunk)
        except BaseException:
            core.pool.release(size)
            raise
        return fut

    def flush(self, timeout_ms: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged or failed."""
        self._run(self._core.flush(timeout_ms), None if timeout_ms is None else _wait_s(timeout_ms, 0))

    def partitions_for(self, topic: str) -> list[int]:
        return self._run(self._core.partitions_for(topic), _wait_s(self._core.max_block_ms, 0))

    def close(self, timeout_ms: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout_ms``), then stop. Idempotent."""
        if self._closed:
            return
        try:
            self._run(self._core.close(timeout_ms), None if timeout_ms is None else _wait_s(timeout_ms, 0))
        finally:
            self._shutdown()


class Consumer(_SyncClient):
    """The blocking consumer (manual assignment). Timeouts are ``timeout_ms``."""

    def __init__(self, config: Mapping[str, Any], **core_kwargs: Any) -> None:
        super().__init__("pylog-consumer")
        try:
            self._core = AsyncConsumer(config, **core_kwargs)
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
        return self._run(self._core.poll(timeout_ms, max_records), _wait_s(timeout_ms, 0))

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

    def close(self, timeout_ms: float | None = None) -> None:
        if self._closed:
            return
        try:
            self._run(self._core.close(), _wait_s(timeout_ms, 30000))
        finally:
            self._shutdown()


class AdminClient(_SyncClient):
    """The blocking admin client; see ``AsyncAdmin`` for the semantics of each call."""

    def __init__(self, config: Mapping[str, Any], **core_kwargs: Any) -> None:
        super().__init__("pylog-admin")
        try:
            self._core = AsyncAdmin(config, **core_kwargs)
            self._api_ms = self._core.default_api_timeout_ms
            self._run(self._core.start(), _wait_s(self._api_ms, 0))
        except BaseException:
            self._shutdown()
            raise

    @property
    def core(self) -> AsyncAdmin:
        return self._core

    def _w(self, timeout_ms: float | None) -> float:
        return _wait_s(timeout_ms, self._api_ms)

    def create_topics(
        self, new_topics: Iterable[NewTopic], *, validate_only: bool = False, timeout_ms: float | None = None
    ) -> None:
        coro = self._core.create_topics(list(new_topics), validate_only=validate_only, timeout_ms=timeout_ms)
        self._run(coro, self._w(timeout_ms))

    def delete_topics(self, names: Iterable[str], *, timeout_ms: float | None = None) -> None:
        self._run(self._core.delete_topics(list(names), timeout_ms=timeout_ms), self._w(timeout_ms))

    def create_partitions(
        self,
        new_counts: Mapping[str, int],
        *,
        assignments: Mapping[str, list[list[int]]] | None = None,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        coro = self._core.create_partitions(
            dict(new_counts), assignments=assignments, validate_only=validate_only, timeout_ms=timeout_ms
        )
        self._run(coro, self._w(timeout_ms))

    def list_topics(self, *, include_internal: bool = False, timeout_ms: float | None = None) -> list[str]:
        coro = self._core.list_topics(include_internal=include_internal, timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def describe_topics(
        self, names: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, TopicMetadata]:
        coro = self._core.describe_topics(None if names is None else list(names), timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription:
        return self._run(self._core.describe_cluster(timeout_ms=timeout_ms), self._w(timeout_ms))

    def describe_configs(
        self, resources: Iterable[ConfigResource], *, timeout_ms: float | None = None
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        return self._run(self._core.describe_configs(list(resources), timeout_ms=timeout_ms), self._w(timeout_ms))

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        coro = self._core.incremental_alter_configs(
            {r: list(ops) for r, ops in changes.items()}, validate_only=validate_only, timeout_ms=timeout_ms
        )
        self._run(coro, self._w(timeout_ms))

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: IsolationLevel | str = IsolationLevel.READ_UNCOMMITTED,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        coro = self._core.list_offsets(dict(specs), isolation_level=isolation_level, timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout_ms: float | None = None,
    ) -> None:
        coro = self._core.alter_consumer_group_offsets(group_id, dict(offsets), timeout_ms=timeout_ms)
        self._run(coro, self._w(timeout_ms))

    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        coro = self._core.list_consumer_group_offsets(
            group_id, None if partitions is None else list(partitions), timeout_ms=timeout_ms
        )
        return self._run(coro, self._w(timeout_ms))

    def close(self, timeout_ms: float | None = None) -> None:
        if self._closed:
            return
        try:
            self._run(self._core.close(), _wait_s(timeout_ms, 30000))
        finally:
            self._shutdown()
