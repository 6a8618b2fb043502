"""The driver of KIP-932 share groups on one broker: membership where the broker coordinates the
group, share-partitions where it leads the topic-partition, share sessions, timers and the
``__share_group_state`` I/O. Every decision is made by the pure parts (``group``, ``partition``,
``records``); this module turns requests into their calls and persists what they changed.

* **Membership** (ShareGroupHeartbeat, ShareGroupDescribe, DeleteGroups, ListGroups): a share
  group lives on the broker that leads its ``__consumer_offsets`` partition (the classic group
  coordinator's ``GroupManager.status``), with the session timer in its timer heap (run by its
  one background task). A group id names one kind of group: a heartbeat for an id used by a
  classic or consumer group is refused with GROUP_ID_NOT_FOUND. Membership is kept in memory:
  after a coordinator restart a member's next heartbeat gets UNKNOWN_MEMBER_ID and it rejoins
  (KIP-932 clients do so), docs/compatibility.md.
* **Share-partitions** (ShareFetch, ShareAcknowledge): kept by the topic-partition's leader,
  created on first fetch: from ``__share_group_state`` if it holds the partition's state, else
  at the offset an admin reset left, else at the high watermark (``share.auto.offset.reset``
  = latest, Kafka's default).
* **Share sessions** (KIP-932 "Share session"): per (group, member), epoch 0 opens one (releasing
  what an older session of the member held), -1 closes it (after its acknowledgements are
  applied, its acquired records are released); any other epoch must be the session's next one
  (INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND).
* **Persistence**: after an acknowledgement, a release, a lock expiry or a reset changed a
  share-partition, its ShareSnapshot is appended to ``__share_group_state`` before the client
  hears back, when this broker leads that state partition (always on a single broker). On a
  cluster whose state partition is led elsewhere the state stays in memory (pylog has no
  persister RPCs, WriteShareGroupState & co.): docs/compatibility.md.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.share_group.config import ShareGroupConfig, check_group_config, group_config_defaults
from broker.coordinator.share_group.group import HeartbeatError, HeartbeatOutcome, ShareGroup, TopicsView
from broker.coordinator.share_group.partition import AckError, Acquired, SharePartition
from broker.coordinator.share_group.records import (
    SHARE_STATE_TOPIC,
    PersistedState,
    decode_key,
    replay,
    snapshot_key,
    snapshot_value,
    state_partition,
)
from broker.coordinator.state_log import StateTopicLog, StoreError
from broker.log.errors import LogError
from broker.replication.replica_manager import PartitionError, ReplicaManager
from pyspark_log.records.batch import decode_batches
from pyspark_log.records.errors import RecordError
from pyspark_log.wire.errors import DecodeError, ErrorCode

log = logging.getLogger(__name__)

SharePartitionKey = tuple[str, str, int]  # (group, topic, partition)

# RecordBatch v2 header fields the acquisition needs (KIP-98 layout): base offset, length,
# attributes, last offset delta
_BASE = struct.Struct(">qi")
_ATTRS = struct.Struct(">h")
_DELTA = struct.Struct(">i")
_CONTROL_FLAG = 0x20
_HEADER_BYTES = 61
SHARE_SESSION_LIMIT_REACHED = 133  # Kafka 4.1's Errors (not in pylog's ErrorCode table yet)


def batch_bounds(data: bytes) -> list[tuple[int, int, int, int, bool]]:
    """``(base offset, last offset, start byte, end byte, is control)`` of each whole batch."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        base, length = _BASE.unpack_from(data, pos)
        end = pos + 12 + length
        if length < _HEADER_BYTES - 12 or end > len(data):
            break
        attrs = _ATTRS.unpack_from(data, pos + 21)[0]
        delta = _DELTA.unpack_from(data, pos + 23)[0]
        out.append((base, base + delta, pos, end, bool(attrs & _CONTROL_FLAG)))
        pos = end
    return out


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: set[tuple[str, int]] = field(default_factory=set)


@dataclass
class FetchedPartition:
    """What one partition of a ShareFetch answers."""

    error: int = ErrorCode.NONE
    message: str | None = None
    ack_error: int = ErrorCode.NONE
    ack_message: str | None = None
    records: bytes | None = None
    acquired: list[Acquired] = field(default_factory=list)


