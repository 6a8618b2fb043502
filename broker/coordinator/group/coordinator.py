"""The group coordinator: the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
with KIP-345 static members and KIP-394 member ids, and the committed-offset APIs.

Rules follow Kafka's ``GroupCoordinator`` (3.x, classic protocol):

* a dynamic member's first JoinGroup (v4+) gets MEMBER_ID_REQUIRED and a member id to rejoin with;
  that pending id expires after the session timeout;
* a join moves the group to PreparingRebalance; the rebalance completes when every known member
  has rejoined, or after the largest rebalance timeout (dynamic members that did not rejoin are
  removed). An Empty group waits ``group.initial.rebalance.delay.ms`` first, extended while new
  members keep arriving, up to the rebalance timeout;
* the completed join starts a generation: one protocol every member supports, a leader that gets
  the members' metadata, CompletingRebalance until the leader's SyncGroup assignment is stored,
  then Stable. Members that do not send SyncGroup within the rebalance timeout are removed;
* a member that sends no heartbeat for its session timeout is removed (members waiting in a
  rebalance are not; a new member waits at most 5 minutes for its JoinGroup to complete);
* a static member (``group.instance.id``) that rejoins with an unknown member id replaces its old
  member id; in a Stable group with unchanged protocols there is no rebalance and it gets its
  assignment back through SyncGroup. Requests under the replaced member id get
  FENCED_INSTANCE_ID (Kafka documentation §4.5 "The Consumer", KIP-345).

Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447) are staged until the marker of
their transaction lands on the group's offsets partition (``on_marker``); membership (KIP-447
fields, v3+) is checked as for plain commits when the request carries it, not otherwise
(``_validate_offset_commit``, Kafka 3.7 ``validateOffsetCommit``).

JoinGroup and SyncGroup answer later, through a callback; everything else answers at once.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.coordinator.group.group import Group, GroupState, JoinCallback, JoinResult, SyncCallback, TopicPartition
from broker.coordinator.group.manager import GroupConfig, GroupManager
from broker.coordinator.group.rebalance import JoinRequest, Rebalancer
from broker.coordinator.group.records import OFFSETS_TOPIC, CommittedOffset
from broker.coordinator.group.store import OffsetsLog
from pyspark_log.wire.consumer_protocol import PROTOCOL_TYPE
from pyspark_log.wire.errors import ErrorCode

if TYPE_CHECKING:
    from broker.coordinator.consumer_group.coordinator import ConsumerGroups

log = logging.getLogger(__name__)

S = GroupState


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


class GroupCoordinator:
    """One broker's group coordinator; the cache, persistence and timers live in ``manager``."""

    def __init__(
        self,
        config: GroupConfig,
        store: OffsetsLog,
        clock_ms: Callable[[], int],
        *,
        node_id: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.manager = GroupManager(config, store, clock_ms, node_id=node_id)
        self._rb = Rebalancer(config, self.manager, clock_ms, rng)
        self._consumer: ConsumerGroups | None = None

    @property
    def consumer(self) -> ConsumerGroups | None:
        """The KIP-848 consumer groups (``attach`` sets them up); the classic APIs of a group that
        is a consumer group go to them (KIP-848 "Upgrade & Downgrade")."""
        return self._consumer

    @consumer.setter
    def consumer(self, groups: ConsumerGroups | None) -> None:
        self._consumer = groups
        if groups is not None:
            groups.rebalancer = self._rb  # a downgraded group rebalances as a classic one

    def _consumer_group(self, group_id: str, *, join: bool = False) -> ConsumerGroups | None:
        """The consumer groups if ``group_id`` is one of them with classic members to answer."""
        consumer = self._consumer
        if consumer is None or self.manager.status(group_id) is not None:
            return None
        return consumer if consumer.answers_classic(group_id, join=join) else None

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self, num_partitions: int | None, led: Iterable[int]) -> None:
        self.manager.start()
        self.manager.set_partitions(num_partitions, led)

    def shutdown(self) -> None:
        self.manager.shutdown()

    async def run(self) -> None:
        await self.manager.run()

    # -- JoinGroup and SyncGroup (``rebalance.py``) ----------------------------------------------

    def join_group(self, req: JoinRequest, callback: JoinCallback) -> None:
        """A JoinGroup: answered by the consumer group of that id when it has members, else by
        the classic protocol (an Empty consumer group of that id gives way)."""
        consumer = self._consumer_group(req.group_id, join=True)
        if consumer is not None:
            if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
                callback(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
            else:
                consumer.classic_join(req, callback)
            return
        if self._consumer is not None and self.manager.status(req.group_id) is None:
            self._consumer.forget_empty(req.group_id)
        self._rb.join_group(req, callback)

    def sync_group(  # noqa: PLR0917 - the fields of SyncGroup
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            consumer.classic_sync(
                group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name, callback
            )
            return
        self._rb.sync_group(
            group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name, assignments, callback
        )

    # -- Heartbeat and LeaveGroup --------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        error = self.manager.status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is loading: answered blindly, as Kafka does
        if error is not None:
            return error
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            return consumer.classic_heartbeat(group_id, member_id, group_instance_id, generation_id)
        group = self.manager.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._rb.validate_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.get(member_id)
        self._rb.schedule_heartbeat(group, member, member.session_timeout_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(S.PREPARING_REBALANCE) else ErrorCode.NONE

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """Remove members ``(member id, instance id)``; an empty member id with an instance id
        removes that static member (administrative removal). Returns the top-level error and
        one error per member."""
        error = self.manager.status(group_id)
        if error is not None:
            return error, []
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            return ErrorCode.NONE, consumer.classic_leave(group_id, leaving)
        group = self.manager.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[str, str | None, int]] = []
        for member_id, instance_id in leaving:
            if member_id == "":
                current = group.static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._leave(group, current)
                results.append((member_id, instance_id, ErrorCode.NONE))
            elif member_id in group.pending_members:
                group.remove(member_id)
                self.manager.timers.cancel(("heartbeat", group_id, member_id))
                if group.is_(S.PREPARING_REBALANCE):
                    self._rb.try_complete_join(group)
                results.append((member_id, instance_id, ErrorCode.NONE))
            else:
                error = self._rb.validate_member(group, member_id, instance_id)
                if error is None:
                    self._leave(group, member_id)
                results.append((member_id, instance_id, error or ErrorCode.NONE))
        return ErrorCode.NONE, results

    def _leave(self, group: Group, member_id: str) -> None:
        log.info("member %s leaves group %s", member_id, group.group_id)
        self._rb.remove_member_and_update_group(group, group.get(member_id))

    # -- committed offsets ---------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, int]:
        """Store ``offsets``; per partition the error code. Generation -1 with no member id is a
        commit without membership (allowed while the group has no members)."""
        error = self.manager.status(group_id, allow_empty_id=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            group = self.manager.groups[group_id] = Group(group_id)
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id, transactional=False)
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group.is_(S.COMPLETING_REBALANCE):
            return dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            member = group.get(member_id)
            self._rb.schedule_heartbeat(group, member, member.session_timeout_ms)
        return self.manager.store_offsets(group, offsets)

    def commit_txn_offsets(  # noqa: PLR0917 - the fields of TxnOffsetCommit
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, int]:
        """Stage ``offsets`` of a transaction (Kafka ``handleTxnCommitOffsets``); per partition the
        error code. Without generation, member id and instance id (TxnOffsetCommit v0-v2) no
        membership is checked."""
        error = self.manager.status(group_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.groups.get(group_id)
        if group is None:
            group = self.manager.groups[group_id] = Group(group_id)
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id, transactional=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        return self.manager.store_txn_offsets(group, producer_id, producer_epoch, offsets)

    def _validate_offset_commit(
        self, group: Group, member_id: str, group_instance_id: str | None, generation_id: int, *, transactional: bool
    ) -> int | None:
        """Kafka 3.7 ``validateOffsetCommit``: a Dead group is COORDINATOR_NOT_AVAILABLE; generation
        < 0 on an Empty group needs no membership (admin tools, manual assignment); otherwise a
        generation, member id or instance id makes the request a member's, checked like a
        heartbeat's (a known instance under another member id is FENCED_INSTANCE_ID, an unknown
        instance or member UNKNOWN_MEMBER_ID, then ILLEGAL_GENERATION); without any of them only
        an Empty group takes plain commits, while transactional ones (TxnOffsetCommit v0-v2 carry
        no membership) are taken in every state."""
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(S.EMPTY):
            return None
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._rb.validate_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            return error
        if not transactional and not group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit to a group that has members
        return None

    def on_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was appended (``ReplicaManager`` marker listener): on an offsets
        partition, materialize (COMMIT) or drop (ABORT) what that producer staged there."""
        if topic == OFFSETS_TOPIC:
            self.manager.complete_txn(partition, producer_id, commit)

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, *, require_stable: bool = False
    ) -> tuple[int, dict[TopicPartition, CommittedOffset | int | None]]:
        """Committed offsets of ``partitions`` (None: every partition the group has a committed
        offset for). Only commits on the offsets partition's ISR are answered (``store_offsets``).
        With ``require_stable`` (KIP-447) a partition with a staged transactional offset, or a
        commit not yet on the ISR, maps to the error UNSTABLE_OFFSET_COMMIT instead, for named and
        for all partitions alike (Kafka 3.7 ``GroupMetadataManager.getOffsets``)."""
        error = self.manager.status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        group = self.manager.groups.get(group_id)
        if group is not None:
            self.manager.cache_replicated(group)
        if partitions is None:  # every committed partition, checked like named ones (Kafka ``getOffsets``)
            partitions = list(group.offsets) if group is not None else []
        found: dict[TopicPartition, CommittedOffset | int | None] = {}
        for tp in partitions:
            if group is None:
                found[tp] = None
            elif require_stable and (group.pending_txn_offsets.has(tp) or tp in group.unreplicated_offsets):
                found[tp] = int(ErrorCode.UNSTABLE_OFFSET_COMMIT)  # staged, or not on the ISR yet
            else:
                found[tp] = group.offsets.get(tp)
        return ErrorCode.NONE, found

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: allowed for an Empty group, and for a consumer group's topics it does
        not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC otherwise)."""
        error = self.manager.status(group_id)
        if error is not None:
            return error, {}
        group = self.manager.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, int] = {}
        if group.is_(S.EMPTY):
            deletable = list(partitions)
        elif group.protocol_type == PROTOCOL_TYPE:
            deletable = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
            results = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if group.is_subscribed_to(tp[0])}
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        present = [tp for tp in deletable if tp in group.offsets or tp in group.unreplicated_offsets]
        for tp in present:
            group.offsets.pop(tp, None)
            group.unreplicated_offsets.pop(tp, None)
        self.manager.write_tombstones(group_id, present, group=False)
        results.update(dict.fromkeys(deletable, ErrorCode.NONE))
        return ErrorCode.NONE, results

    # -- admin ---------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self.manager.status(group_id, allow_empty_id=True)
        if error is not None:
            return error, GroupSummary("", "", "", ())
        group = self.manager.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, GroupSummary(S.DEAD.value, "", "", ())
        stable = group.is_(S.STABLE)
        protocol = group.protocol_name or ""
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return ErrorCode.NONE, GroupSummary(
            group.state.value, group.protocol_type or "", protocol if stable else "", members
        )

    def list_groups(self, states: Iterable[str] = ()) -> tuple[int, list[tuple[str, str, str]]]:
        """``(group id, protocol type, state)`` of every group here (filtered by state names,
        case-insensitively as Kafka does)."""
        if not self.manager.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted = {s.lower() for s in states}
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading else ErrorCode.NONE
        out = [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.manager.groups.values()
            if not g.is_(S.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]
        return error, out

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        for group_id in group_ids:
            error = self.manager.status(group_id, allow_empty_id=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self.manager.groups.get(group_id)
            if group is None or group.is_(S.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(S.EMPTY):
                self.manager.remove_group(group)
                results[group_id] = ErrorCode.NONE
            else:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
        return results
