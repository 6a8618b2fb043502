"""Keyed deadlines for the group coordinator (Kafka's heartbeat and rebalance purgatories).

``schedule(key, deadline_ms, action)`` replaces any timer of the same key; ``cancel(key)`` drops
it; ``pop_due(now_ms)`` returns the actions whose deadline has come, earliest first. Time is
whatever the caller passes (the coordinator's injected clock); nothing here sleeps. One owner:
the coordinator's timer task calls ``pop_due`` and runs the actions; handlers only schedule.
The heap holds stale entries of replaced timers until they surface (bounded by a compaction
when stale entries outnumber live ones).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable

Action = Callable[[], None]


class Timers:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, int, Action]] = {}  # key -> (deadline, seq, action)
        self._seq = itertools.count()
        self.on_schedule: Callable[[int], None] | None = None  # told each new deadline (wakes the owner)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def schedule(self, key: Hashable, deadline_ms: int, action: Action) -> None:
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq, action)
        heapq.heappush(self._heap, (deadline_ms, seq, key))
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._live):
            self._heap = [(d, s, k) for k, (d, s, _) in self._live.items()]
            heapq.heapify(self._heap)
        if self.on_schedule is not None:
            self.on_schedule(deadline_ms)

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                return deadline
            heapq.heappop(heap)
        return None

    def pop_due(self, now_ms: int) -> list[Action]:
        due: list[Action] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, seq, key = heapq.heappop(heap)
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                del self._live[key]
                due.append(live[2])
        return due

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()
