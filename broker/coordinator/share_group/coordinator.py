"""The share coordinator (KIP-932 "Share coordinator"): the keeper of share-partition state in
``__share_group_state`` on the broker that leads the state partition of a share-partition.

It serves KIP-932's persister RPCs, each for one ``(group, topic id, partition)`` key, the way
Kafka 4.1's ``ShareCoordinatorShard`` does:

* **InitializeShareGroupState** (83): a ShareSnapshot with the given state epoch and start
  offset and no in-flight batches (leader epoch -1); a state epoch below the stored one is
  FENCED_STATE_EPOCH. The group coordinator sends it for ``kafka-share-groups --reset-offsets``.
* **ReadShareGroupState** (84): the stored state for a share-partition leader that is
  initialising its in-memory state; a leader epoch below the stored one is FENCED_LEADER_EPOCH;
  a key without state is UNKNOWN_TOPIC_OR_PARTITION ("not initialised", the leader then starts
  from ``share.auto.offset.reset``).
* **WriteShareGroupState** (85): the share-partition leader's new state (start offset and every
  in-flight batch); FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH for a write older than the stored
  state (a reset happened, or a newer leader wrote); UNKNOWN_TOPIC_OR_PARTITION for a key without
  state (never initialised, or deleted since the writer read it). A ShareUpdate is appended unless the state
  epoch changed or ``share.coordinator.snapshot.update.records.per.snapshot`` updates followed the
  last ShareSnapshot (then a ShareSnapshot with the next snapshot epoch).
* **DeleteShareGroupState** (86): tombstones of both keys (snapshot and update) of the
  share-partition (``kafka-share-groups --delete``).
* **ReadShareGroupStateSummary** (87): state epoch, leader epoch and start offset (what
  ``kafka-share-groups --describe`` prints).

A request for a state partition not led here is NOT_COORDINATOR (the caller finds the new leader
in the metadata and retries). Persist before you reply: every write is appended to the state
partition and the answer waits until the record is committed (below the high watermark, as
Kafka's coordinator runtime waits), at most ``share.coordinator.write.timeout.ms``. A state
partition is replayed into the cache the first time it is used after this broker became its
leader (``forget``: leadership changed). Unknown record types are skipped (forward compatible).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from broker.coordinator.group.store import encode_records
from broker.coordinator.share_group.partition import StateBatch
from broker.coordinator.share_group.records import (
    SHARE_SNAPSHOT,
    SHARE_STATE_TOPIC,
    SHARE_UPDATE,
    PersistedState,
    decode_key,
    replay,
    snapshot_key,
    snapshot_value,
    state_partition,
    update_key,
    update_value,
)
from broker.coordinator.state_log import StateLog, StoreError
from broker.log.errors import LogError
from broker.replication.replica_manager import PartitionError
from pyspark_log.records.batch import decode_batches
from pyspark_log.records.errors import RecordError
from pyspark_log.wire.errors import DecodeError, ErrorCode

log = logging.getLogger(__name__)

StateKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)
_STORED_STATES = frozenset({0, 1, 2, 4})  # Kafka's RecordState ids (ACQUIRED is read back as AVAILABLE)
LOAD_STEP_BYTES = 1 << 20


@dataclass(frozen=True)
class StateResult:
    """One partition's answer: the error (NONE) and, for reads, the state."""

    code: int = ErrorCode.NONE
    message: str | None = None
    state: PersistedState | None = None


@dataclass
class _Entry:
    state: PersistedState
    updates_since_snapshot: int = 0