class ShareGroups:
    """Every share group this broker coordinates and every share-partition it leads."""

    def __init__(
        self,
        config: ShareGroupConfig,
        manager: Any,  # broker.coordinator.group.manager.GroupManager
        replicas: ReplicaManager | None,
        clock_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self.manager = manager
        self.replicas = replicas
        self.clock_ms = clock_ms
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.pending_start: dict[SharePartitionKey, int] = {}  # admin resets of uninitialised partitions
        self.topics: TopicsView = {}
        self.consumer_groups: dict[str, Any] | None = None  # KIP-848 groups of the same coordinator
        self.state_partitions = 0  # partitions of __share_group_state (0: not created yet)
        self._state_log = StateTopicLog(replicas, SHARE_STATE_TOPIC) if replicas is not None else None
        self._loaded: dict[int, dict[tuple[str, uuid.UUID, int], PersistedState]] = {}
        self.group_configs: dict[str, dict[str, str]] = {}  # group -> its set configs (in memory)

    # -- group configs (the GROUP config resource) ------------------------------------------------

    def group_config(self, group_id: str, key: str) -> str:
        return self.group_configs.get(group_id, {}).get(key) or group_config_defaults(self.config)[key]

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id, "share.record.lock.duration.ms"))

    def alter_group_configs(self, group_id: str, changes: dict[str, str | None], validate_only: bool) -> str | None:
        """IncrementalAlterConfigs of a GROUP resource: None, or why it is refused (INVALID_CONFIG).
        Kept in this broker's memory (docs/compatibility.md)."""
        defaults = group_config_defaults(self.config)
        for key, value in changes.items():
            if value is None:
                problem = None if key in defaults else f"Unknown group config name: {key}"
            else:
                problem = check_group_config(self.config, key, value)
            if problem is not None:
                return problem
        if not validate_only:
            current = self.group_configs.setdefault(group_id, {})
            for key, value in changes.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value
        return None

    def describe_group_configs(self, group_id: str) -> list[dict[str, Any]]:
        """DescribeConfigs of a GROUP resource: every share key, set (source 8,
        DYNAMIC_GROUP_CONFIG) or default (5)."""
        set_ = self.group_configs.get(group_id, {})
        return [
            {
                "name": key,
                "value": set_.get(key, default),
                "read_only": False,
                "config_source": 8 if key in set_ else 5,
                "config_type": 2 if key.endswith(("reset", "level")) else 3,  # STRING / INT
            }
            for key, default in group_config_defaults(self.config).items()
        ]

    # -- membership (the group coordinator's side) ----------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed: tuple[str, ...] | None,
        *,
        rack_id: str | None,
        client_id: str,
        client_host: str,
    ) -> tuple[int, str | None, HeartbeatOutcome | None]:
        error = self.manager.status(group_id)
        if error is not None:
            return error, None, None
        if not group_id:
            return ErrorCode.INVALID_REQUEST, "GroupId can't be empty.", None
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                return ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.", None
            if self._other_kind(group_id):
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
            group = ShareGroup(group_id)
        try:
            outcome = group.heartbeat(
                member_id, member_epoch, subscribed, self.topics, rack_id=rack_id, client_id=client_id,
                client_host=client_host, max_size=self.config.max_size,
            )  # fmt: skip
        except HeartbeatError as exc:
            return exc.code, exc.message, None
        self.groups[group_id] = group
        key = ("sg-session", group_id, member_id)
        if outcome.left:
            self.manager.timers.cancel(key)
        else:
            timeout_ms = int(self.group_config(group_id, "share.session.timeout.ms"))
            self.manager.timers.schedule(key, self.clock_ms() + timeout_ms, lambda: self._expire(group_id, member_id))
        return ErrorCode.NONE, None, outcome

    def _other_kind(self, group_id: str) -> bool:
        classic = self.manager.groups.get(group_id)
        if classic is not None and (classic.members or classic.offsets):
            return True
        return self.consumer_groups is not None and group_id in self.consumer_groups

    def _expire(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.remove(member_id, self.topics):
            log.info("share group %s: member %s removed (session timeout)", group_id, member_id)

    def get(self, group_id: str) -> ShareGroup | None:
        if self.manager.status(group_id, allow_empty_id=True) is not None:
            return None
        return self.groups.get(group_id)

    def listed(self) -> list[ShareGroup]:
        return [g for g in self.groups.values() if self.manager.status(g.group_id, allow_empty_id=True) is None]

    def delete(self, group_id: str) -> int | None:
        """DeleteGroups: None if not a share group here, NON_EMPTY_GROUP with members, else
        deleted with its share-partition state (tombstones in ``__share_group_state``)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._tombstone(key)
            del self.partitions[key]
        for key in [k for k in self.pending_start if k[0] == group_id]:
            del self.pending_start[key]
        return ErrorCode.NONE

    def drop_unowned(self) -> None:
        for group_id in list(self.groups):
            if self.manager.status(group_id, allow_empty_id=True) == ErrorCode.NOT_COORDINATOR:
                group = self.groups.pop(group_id)
                for member_id in group.members:
                    self.manager.timers.cancel(("sg-session", group_id, member_id))

    # -- offsets (admin) ----------------------------------------------------------------------

    def start_offset(self, key: SharePartitionKey) -> int | None:
        """The SPSO of an initialised share-partition (None: never fetched, no state here)."""
        part = self.partitions.get(key)
        if part is not None:
            return part.spso
        state = self._persisted(key)
        if state is not None:
            return state.start_offset
        return self.pending_start.get(key)

    def alter_offset(self, key: SharePartitionKey, offset: int) -> int:
        """AlterShareGroupOffsets for one partition of an empty group (the caller checks)."""
        group_id, topic, partition = key
        if self.replicas is not None:
            hosted = self.replicas.get_partition(topic, partition)
            if hosted is not None:
                offset = max(hosted.log.log_start_offset, min(offset, hosted.high_watermark))
        part = self.partitions.get(key)
        if part is None:
            state = self._persisted(key)
            part = SharePartition(
                offset, self.config.delivery_count_limit, self.config.partition_max_record_locks,
                state_epoch=state.state_epoch if state is not None else 0,
            )  # fmt: skip
            self.partitions[key] = part
        for member in {m for (g, m) in self.sessions if g == group_id}:
            part.release_member(member)
        part.reset(offset)
        self.groups.setdefault(group_id, ShareGroup(group_id))
        return self._persist(key) or ErrorCode.NONE

    # -- share sessions and fetches (the partition leader's side) --------------------------------

    def open_session(self, group_id: str, member_id: str, epoch: int) -> tuple[int, str | None, ShareSession | None]:
        """Check the request's share session epoch; the session (opened for epoch 0)."""
        key = (group_id, member_id)
        session = self.sessions.get(key)
        if epoch == 0:
            if session is not None:
                self._release_session(session)
            if session is None and len(self.sessions) >= self.config.max_share_sessions:
                return SHARE_SESSION_LIMIT_REACHED, "The share session cache is full.", None
            session = self.sessions[key] = ShareSession(group_id, member_id)
            return ErrorCode.NONE, None, session
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, f"Share session for member {member_id} not found.", None
        if epoch == -1:
            return ErrorCode.NONE, None, session
        if epoch != session.next_epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, f"Share session epoch {epoch} is not the expected one.", None
        session.next_epoch = 1 if session.next_epoch >= 2**31 - 1 else session.next_epoch + 1
        return ErrorCode.NONE, None, session

    def close_session(self, session: ShareSession) -> None:
        self.sessions.pop((session.group_id, session.member_id), None)
        self._release_session(session)

    def _release_session(self, session: ShareSession) -> None:
        for topic, partition in session.partitions:
            key = (session.group_id, topic, partition)
            part = self.partitions.get(key)
            if part is not None and part.release_member(session.member_id):
                self._persist(key)

    def acknowledge(
        self, key: SharePartitionKey, member_id: str, batches: Iterable[tuple[int, int, list[int]]]
    ) -> tuple[int, str | None]:
        """Apply a member's acknowledgement batches to one share-partition and persist them."""
        part = self.partitions.get(key)
        if part is None:
            return ErrorCode.INVALID_RECORD_STATE, "The share-partition has no acquired records."
        error: tuple[int, str | None] = (ErrorCode.NONE, None)
        for first, last, types in batches:
            try:
                part.acknowledge(member_id, first, last, types)
            except AckError as exc:
                error = (exc.code, str(exc))
        code = self._persist(key)
        if code is not None and error[0] == ErrorCode.NONE:
            error = (code, "writing the share-partition state failed")
        self._schedule_expiry(key)
        return error

    def fetch(
        self,
        key: SharePartitionKey,
        member_id: str,
        max_bytes: int,
        max_records: int,
    ) -> FetchedPartition:
        """Acquire records of one share-partition for ``member_id``: the batches read from the
        log and the acquired offset ranges (none: nothing available now)."""
        assert self.replicas is not None
        _, topic, partition = key
        try:
            part = self._partition(key)
        except PartitionError as exc:
            return FetchedPartition(exc.code)
        if part.expire_locks(self.clock_ms()):
            self._persist(key)
        hosted = self.replicas.get_partition(topic, partition)
        if hosted is None:
            return FetchedPartition(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if hosted.log.log_start_offset > part.spso:
            part.move_start(hosted.log.log_start_offset)
        offset = part.next_fetch_offset()
        read_committed = self.group_config(key[0], "share.isolation.level") == "read_committed"
        try:
            read = self.replicas.read(
                topic, partition, offset, max(max_bytes, 1), read_committed=read_committed, min_one_batch=True
            )
        except PartitionError as exc:
            return FetchedPartition(exc.code)
        except LogError as exc:
            if exc.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                part.move_start(hosted.log.log_start_offset)
                return FetchedPartition()
            return FetchedPartition(exc.code)
        end = read.last_stable_offset if read_committed else read.high_watermark
        with read.records as chunk:
            data = chunk.read_bytes()
        bounds = batch_bounds(data)
        aborted = _aborted_ranges(read.aborted_transactions, data, bounds) if read_committed else []
        wanted = [(b, last) for b, last, _, _, control in bounds if not control]
        acquired = part.acquire(
            member_id, _minus(wanted, aborted), end, max_records, self.clock_ms(), self.lock_duration_ms(key[0])
        )
        # the gap archived for control batches and aborted records is state worth keeping
        if not acquired:
            return FetchedPartition()
        self._schedule_expiry(key)
        kept = b"".join(
            data[start:stop]
            for base, last, start, stop, _ in bounds
            if any(a.first_offset <= last and a.last_offset >= base for a in acquired)
        )
        return FetchedPartition(records=kept, acquired=acquired)

    def _partition(self, key: SharePartitionKey) -> SharePartition:
        part = self.partitions.get(key)
        if part is not None:
            return part
        assert self.replicas is not None
        _, topic, partition = key
        hosted = self.replicas.get_partition(topic, partition)
        if hosted is None:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} is not led here")
        state = self._persisted(key)
        if state is not None:
            part = SharePartition.restore(
                state.start_offset, state.batches, state_epoch=state.state_epoch,
                delivery_count_limit=self.config.delivery_count_limit,
                max_in_flight=self.config.partition_max_record_locks,
            )  # fmt: skip
            part.move_start(hosted.log.log_start_offset)
        else:
            start = self.pending_start.pop(key, None)
            if start is None:  # share.auto.offset.reset: latest (Kafka's default) or earliest
                earliest = self.group_config(key[0], "share.auto.offset.reset") == "earliest"
                start = hosted.log.log_start_offset if earliest else hosted.high_watermark
            part = SharePartition(start, self.config.delivery_count_limit, self.config.partition_max_record_locks)
        self.partitions[key] = part
        self._persist(key)  # the initial state (Kafka: InitializeShareGroupState)
        return part

    # -- lock expiry ---------------------------------------------------------------------------

    def _schedule_expiry(self, key: SharePartitionKey) -> None:
        part = self.partitions.get(key)
        timer = ("sg-lock", *key)
        deadline = part.next_lock_deadline() if part is not None else None
        if deadline is None:
            self.manager.timers.cancel(timer)
        else:
            self.manager.timers.schedule(timer, deadline, lambda: self._expire_locks(key))

    def _expire_locks(self, key: SharePartitionKey) -> None:
        part = self.partitions.get(key)
        if part is not None and part.expire_locks(self.clock_ms()):
            self._persist(key)
        self._schedule_expiry(key)

    # -- __share_group_state -----------------------------------------------------------------------

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        found = self.topics.get(topic)
        return found[0] if found is not None else None  # type: ignore[return-value]

    def _state_partition_of(self, key: SharePartitionKey) -> tuple[int, uuid.UUID] | None:
        topic_id = self._topic_id(key[1])
        if topic_id is None or self.state_partitions <= 0 or self._state_log is None:
            return None
        return state_partition(key[0], topic_id, key[2], self.state_partitions), topic_id

    def _persist(self, key: SharePartitionKey) -> int | None:
        """Append the share-partition's snapshot; None, or the error code of a failed append."""
        part = self.partitions.get(key)
        where = self._state_partition_of(key)
        if part is None or where is None:
            return None
        sp, topic_id = where
        state = PersistedState(part.state_epoch, 0, part.spso, tuple(part.snapshot()))
        assert self._state_log is not None
        try:
            self._state_log.append(
                sp,
                _encode(
                    [(snapshot_key(key[0], topic_id, key[2]), snapshot_value(state, self.clock_ms()))], self.clock_ms()
                ),
            )
        except StoreError as exc:
            if exc.code == ErrorCode.NOT_COORDINATOR:
                return None  # the state partition is led elsewhere: in memory only (module docstring)
            log.warning("writing the state of share-partition %s failed: %s", key, exc)
            return exc.code
        except PartitionError:
            return None
        self._loaded.setdefault(sp, {})[(key[0], topic_id, key[2])] = state
        return None

    def _tombstone(self, key: SharePartitionKey) -> None:
        where = self._state_partition_of(key)
        if where is None:
            return
        sp, topic_id = where
        assert self._state_log is not None
        try:
            self._state_log.append(sp, _encode([(snapshot_key(key[0], topic_id, key[2]), None)], self.clock_ms()))
        except (StoreError, PartitionError):
            return
        self._loaded.get(sp, {}).pop((key[0], topic_id, key[2]), None)

    def _persisted(self, key: SharePartitionKey) -> PersistedState | None:
        where = self._state_partition_of(key)
        if where is None:
            return None
        sp, topic_id = where
        states = self._loaded.get(sp)
        if states is None:
            try:
                states = self._loaded[sp] = self._load(sp)
            except (PartitionError, LogError, StoreError):
                return None
        return states.get((key[0], topic_id, key[2]))

    def _load(self, sp: int) -> dict[tuple[str, uuid.UUID, int], PersistedState]:
        """Replay one ``__share_group_state`` partition (it is small: compacted snapshots)."""
        assert self._state_log is not None
        states: dict[tuple[str, uuid.UUID, int], PersistedState | None] = {}
        offset = self._state_log.log_start_offset(sp)
        end = self._state_log.log_end_offset(sp)
        while offset < end:
            data, nxt = self._state_log.read(sp, offset, 1 << 20)
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
                    try:
                        decoded = decode_key(bytes(rec.key))
                        if decoded is None:
                            continue
                        rtype, group, topic_id, partition = decoded
                        k = (group, topic_id, partition)
                        value = bytes(rec.value) if rec.value is not None else None
                        states[k] = replay(states.get(k), rtype, value)
                    except DecodeError as exc:
                        log.warning("%s-%s: unreadable record: %s", SHARE_STATE_TOPIC, sp, exc)
            offset = nxt
        return {k: v for k, v in states.items() if v is not None}

    def forget_state_cache(self) -> None:
        """Leadership of ``__share_group_state`` changed: read it again when next needed."""
        self._loaded.clear()

    def drop_partitions(self, led: Callable[[str, int], bool]) -> None:
        """Forget share-partitions of topic-partitions no longer led here (their new leader
        starts from the persisted state)."""
        for key in [k for k in self.partitions if not led(k[1], k[2])]:
            del self.partitions[key]
            self.manager.timers.cancel(("sg-lock", *key))


def _encode(entries: list[tuple[bytes, bytes | None]], now_ms: int) -> bytes:
    from broker.coordinator.group.store import encode_records

    return encode_records(entries, now_ms)


def _aborted_ranges(
    aborted: list[Any] | None, data: bytes, bounds: list[tuple[int, int, int, int, bool]]
) -> list[tuple[int, int]]:
    """Offsets of read_committed data written by aborted transactions (KIP-98): from each aborted
    transaction's first offset to its ABORT marker, for batches of that producer."""
    if not aborted:
        return []
    out = []
    try:
        for header, records in decode_batches(data, verify_crc=False):
            if header.is_control or not header.is_transactional:
                continue
            for txn in aborted:
                if (
                    txn.producer_id == header.producer_id
                    and header.base_offset >= txn.first_offset
                    and (header.base_offset <= txn.last_offset)
                ):
                    last = records[-1].offset if records else header.base_offset
                    out.append((header.base_offset, last))
    except RecordError:
        return []
    return out


def _minus(batches: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``batches`` without the offsets in ``holes`` (those become gaps, archived)."""
    out = batches
    for lo, hi in holes:
        nxt = []
        for a, b in out:
            if hi < a or lo > b:
                nxt.append((a, b))
                continue
            if a < lo:
                nxt.append((a, lo - 1))
            if b > hi:
                nxt.append((hi + 1, b))
        out = nxt
    return out
