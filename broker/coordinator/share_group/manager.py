"""The driver of KIP-932 share groups on one broker: membership where the broker coordinates the
group, share-partitions where it leads the topic-partition, share sessions, timers and the
``__share_group_state`` I/O. Every decision is made by the pure parts (``group``, ``partition``,
``records``); this module turns requests into their calls and persists what they changed.

* **Membership** (ShareGroupHeartbeat, ShareGroupDescribe, DeleteGroups, ListGroups): a share
  group lives on the broker that leads its ``__consumer_offsets`` partition (the classic group
  coordinator's ``GroupManager.status``), with the session timer in its timer heap (run by its
  one background task). A group id names one kind of group: a heartbeat for an id used by a
  classic or consumer group is refused with GROUP_ID_NOT_FOUND. Every change of membership,
  epochs or assignments is appended to ``__consumer_offsets`` with Kafka's share-group record
  types (``group_records``) before the member hears back; a coordinator that loads the partition
  replays them (the members keep their epochs and get a new session timeout).
* **Share-partitions** (ShareFetch, ShareAcknowledge): kept by the topic-partition's leader,
  created on first fetch from the state the share coordinator holds (ReadShareGroupState through
  the ``persister``), else at ``share.auto.offset.reset`` (latest, Kafka's default; the initial
  state is written at once with InitializeShareGroupState).
* **Share sessions** (KIP-932 "Share session"): per (group, member), epoch 0 opens one (releasing
  what an older session of the member held), -1 closes it (after its acknowledgements are
  applied, its acquired records are released); any other epoch must be the session's next one
  (INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND).
* **Persistence** (WriteShareGroupState through the ``persister``): after an acquisition, an
  acknowledgement, a release, a lock expiry, the share-partition's whole in-flight window (start
  offset, states, delivery counts; acquired records written as available with their count) is
  written to its share coordinator, which answers once ``__share_group_state`` committed it; the
  client hears back after that. Writes of one share-partition go one at a time, each with the
  state current when it starts. A write refused as fenced (FENCED_STATE_EPOCH: an admin reset;
  FENCED_LEADER_EPOCH: a newer leader; UNKNOWN_TOPIC_OR_PARTITION: the state was deleted) drops
  the in-memory state: the next fetch reads it again (or starts afresh). So a partition leader
  that dies loses only locks: its successor reads the start offset, the acknowledged records and
  the delivery counts (acquired records count as delivered, the delivery limit holds across
  failures).
* **Admin** (the group coordinator's side): DescribeShareGroupOffsets reads the start offsets
  with ReadShareGroupStateSummary, AlterShareGroupOffsets initialises the state at the new offset
  with the next state epoch (InitializeShareGroupState), DeleteGroups deletes the state of every
  share-partition the group was assigned (DeleteShareGroupState).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.group.written import WrittenRecords
from broker.coordinator.share_group.config import ShareGroupConfig, check_group_config, group_config_defaults
from broker.coordinator.share_group.coordinator import ShareCoordinator, StateResult
from broker.coordinator.share_group.group import HeartbeatError, HeartbeatOutcome, ShareGroup, TopicsView
from broker.coordinator.share_group.group_records import Initialized, group_records
from broker.coordinator.share_group.group_records import replay as replay_groups
from broker.coordinator.share_group.partition import AckError, Acquired, SharePartition
from broker.coordinator.share_group.persister import Persister
from broker.coordinator.share_group.records import PersistedState
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
        self.initialized: dict[str, Initialized] = {}  # group -> share-partitions it was assigned or reset
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.topics: TopicsView = {}
        self.consumer_groups: dict[str, Any] | None = None  # KIP-848 groups of the same coordinator
        self.persister: Persister | None = None  # None: share-partition state kept in memory only
        self.coordinator: ShareCoordinator | None = None  # the share coordinator on this broker
        self.group_configs: dict[str, dict[str, str]] = {}  # group -> its set configs (in memory)
        self._written = WrittenRecords(manager._append, "share group")  # group -> records last written
        self._key_locks: dict[SharePartitionKey, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

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
        member = group.members.get(member_id)
        if member is not None:
            self._note_initialized(group_id, member.assignment)
        code = self._persist_group(group)
        if code is not None:
            return code, "writing the share group failed", None
        key = ("sg-session", group_id, member_id)
        if outcome.left:
            self.manager.timers.cancel(key)
        else:
            timeout_ms = int(self.group_config(group_id, "share.session.timeout.ms"))
            self.manager.timers.schedule(key, self.clock_ms() + timeout_ms, lambda: self._expire(group_id, member_id))
        return ErrorCode.NONE, None, outcome

    def _note_initialized(self, group_id: str, assignment: dict[str, frozenset[int]]) -> None:
        known = self.initialized.setdefault(group_id, {})
        for topic, partitions in assignment.items():
            found = self.topics.get(topic)
            if found is None:
                continue
            topic_id = found[0]
            before = known.get(topic)
            if before is None or before[0] != topic_id:
                known[topic] = (topic_id, frozenset(partitions))  # type: ignore[assignment]
            elif not partitions <= before[1]:
                known[topic] = (before[0], before[1] | partitions)

    def _other_kind(self, group_id: str) -> bool:
        classic = self.manager.groups.get(group_id)
        if classic is not None and (classic.members or classic.offsets or classic.unreplicated_offsets):
            return True
        return self.consumer_groups is not None and group_id in self.consumer_groups

    def _expire(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.remove(member_id, self.topics):
            log.info("share group %s: member %s removed (session timeout)", group_id, member_id)
            self._persist_group(group)

    def get(self, group_id: str) -> ShareGroup | None:
        if self.manager.status(group_id, allow_empty_id=True) is not None:
            return None
        return self.groups.get(group_id)

    def listed(self) -> list[ShareGroup]:
        return [g for g in self.groups.values() if self.manager.status(g.group_id, allow_empty_id=True) is None]

    async def delete(self, group_id: str) -> int | None:
        """DeleteGroups: None if not a share group here, NON_EMPTY_GROUP with members, else the
        state of each of its share-partitions is deleted (DeleteShareGroupState) and then the
        group (tombstones of its records in ``__consumer_offsets``)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        for topic, (topic_id, partitions) in sorted(self.initialized.get(group_id, {}).items()):
            for p in sorted(partitions):
                result = await self._state_call("delete", (group_id, topic_id, p))
                if result is not None and result.code != ErrorCode.NONE:
                    return result.code
                self._drop_partition((group_id, topic, p))
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        group.deleted = True
        code = self._persist_group(group)
        if code is not None:
            group.deleted = False
            return code
        del self.groups[group_id]
        self.initialized.pop(group_id, None)
        self._written.forget(group_id)
        return ErrorCode.NONE

    def drop_unowned(self) -> None:
        for group_id in list(self.groups):
            if self.manager.status(group_id, allow_empty_id=True) == ErrorCode.NOT_COORDINATOR:
                group = self.groups.pop(group_id)
                self.initialized.pop(group_id, None)
                self._written.forget(group_id)
                for member_id in group.members:
                    self.manager.timers.cancel(("sg-session", group_id, member_id))

    # -- membership persistence (Kafka's share group records in __consumer_offsets) ---------------

    def _persist_group(self, group: ShareGroup) -> int | None:
        """Append what changed in the group's records (tombstones for what is gone) before the
        member hears back; None, or the error code of a failed append."""
        current = {} if group.deleted else group_records(group, self.initialized.get(group.group_id, {}), self.topics)
        return self._written.write(group.group_id, current)

    def load_groups(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Rebuild the share groups of a loaded ``__consumer_offsets`` partition with the epochs
        and assignments they had; every member gets a new session timeout."""
        try:
            loaded = replay_groups(records, self.topics)
        except DecodeError as exc:
            log.warning("__consumer_offsets-%s: share group records unreadable: %s", partition, exc)
            return
        now = self.clock_ms()
        for group_id, group in loaded.groups.items():
            if self.manager.partition_of(group_id) != partition:
                continue
            self.groups[group_id] = group
            self.initialized[group_id] = loaded.initialized.get(group_id, {})
            self._written.remember(group_id, group_records(group, self.initialized[group_id], self.topics))
            timeout_ms = int(self.group_config(group_id, "share.session.timeout.ms"))
            for member_id in group.members:
                self.manager.timers.schedule(
                    ("sg-session", group_id, member_id), now + timeout_ms,
                    functools.partial(self._expire, group_id, member_id),
                )  # fmt: skip
            log.info(
                "share group %s loaded at epoch %d (%d member(s))", group_id, group.group_epoch, len(group.members)
            )

    # -- offsets (admin, the group coordinator's side) --------------------------------------------

    async def start_offset(self, key: SharePartitionKey) -> int | None:
        """The SPSO its share coordinator holds (ReadShareGroupStateSummary; None: no state)."""
        topic_id = self._topic_id(key[1])
        if topic_id is None:
            return None
        result = await self._state_call("summary", (key[0], topic_id, key[2]))
        if result is None:  # no persister: this broker's memory
            part = self.partitions.get(key)
            return part.spso if part is not None else None
        return result.state.start_offset if result.code == ErrorCode.NONE and result.state is not None else None

    async def alter_offset(self, key: SharePartitionKey, offset: int) -> int:
        """AlterShareGroupOffsets for one partition of an empty group (the caller checks): the
        state starts again at ``offset`` with the next state epoch (InitializeShareGroupState);
        the partition's leader, fenced at its next write, reads it again."""
        group_id, topic, partition = key
        topic_id = self._topic_id(topic)
        if topic_id is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self.replicas is not None:
            hosted = self.replicas.get_partition(topic, partition)
            if hosted is not None and hosted.is_leader:
                offset = max(hosted.log.log_start_offset, min(offset, hosted.high_watermark))
        skey = (group_id, topic_id, partition)
        current = await self._state_call("summary", skey)
        epoch = current.state.state_epoch + 1 if current is not None and current.state is not None else 0
        self._drop_partition(key)
        result = await self._state_call("initialize", skey, epoch, offset)
        if result is None:  # no persister: in memory
            part = self.partitions[key] = SharePartition(
                offset, self.config.delivery_count_limit, self.config.partition_max_record_locks
            )
            part.reset(offset)
        elif result.code != ErrorCode.NONE:
            return result.code
        self._drop_partition(key)
        group = self.groups.setdefault(group_id, ShareGroup(group_id))
        self._note_initialized(group_id, {topic: frozenset({partition})})
        return self._persist_group(group) or ErrorCode.NONE

    async def _state_call(self, what: str, key: tuple[str, uuid.UUID, int], *args: int) -> StateResult | None:
        if self.persister is None:
            return None
        call = getattr(self.persister, what)
        result: StateResult = await call(key, *args)
        return result

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
                self._spawn(self._persist(key))

    async def revalidate(self, key: SharePartitionKey) -> None:
        """A share session starts fetching ``key``: if the share coordinator's state no longer is
        this copy's (an admin reset or delete while no session fetched it: a different state epoch
        or start offset, or no state), drop the copy so the fetch reads it again. A copy with
        acquired records is kept: its next write (at the latest, the locks' expiry) is fenced."""
        part = self.partitions.get(key)
        topic_id = self._topic_id(key[1])
        if part is None or topic_id is None or part.next_lock_deadline() is not None:
            return
        result = await self._state_call("summary", (key[0], topic_id, key[2]))
        if result is None or self.partitions.get(key) is not part or part.next_lock_deadline() is not None:
            return
        stored = result.state
        if result.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (
            result.code == ErrorCode.NONE
            and stored is not None
            and (stored.state_epoch, stored.start_offset) != (part.state_epoch, part.spso)
        ):
            log.info("share-partition %s: the stored state changed; it is read again", key)
            self._drop_partition(key)

    async def acknowledge(
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
        self._schedule_expiry(key)
        code = await self._persist(key)
        if code is not None and error[0] == ErrorCode.NONE:
            error = (code, "writing the share-partition state failed")
        return error

    async def fetch(
        self,
        key: SharePartitionKey,
        member_id: str,
        max_bytes: int,
        max_records: int,
    ) -> FetchedPartition:
        """Acquire records of one share-partition for ``member_id``: the batches read from the
        log and the acquired offset ranges (none: nothing available now). The acquisition is
        persisted (delivery counts) before the records are handed out."""
        assert self.replicas is not None
        _, topic, partition = key
        try:
            part = await self._partition(key)
        except PartitionError as exc:
            return FetchedPartition(exc.code, str(exc))
        if part.expire_locks(self.clock_ms()):
            self._spawn(self._persist(key))
        hosted = self.replicas.get_partition(topic, partition)
        if hosted is None or not hosted.is_leader or self.partitions.get(key) is not part:
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
        code = await self._persist(key)
        if code is not None:  # not handed out: the records stay acquired until their lock expires
            return FetchedPartition(code, "writing the share-partition state failed")
        kept = b"".join(
            data[start:stop]
            for base, last, start, stop, _ in bounds
            if any(a.first_offset <= last and a.last_offset >= base for a in acquired)
        )
        return FetchedPartition(records=kept, acquired=acquired)

    async def _partition(self, key: SharePartitionKey) -> SharePartition:
        part = self.partitions.get(key)
        if part is not None:
            return part
        async with self._key_lock(key):
            part = self.partitions.get(key)
            if part is not None:
                return part
            hosted = self._led(key)
            topic_id = self._topic_id(key[1])
            state: PersistedState | None = None
            if topic_id is not None:
                result = await self._state_call("read", (key[0], topic_id, key[2]), hosted.leader_epoch)
                if result is not None and result.code == ErrorCode.NONE:
                    state = result.state
                elif result is not None and result.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise PartitionError(_fetch_error(result.code), result.message or "reading the state failed")
            hosted = self._led(key)  # still the leader after the read
            if state is not None:
                part = SharePartition.restore(
                    state.start_offset, state.batches, state_epoch=state.state_epoch,
                    delivery_count_limit=self.config.delivery_count_limit,
                    max_in_flight=self.config.partition_max_record_locks,
                )  # fmt: skip
                part.move_start(hosted.log.log_start_offset)
            else:  # share.auto.offset.reset: latest (Kafka's default) or earliest
                earliest = self.group_config(key[0], "share.auto.offset.reset") == "earliest"
                start = hosted.log.log_start_offset if earliest else hosted.high_watermark
                part = SharePartition(start, self.config.delivery_count_limit, self.config.partition_max_record_locks)
            self.partitions[key] = part
        if state is None and topic_id is not None:  # the initial state (InitializeShareGroupState)
            result = await self._state_call("initialize", (key[0], topic_id, key[2]), part.state_epoch, part.spso)
            if result is not None and result.code != ErrorCode.NONE:
                self._drop_partition(key)
                raise PartitionError(_fetch_error(result.code), "initialising the share-partition state failed")
        return part

    def _led(self, key: SharePartitionKey) -> Any:
        assert self.replicas is not None
        hosted = self.replicas.get_partition(key[1], key[2])
        if hosted is None or not hosted.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{key[1]}-{key[2]} is not led here")
        return hosted

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
            self._spawn(self._persist(key))
        self._schedule_expiry(key)

    # -- share-partition state (WriteShareGroupState through the persister) ------------------------

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        found = self.topics.get(topic)
        return found[0] if found is not None else None  # type: ignore[return-value]

    def _key_lock(self, key: SharePartitionKey) -> asyncio.Lock:
        lock = self._key_locks.get(key)
        if lock is None:
            lock = self._key_locks[key] = asyncio.Lock()
        return lock

    async def _persist(self, key: SharePartitionKey) -> int | None:
        """Write the share-partition's state as it is when the write starts (one write of a key
        at a time); None, or the error code of a failed write. Fenced: the state is dropped."""
        topic_id = self._topic_id(key[1])
        if self.persister is None or topic_id is None or self.replicas is None:
            return None
        async with self._key_lock(key):
            part = self.partitions.get(key)
            hosted = self.replicas.get_partition(key[1], key[2])
            if part is None or hosted is None or not hosted.is_leader:
                return None
            state = PersistedState(part.state_epoch, hosted.leader_epoch, part.spso, tuple(part.snapshot()))
            result = await self.persister.write((key[0], topic_id, key[2]), state)
        if result.code in (
            ErrorCode.FENCED_STATE_EPOCH,
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ):
            log.info("share-partition %s: state fenced (%s); it is read again", key, result.message)
            if self.partitions.get(key) is part:
                self._drop_partition(key)
        if result.code != ErrorCode.NONE:
            log.warning("writing the state of share-partition %s failed: %s", key, result.message)
            return result.code
        return None

    def _spawn(self, work: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(work)
        except RuntimeError:  # no loop (a unit test driving the pure parts)
            work.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _drop_partition(self, key: SharePartitionKey) -> None:
        self.partitions.pop(key, None)
        self.manager.timers.cancel(("sg-lock", *key))

    def drop_partitions(self, led: Callable[[str, int], bool]) -> None:
        """Forget share-partitions of topic-partitions no longer led here (their new leader
        starts from the persisted state)."""
        for key in [k for k in self.partitions if not led(k[1], k[2])]:
            self._drop_partition(key)


def _fetch_error(code: int) -> int:
    """A persister error as a ShareFetch partition error (the client retries either)."""
    if code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return code


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