@dataclass
class ShareCoordinator:
    """The state of every share-partition whose ``__share_group_state`` partition is led here.

    ``log``: the state topic (``StateTopicLog``); ``wait_committed(partition, offset, timeout_ms)``
    waits until the record at ``offset`` is below the high watermark and returns an error code;
    ``led(partition)``: whether this broker leads that state partition now.
    """

    log: StateLog
    wait_committed: Callable[[int, int, int], object]  # -> Awaitable[int]
    led: Callable[[int], bool]
    clock_ms: Callable[[], int]
    updates_per_snapshot: int = 500
    write_timeout_ms: int = 5000
    num_partitions: int = 0  # partitions of __share_group_state (0: not created yet)
    _cache: dict[int, dict[StateKey, _Entry]] = field(default_factory=dict)

    # -- the persister RPCs, one share-partition each -------------------------------------------

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> StateResult:
        states, refused = self._states_for(key)
        if states is None:
            return refused
        current = states.get(key)
        if current is not None and state_epoch < current.state.state_epoch:
            return StateResult(ErrorCode.FENCED_STATE_EPOCH, "The state epoch is older than the stored one.")
        snapshot_epoch = current.state.snapshot_epoch + 1 if current is not None else 0
        return await self._append(key, PersistedState(state_epoch, -1, start_offset, (), snapshot_epoch), None)

    def read(self, key: StateKey, leader_epoch: int) -> StateResult:
        states, refused = self._states_for(key)
        if states is None:
            return refused
        current = states.get(key)
        if current is None:
            return StateResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state.")
        if leader_epoch != -1 and leader_epoch < current.state.leader_epoch:
            return StateResult(ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch is older than the stored one.")
        return StateResult(state=current.state)

    def summary(self, key: StateKey) -> StateResult:
        states, refused = self._states_for(key)
        if states is None:
            return refused
        current = states.get(key)
        if current is None:
            return StateResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state.")
        return StateResult(state=current.state)

    async def write(
        self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int, batches: Sequence[StateBatch]
    ) -> StateResult:
        for b in batches:
            if b.first_offset > b.last_offset or b.delivery_state not in _STORED_STATES or b.delivery_count < 0:
                return StateResult(ErrorCode.INVALID_REQUEST, f"invalid state batch {b}")
        states, refused = self._states_for(key)
        if states is None:
            return refused
        current = states.get(key)
        if current is None:  # never initialised, or deleted since: the writer's copy is stale
            return StateResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state.")
        if current is not None:
            if state_epoch < current.state.state_epoch:
                return StateResult(ErrorCode.FENCED_STATE_EPOCH, "The state epoch is older than the stored one.")
            if leader_epoch < current.state.leader_epoch:
                return StateResult(ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch is older than the stored one.")
        snapshot_epoch = current.state.snapshot_epoch if current is not None else 0
        new = PersistedState(state_epoch, leader_epoch, start_offset, tuple(batches), snapshot_epoch)
        as_update = (
            current is not None
            and current.state.state_epoch == state_epoch
            and current.updates_since_snapshot < self.updates_per_snapshot
        )
        if not as_update and current is not None:
            new = PersistedState(state_epoch, leader_epoch, start_offset, tuple(batches), snapshot_epoch + 1)
        return await self._append(key, new, current if as_update else None)

    async def delete(self, key: StateKey) -> StateResult:
        states, refused = self._states_for(key)
        if states is None:
            return refused
        if key not in states:
            return StateResult()
        sp = self.partition_of(key)
        records = encode_records([(snapshot_key(*key), None), (update_key(*key), None)], self.clock_ms())
        try:
            offset = self.log.append(sp, records)
        except StoreError as exc:
            return StateResult(exc.code, str(exc))
        states.pop(key, None)
        return await self._committed(sp, offset, 1)

    # -- internals ---------------------------------------------------------------------------------

    def partition_of(self, key: StateKey) -> int:
        """The ``__share_group_state`` partition of ``key`` (Kafka's ``SharePartitionKey`` hash)."""
        return state_partition(key[0], key[1], key[2], self.num_partitions)

    def _states_for(self, key: StateKey) -> tuple[dict[StateKey, _Entry] | None, StateResult]:
        if not key[0] or key[2] < 0:
            return None, StateResult(ErrorCode.INVALID_REQUEST, "A group id and a partition >= 0 are required.")
        if self.num_partitions <= 0:
            return None, StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_STATE_TOPIC} does not exist yet.")
        sp = self.partition_of(key)
        if not self.led(sp):
            return None, StateResult(ErrorCode.NOT_COORDINATOR, f"{SHARE_STATE_TOPIC}-{sp} is not led here.")
        states = self._cache.get(sp)
        if states is None:
            try:
                states = self._cache[sp] = self._load(sp)
            except (PartitionError, LogError, StoreError) as exc:
                return None, StateResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, str(exc))
        return states, StateResult()

    async def _append(self, key: StateKey, new: PersistedState, updated: _Entry | None) -> StateResult:
        sp = self.partition_of(key)
        if updated is None:
            entry = (snapshot_key(*key), snapshot_value(new, self.clock_ms()))
        else:
            entry = (update_key(*key), update_value(new))
        try:
            offset = self.log.append(sp, encode_records([entry], self.clock_ms()))
        except StoreError as exc:
            return StateResult(exc.code, str(exc))
        states = self._cache.setdefault(sp, {})
        if updated is None:
            states[key] = _Entry(new)
        else:  # what a reload replays: the update merged into the stored batches
            merged = replay(updated.state, SHARE_UPDATE, entry[1])
            states[key] = _Entry(merged or new, updated.updates_since_snapshot + 1)
        return await self._committed(sp, offset, 0)

    async def _committed(self, sp: int, offset: int | None, last_delta: int) -> StateResult:
        if offset is None:
            return StateResult()
        code = await self.wait_committed(sp, offset + last_delta, self.write_timeout_ms)  # type: ignore[misc]
        if code in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
            return StateResult()
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            self._cache.pop(sp, None)
            return StateResult(ErrorCode.NOT_COORDINATOR, f"{SHARE_STATE_TOPIC}-{sp} is no longer led here.")
        return StateResult(ErrorCode.REQUEST_TIMED_OUT, "The state was not replicated in time.")

    def forget(self, partitions: set[int] | None = None) -> None:
        """Leadership of state partitions changed: read them again when next needed."""
        if partitions is None:
            self._cache.clear()
        for sp in partitions or ():
            self._cache.pop(sp, None)

    def _load(self, sp: int) -> dict[StateKey, _Entry]:
        """Replay one ``__share_group_state`` partition (small: compacted snapshots and updates)."""
        states: dict[StateKey, _Entry | None] = {}
        offset = self.log.log_start_offset(sp)
        end = self.log.log_end_offset(sp)
        while offset < end:
            data, nxt = self.log.read(sp, offset, LOAD_STEP_BYTES)
            if not data or nxt <= offset:
                break
            try:
                batches = decode_batches(data)
            except RecordError as exc:
                log.warning("%s-%s: unreadable batch at %s: %s", SHARE_STATE_TOPIC, sp, offset, exc)
                break
            for header, records in batches:
                if header.is_control:
                    continue
                for rec in records:
                    if rec.offset < offset or rec.key is None:
                        continue
                    self._replay_one(states, bytes(rec.key), None if rec.value is None else bytes(rec.value), sp)
            offset = nxt
        return {k: v for k, v in states.items() if v is not None}

    @staticmethod
    def _replay_one(states: dict[StateKey, _Entry | None], key: bytes, value: bytes | None, sp: int) -> None:
        try:
            decoded = decode_key(key)
            if decoded is None:
                return
            record_type, group, topic_id, partition = decoded
            k = (group, topic_id, partition)
            previous = states.get(k)
            if value is None and record_type == SHARE_UPDATE:
                return  # the update's tombstone comes with the snapshot's
            state = replay(previous.state if previous is not None else None, record_type, value)
            if state is None:
                states[k] = None if record_type == SHARE_SNAPSHOT else previous
            elif record_type == SHARE_SNAPSHOT:
                states[k] = _Entry(state)
            else:
                states[k] = _Entry(state, (previous.updates_since_snapshot if previous is not None else 0) + 1)
        except DecodeError as exc:
            log.warning("%s-%s: unreadable record: %s", SHARE_STATE_TOPIC, sp, exc)
