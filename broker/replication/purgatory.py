"""One delayed-operation mechanism for the requests that wait on a partition: pure, no I/O.

Kafka documentation §4.7 "Replication": an acks=all produce is answered once every in-sync replica
has the records, that is once the leader's high watermark passed them. Kafka parks such requests
in a ``DelayedOperationPurgatory`` (``kafka.server.DelayedOperationPurgatory``): each waiting
request is a ``DelayedOperation`` watched under the keys (topic-partitions) whose progress can
complete it; whoever moves a partition (its high watermark, log end offset, log start offset or
role; Kafka's ``Partition.tryCompleteDelayedRequests`` after ``Partition.maybeIncrementLeaderHW``)
calls ``check_and_complete(key)``, and each operation watched there re-checks its own condition.
A timer expires the ones still waiting (``expire``).

Here as in Kafka the mechanism is one class, instantiated once per operation type by the
``ReplicaManager`` (its asyncio driver owns the futures and the timers):

* ``DelayedProduce``        acks=all: every partition's high watermark reached its append, or the
                            partition stopped being led here (Kafka ``DelayedProduce``);
* ``DelayedFetch``          a fetch long-poll: a watched partition moved (Kafka ``DelayedFetch``;
                            the fetch then reads again and decides whether it has ``min_bytes``);
* ``DelayedDeleteRecords``  every live replica's log start offset reached the requested offset
                            (Kafka ``DelayedDeleteRecords``).

An operation completes exactly once (``force_complete`` returns False after the first time); its
``on_complete`` callback receives the result. The conditions are judged by functions the driver
passes in (``status``, ``changed``): this module holds no partition state, imports no asyncio, and
is driven by the replication simulation as it is by the broker.

Threading: single-threaded (the broker's event loop, or the simulation's event queue).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Generic, TypeVar

from pyspark_log.wire.errors import ErrorCode

K = TypeVar("K", bound=Hashable)


class DelayedOperation:
    """A request waiting for a condition (Kafka's ``DelayedOperation``).

    Subclasses implement ``try_complete`` (check the condition; call ``force_complete`` and return
    True when it holds) and ``on_expiration`` (fill in the timed-out outcome); ``on_complete``
    hands the outcome to the waiter."""

    __slots__ = ("_completed",)

    def __init__(self) -> None:
        self._completed = False

    @property
    def completed(self) -> bool:
        return self._completed

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called once when the operation times out, before ``on_complete``."""

    def force_complete(self) -> bool:
        """Complete now; True only for the call that completed it."""
        if self._completed:
            return False
        self._completed = True
        self.on_complete()
        return True

    def expire(self) -> bool:
        """The operation's timeout passed: complete it with its timed-out outcome (a no-op when it
        completed meanwhile)."""
        if self._completed:
            return False
        self.on_expiration()
        return self.force_complete()


Op = TypeVar("Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[K]):
    """Operations watched by key (Kafka's ``DelayedOperationPurgatory``; see the module docstring).

    ``try_complete_else_watch`` checks a new operation once and watches it under its keys when it
    cannot complete yet; ``check_and_complete(key)`` re-checks every operation watched under
    ``key``; ``unwatch`` forgets a completed or abandoned one. Completed operations are also
    dropped lazily by the next check of a key they were watched under. Re-entrant: a completion
    callback may move partitions (``check_and_complete``) and watch new operations."""

    __slots__ = ("_watchers", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[K, dict[DelayedOperation, None]] = {}

    def __len__(self) -> int:
        """Operations watched (an operation under two keys counts twice, as Kafka's ``watched``)."""
        return sum(len(ops) for ops in self._watchers.values())

    def watched(self, key: K) -> int:
        return len(self._watchers.get(key, ()))

    def try_complete_else_watch(self, operation: DelayedOperation, keys: Iterable[K]) -> bool:
        """True when ``operation`` completed at once; else it is watched under each of ``keys``.

        As Kafka's, it checks again after watching, so that a move between the first check and
        the watch is not missed (with one thread there is none, but the order costs nothing)."""
        if operation.try_complete():
            return True
        for key in keys:
            self._watchers.setdefault(key, {})[operation] = None
        return operation.try_complete()

    def check_and_complete(self, key: K) -> int:
        """Re-check the operations watched under ``key``; returns how many completed now."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        for op in list(ops):
            if op.completed or op.try_complete():
                completed += 1
                ops.pop(op, None)
        # an operation's completion may re-enter (its callback moved the partition) and may watch
        # a new operation under this key: drop only the set this call emptied
        if not ops and self._watchers.get(key) is ops:
            del self._watchers[key]
        return completed

    def unwatch(self, operation: DelayedOperation, keys: Iterable[K]) -> None:
        for key in keys:
            ops = self._watchers.get(key)
            if ops is not None:
                ops.pop(operation, None)
                if not ops:
                    del self._watchers[key]

    def expire_all(self) -> int:
        """Expire every watched operation (the broker shuts down); returns how many completed."""
        ops = {op: None for watched in self._watchers.values() for op in watched}
        self._watchers.clear()
        return sum(1 for op in ops if op.expire())


# -- the three operations ------------------------------------------------------------------------------
AcksStatus = Callable[[K, int], "int | None"]


class DelayedProduce(DelayedOperation, Generic[K]):
    """An acks=all produce (Kafka ``DelayedProduce``): one entry per appended partition, each
    ``(key, required offset)``; ``status(key, required)`` is None while that partition waits, else
    the error code to answer for it (NONE once the high watermark reached ``required``). Expiry
    answers REQUEST_TIMED_OUT for the partitions still waiting. ``callback`` gets the codes in
    entry order."""

    __slots__ = ("_callback", "_codes", "_entries", "_status")

    def __init__(
        self, entries: Sequence[tuple[K, int]], status: AcksStatus[K], callback: Callable[[list[int]], None]
    ) -> None:
        super().__init__()
        self._entries = entries
        self._status = status
        self._callback = callback
        self._codes: list[int | None] = [None] * len(entries)

    @property
    def keys(self) -> list[K]:
        return [key for key, _ in self._entries]

    def try_complete(self) -> bool:
        codes = self._codes
        waiting = False
        for index, (key, required) in enumerate(self._entries):
            if codes[index] is None:
                codes[index] = self._status(key, required)
                waiting = waiting or codes[index] is None
        return False if waiting else self.force_complete()

    def on_expiration(self) -> None:
        self._codes = [ErrorCode.REQUEST_TIMED_OUT if c is None else c for c in self._codes]

    def on_complete(self) -> None:
        self._callback([ErrorCode.REQUEST_TIMED_OUT if c is None else c for c in self._codes])


class DelayedFetch(DelayedOperation):
    """A fetch long-poll (Kafka ``DelayedFetch``): completes when ``changed()`` says one of its
    partitions moved since the fetch last read (the fetch reads again and may wait again), or on
    expiry. ``callback`` is called with no argument."""

    __slots__ = ("_callback", "_changed")

    def __init__(self, changed: Callable[[], bool], callback: Callable[[], None]) -> None:
        super().__init__()
        self._changed = changed
        self._callback = callback

    def try_complete(self) -> bool:
        return self.force_complete() if self._changed() else False

    def on_complete(self) -> None:
        self._callback()


DeleteStatus = Callable[[K, int], "tuple[int, int] | None"]


class DelayedDeleteRecords(DelayedOperation, Generic[K]):
    """A DeleteRecords request (Kafka ``DelayedDeleteRecords``): one entry per partition, each
    ``(key, offset)``; ``status(key, offset)`` is None while the partition's low watermark is below
    ``offset``, else ``(error code, low watermark)``. Expiry answers ``(REQUEST_TIMED_OUT, -1)``
    for the partitions still waiting."""

    __slots__ = ("_callback", "_entries", "_outcomes", "_status")

    def __init__(
        self,
        entries: Sequence[tuple[K, int]],
        status: DeleteStatus[K],
        callback: Callable[[list[tuple[int, int]]], None],
    ) -> None:
        super().__init__()
        self._entries = entries
        self._status = status
        self._callback = callback
        self._outcomes: list[tuple[int, int] | None] = [None] * len(entries)

    def try_complete(self) -> bool:
        outcomes = self._outcomes
        waiting = False
        for index, (key, offset) in enumerate(self._entries):
            if outcomes[index] is None:
                outcomes[index] = self._status(key, offset)
                waiting = waiting or outcomes[index] is None
        return False if waiting else self.force_complete()

    def on_expiration(self) -> None:
        self._outcomes = [(ErrorCode.REQUEST_TIMED_OUT, -1) if o is None else o for o in self._outcomes]

    def on_complete(self) -> None:
        self._callback([(ErrorCode.REQUEST_TIMED_OUT, -1) if o is None else o for o in self._outcomes])
