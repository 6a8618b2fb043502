"""The thin driver of KIP-848 consumer groups on a broker: it checks that this broker coordinates
the group (the classic coordinator's ``__consumer_offsets`` partition ownership), turns requests
into calls of ``ConsumerGroup`` (pure), and keeps the session and revocation timers in the group
coordinator's timer heap (run by its one background task).

A group id names either a classic group or a consumer group. A heartbeat for a classic group that
has members is refused (GROUP_ID_NOT_FOUND, "not a consumer group": pylog does not migrate groups
online); an Empty classic group becomes a consumer group. Committed offsets of a consumer group
live in the classic coordinator's group entry of the same id (written to ``__consumer_offsets``
as every commit is). The group's own state is written there too, with Kafka's consumer group
records (``records``): after each change the records that differ (tombstones for what is gone)
are appended before the member hears back, and a loaded partition's records are replayed
(``load``), so a new coordinator resumes the same epochs and assignments.
"""

from __future__ import annotations

import base64
import functools
import logging
import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.coordinator.consumer_group.config import ConsumerGroupConfig
from broker.coordinator.consumer_group.group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    HeartbeatError,
    HeartbeatOutcome,
    HeartbeatRequest,
    TopicsView,
)
from broker.coordinator.consumer_group.migration import assignment_bytes, from_classic, to_classic
from broker.coordinator.consumer_group.reconcile import MemberState, normalize
from broker.coordinator.consumer_group.records import group_records, replay
from broker.coordinator.group.group import Group, GroupState, JoinCallback, JoinResult, SyncCallback, SyncResult
from broker.coordinator.group.manager import GroupManager
from broker.coordinator.group.records import CommittedOffset, group_key, group_value
from broker.coordinator.group.store import StoreError
from broker.coordinator.group.written import WrittenRecords
from pyspark_log.wire.consumer_protocol import PROTOCOL_TYPE, decode_subscription
from pyspark_log.wire.errors import DecodeError, ErrorCode

if TYPE_CHECKING:
    from broker.coordinator.group.rebalance import JoinRequest, Rebalancer

log = logging.getLogger(__name__)

NO_GENERATION = -1  # Kafka's JoinGroupRequest.UNKNOWN_GENERATION_ID: a commit without membership


@dataclass(frozen=True)
class HeartbeatAnswer:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[str, frozenset[int]] | None = None


class ConsumerGroups:
    """Every consumer group this broker coordinates (see the module docstring)."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        manager: GroupManager,
        clock_ms: Callable[[], int],
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.manager = manager
        self.clock_ms = clock_ms
        self.rng = rng or random.Random()
        self.groups: dict[str, ConsumerGroup] = {}
        self.topics: TopicsView = {}  # the metadata image's topics (``attach`` keeps it current)
        self._written = WrittenRecords(manager._append, "consumer group")  # each group's records as last written
        self.rebalancer: Rebalancer | None = None  # the classic rebalances (a downgraded group's)
        manager.on_records_loaded = self.load
        manager.live_subscriptions = self.live_subscriptions

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------

    def heartbeat(self, group_id: str, req: HeartbeatRequest, topics: TopicsView, version: int) -> HeartbeatAnswer:
        error = self.manager.status(group_id)
        if error is not None:
            return HeartbeatAnswer(error)
        created = group_id not in self.groups
        upgraded: Group | None = None
        try:
            req = self._validate(group_id, req, version)
            group, upgraded = self._group_for(group_id, req)
            if req.member_epoch == LEAVE_EPOCH and upgraded is None and self._may_downgrade(group, req.member_id):
                error = self._downgrade(group, req.member_id)
                if error is not None:
                    return HeartbeatAnswer(error)
                return HeartbeatAnswer(ErrorCode.NONE, member_id=req.member_id, member_epoch=LEAVE_EPOCH,
                                       heartbeat_interval_ms=self.config.heartbeat_interval_ms)  # fmt: skip
            full = (
                req.rebalance_timeout_ms != -1
                and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
                and req.owned is not None
            )
            outcome = group.heartbeat(req, topics, self.config, self.clock_ms(), full_request=full)
        except HeartbeatError as exc:
            failed = self.groups.get(group_id)
            if created and failed is not None and not failed.members:
                del self.groups[group_id]  # a refused first join leaves no group behind
            return HeartbeatAnswer(exc.code, exc.message, member_epoch=-1)
        # an upgrade writes the classic group's tombstone with the consumer group's records
        error = self._persist(group, [(group_key(group_id), None)] if upgraded is not None else [])
        if error is not None:
            return HeartbeatAnswer(error)  # an upgrade that could not be written did not happen
        if upgraded is not None:
            self._install_upgrade(upgraded, group)
        self._after(group, outcome)
        return HeartbeatAnswer(
            ErrorCode.NONE,
            member_id=outcome.member_id,
            member_epoch=outcome.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=outcome.assignment,
        )

    def _group_for(self, group_id: str, req: HeartbeatRequest) -> tuple[ConsumerGroup, Group | None]:
        """The group, created by a join; an Empty classic group of the same id is taken over, and
        a classic group with members is upgraded when ``group.consumer.migration.policy`` allows
        it (Kafka ``validateOnlineUpgrade``: protocol type ``consumer``, at most
        ``group.consumer.max.size`` members, readable embedded protocols; GROUP_ID_NOT_FOUND
        otherwise). An upgraded group is returned with the classic group it replaces and is
        installed only once its records are written (``_install_upgrade``)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group, None
        if req.member_epoch != JOIN_EPOCH:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group_id}."
            )
        classic = self.manager.groups.get(group_id)
        if classic is not None and classic.members and not classic.is_(GroupState.DEAD):
            refused = HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
            if not self.config.upgrade_enabled:
                log.info("Cannot upgrade classic group %s to consumer group: the online upgrade is disabled", group_id)
                raise refused
            if classic.protocol_type != PROTOCOL_TYPE or classic.size > self.config.max_size:
                log.info("Cannot upgrade classic group %s to consumer group (protocol type %s, %d members)",
                         group_id, classic.protocol_type, classic.size)  # fmt: skip
                raise refused
            try:
                return from_classic(classic, self.topics), classic
            except DecodeError as exc:
                log.warning("Cannot upgrade classic group %s: its embedded consumer protocol is malformed: %s",
                            group_id, exc)  # fmt: skip
                raise refused from None
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group, None

    def _install_upgrade(self, classic: Group, group: ConsumerGroup) -> None:
        """The upgrade is written: the classic group's pending JoinGroup/SyncGroup hear
        REBALANCE_IN_PROGRESS (they rejoin the consumer group), its timers stop, its committed
        offsets stay in a member-less entry of the same id, and every classic member gets a
        session of its own session timeout (Kafka ``convertToConsumerGroup``)."""
        gid, timers = group.group_id, self.manager.timers
        for m in list(classic.members.values()):
            classic.invoke_join(m, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id))
            classic.invoke_sync(m, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            timers.cancel(("heartbeat", gid, m.member_id))
        for pending in classic.pending_members:
            timers.cancel(("heartbeat", gid, pending))
        self.manager.cancel_group_timers(gid)
        holder = Group(gid)
        holder.offsets, holder.offset_positions = classic.offsets, classic.offset_positions
        holder.unreplicated_offsets = classic.unreplicated_offsets
        holder.pending_txn_offsets = classic.pending_txn_offsets
        classic.transition_to(GroupState.DEAD)
        self.manager.groups[gid] = holder
        self.groups[gid] = group
        for mid, member in group.members.items():
            if member.classic is not None:
                self._schedule(gid, mid, "cg-session", member.classic.session_timeout_ms, "session")
        log.info("classic group %s upgraded to a consumer group at epoch %d", gid, group.group_epoch)

    # -- downgrade (KIP-848 "Upgrade & Downgrade") ----------------------------------------------

    def _may_downgrade(self, group: ConsumerGroup, member_id: str) -> bool:
        """Kafka ``validateOnlineDowngradeWithFencedMember``: the member leaving is the last one
        using the consumer protocol, others remain, the policy allows a downgrade and they fit in
        ``group.max.size``."""
        if self.rebalancer is None or not group.all_classic_except(member_id) or len(group.members) <= 1:
            return False
        if not self.config.downgrade_enabled:
            log.info("Cannot downgrade consumer group %s to classic group: the online downgrade is disabled",
                     group.group_id)  # fmt: skip
            return False
        return len(group.members) - 1 <= self.config.classic_max_size

    def _downgrade(self, group: ConsumerGroup, leaving_id: str) -> int | None:
        """Turn ``group`` into a classic group without ``leaving_id``: tombstones for every
        consumer group record and the classic group's metadata record in one append, then the
        classic group takes the offsets entry's place, its members get heartbeat deadlines and
        a rebalance starts (Kafka ``convertToClassicGroup``). None, or the append's error code."""
        assert self.rebalancer is not None
        gid = group.group_id
        classic = to_classic(group, leaving_id, self.clock_ms())
        stored = classic.to_stored({m.member_id: m.assignment for m in classic.members.values()})
        keys = self._written.keys(gid) | set(group_records(group, self.topics))
        entries: list[tuple[bytes, bytes | None]] = [(k, None) for k in sorted(keys)]
        entries.append((group_key(gid), group_value(stored)))
        try:
            self.manager._append(gid, entries)
        except StoreError as exc:
            log.warning("downgrading consumer group %s failed: %s", gid, exc)
            return exc.code
        holder = self.manager.groups.get(gid)
        if holder is not None:
            classic.offsets, classic.offset_positions = holder.offsets, holder.offset_positions
            classic.unreplicated_offsets = holder.unreplicated_offsets
            classic.pending_txn_offsets = holder.pending_txn_offsets
        for mid in group.members:
            self._cancel_timers(gid, mid)
        del self.groups[gid]
        self._written.forget(gid)
        self.manager.groups[gid] = classic
        for m in classic.members.values():
            self.rebalancer.schedule_heartbeat(classic, m, m.session_timeout_ms)
        self.rebalancer.prepare_rebalance(classic, f"Downgrade group {gid} from consumer to classic.")
        log.info("consumer group %s downgraded to a classic group (generation %d)", gid, classic.generation_id)
        return None

    # -- classic members in a consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ------

    def answers_classic(self, group_id: str, *, join: bool = False) -> bool:
        """Whether the classic APIs for ``group_id`` go to a consumer group here: JoinGroup when
        it has members (an Empty one gives way to a classic group), the others whenever it exists."""
        group = self.groups.get(group_id)
        return group is not None and (bool(group.members) or not join)

    def classic_join(self, req: JoinRequest, callback: JoinCallback) -> None:
        """Kafka ``classicGroupJoinToConsumerGroup``: a dynamic member without an id first gets one
        (MEMBER_ID_REQUIRED); the member's protocols must be ``consumer`` ones every other classic
        member supports (INCONSISTENT_GROUP_PROTOCOL); it joins or rejoins at once and the answer
        carries its member epoch as the generation, its first protocol, and no leader (the group
        computes the assignment, handed out by SyncGroup)."""
        group = self.groups[req.group_id]
        member_id = req.member_id or f"{req.client_id}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
        if member_id not in group.members and len(group.members) >= self.config.max_size:
            callback(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id))
            return
        if not req.protocols or not group.supports_classic_protocols(
            req.protocol_type, {n for n, _ in req.protocols}, member_id
        ):
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            return
        if req.require_known_member_id and not req.member_id:
            callback(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
            return
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except DecodeError:
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            return
        owned: dict[str, set[int]] = {}
        for topic, partition in subscription.owned_partitions:
            owned.setdefault(topic, set()).add(partition)
        classic = ClassicMetadata(req.session_timeout_ms, tuple((n, bytes(m)) for n, m in req.protocols))
        try:
            member, fenced = group.classic_join(
                member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                classic, subscription.topics, normalize(owned), subscription.rack_id, self.topics, self.config,
            )  # fmt: skip
        except HeartbeatError as exc:
            callback(JoinResult(exc.code, req.member_id))
            return
        error = self._persist(group)
        if error is not None:
            callback(JoinResult(error, member_id))
            return
        gid = group.group_id
        for old in fenced:
            self._cancel_timers(gid, old)
        self.manager.timers.cancel(("cg-join", gid, member_id))
        self._schedule(gid, member_id, "cg-session", req.session_timeout_ms, "session")
        self._schedule(gid, member_id, "cg-sync", req.rebalance_timeout_ms, "sync")
        callback(JoinResult(ErrorCode.NONE, member_id, member.member_epoch, PROTOCOL_TYPE, classic.protocol_name, ""))

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember | int:
        """Kafka ``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol``: the
        member, or UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID. An empty member id with an instance id
        names the static member (LeaveGroup's administrative removal)."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            held = group.static_members.get(instance_id)
            member = group.members.get(held) if held is not None else None
            if member is not None and member_id and member.member_id != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member is None or member.classic is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return member

    def classic_sync(  # noqa: PLR0917 - the fields of SyncGroup
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        callback: SyncCallback,
    ) -> None:
        """Kafka ``classicGroupSyncToConsumerGroup``: the member's assigned partitions (those it
        may use now; never ones another member still holds), or ILLEGAL_GENERATION for a
        generation that is not its member epoch, INCONSISTENT_GROUP_PROTOCOL for another
        protocol, REBALANCE_IN_PROGRESS when the group epoch moved past it (it rejoins)."""
        group = self.groups[group_id]
        found = self._classic_member(group, member_id, instance_id)
        if isinstance(found, int):
            callback(SyncResult(found))
            return
        member = found
        assert member.classic is not None
        if generation_id != member.member_epoch:
            callback(SyncResult(ErrorCode.ILLEGAL_GENERATION))
            return
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != member.classic.protocol_name
        ):
            callback(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        gid, mid = group_id, member.member_id
        if group.group_epoch > member.member_epoch and member.assignment.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_if_absent(gid, mid, "cg-join", member.rebalance_timeout_ms, "join")
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        self.manager.timers.cancel(("cg-sync", gid, mid))
        self._schedule(gid, mid, "cg-session", member.classic.session_timeout_ms, "session")
        payload = assignment_bytes(member, dict(member.assignment.assigned))
        callback(SyncResult(ErrorCode.NONE, PROTOCOL_TYPE, member.classic.protocol_name, payload))

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> int:
        """Kafka ``classicGroupHeartbeatToConsumerGroup``: the member's session goes on; it is told
        REBALANCE_IN_PROGRESS (and must rejoin within its rebalance timeout) when
        ``ConsumerGroup.classic_must_rejoin`` says so."""
        group = self.groups[group_id]
        found = self._classic_member(group, member_id, instance_id)
        if isinstance(found, int):
            return found
        member = found
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule(group_id, member.member_id, "cg-session", member.classic.session_timeout_ms, "session")
        if group.classic_must_rejoin(member):
            self._schedule_if_absent(group_id, member.member_id, "cg-join", member.rebalance_timeout_ms, "join")
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[tuple[str, str | None, int]]:
        """Kafka ``classicGroupLeaveToConsumerGroup``: each classic member named leaves; per
        member the error code."""
        group = self.groups[group_id]
        results: list[tuple[str, str | None, int]] = []
        removed = False
        for member_id, instance_id in leaving:
            found = self._classic_member(group, member_id, instance_id)
            if isinstance(found, int):
                results.append((member_id, instance_id, found))
                continue
            log.info("classic member %s leaves consumer group %s", found.member_id, group_id)
            group.remove_member(found.member_id)
            self._cancel_timers(group_id, found.member_id)
            removed = True
            results.append((found.member_id, instance_id, ErrorCode.NONE))
        if removed:
            self._persist(group)
        return results

    # -- timers ---------------------------------------------------------------------------------

    def _schedule(self, group_id: str, member_id: str, kind: str, timeout_ms: int, why: str) -> None:
        self.manager.timers.schedule(
            (kind, group_id, member_id),
            self.clock_ms() + timeout_ms,
            functools.partial(self._expire, group_id, member_id, why),
        )

    def _schedule_if_absent(self, group_id: str, member_id: str, kind: str, timeout_ms: int, why: str) -> None:
        if (kind, group_id, member_id) not in self.manager.timers:
            self._schedule(group_id, member_id, kind, timeout_ms, why)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("cg-session", "cg-revoke", "cg-join", "cg-sync"):
            self.manager.timers.cancel((kind, group_id, member_id))

    def _validate(self, group_id: str, req: HeartbeatRequest, version: int) -> HeartbeatRequest:
        """Kafka ``throwIfConsumerGroupHeartbeatRequestIsInvalid``; v0 members without an id get one."""

        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.INVALID_REQUEST, message)

        if not group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            raise invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise invalid("RackId can't be empty.")
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            raise invalid(f"MemberEpoch is invalid: {req.member_epoch}")
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            raise invalid("InstanceId can't be null.")
        if not req.member_id:
            if version >= 1 or req.member_epoch != JOIN_EPOCH:
                raise invalid("MemberId can't be empty.")
            raw = uuid.UUID(int=self.rng.getrandbits(128), version=4).bytes
            req = HeartbeatRequest(**{**req.__dict__, "member_id": base64.urlsafe_b64encode(raw).decode()[:22]})
        if req.member_epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        return req

    def _after(self, group: ConsumerGroup, outcome: HeartbeatOutcome) -> None:
        timers = self.manager.timers
        gid, mid = group.group_id, outcome.member_id
        for old in outcome.fenced:
            timers.cancel(("cg-session", gid, old))
            timers.cancel(("cg-revoke", gid, old))
        if outcome.session_deadline_ms is None:
            timers.cancel(("cg-session", gid, mid))
        else:
            timers.schedule(
                ("cg-session", gid, mid), outcome.session_deadline_ms, lambda: self._expire(gid, mid, "session")
            )
        if outcome.revocation_deadline_ms is None:
            timers.cancel(("cg-revoke", gid, mid))
        elif ("cg-revoke", gid, mid) not in timers:
            timers.schedule(
                ("cg-revoke", gid, mid), outcome.revocation_deadline_ms, lambda: self._expire(gid, mid, "rebalance")
            )

    def _expire(self, group_id: str, member_id: str, why: str) -> None:
        """A session, revocation, (classic) join or sync deadline passed: the member is fenced;
        if it was the last consumer-protocol member of a group of classic ones, the group is
        downgraded instead (Kafka ``consumerGroupFenceMember``)."""
        group = self.groups.get(group_id)
        if group is None:
            return
        self._cancel_timers(group_id, member_id)
        if member_id in group.members and self._may_downgrade(group, member_id):
            log.info("consumer group %s: member %s fenced (%s timeout)", group_id, member_id, why)
            self._downgrade(group, member_id)
            return
        if group.expire_member(member_id):
            log.info("consumer group %s: member %s fenced (%s timeout)", group_id, member_id, why)
            self._persist(group)

    # -- offsets, admin and ownership -----------------------------------------------------------

    # -- persistence (Kafka's consumer group records in __consumer_offsets) -----------------------

    def _persist(self, group: ConsumerGroup, extra: list[tuple[bytes, bytes | None]] | None = None) -> int | None:
        """Append what changed in the group's records (tombstones for what is gone), with
        ``extra`` records first, before the member hears back; None, or the error code of a
        failed append (the state stays in memory and is written with the next change)."""
        current = {} if group.deleted else group_records(group, self.topics)
        return self._written.write(group.group_id, current, extra or [])

    def load(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Rebuild the groups of a loaded ``__consumer_offsets`` partition with the epochs and
        assignments they had; every member gets a new session (it keeps heartbeating)."""
        try:
            loaded = replay(records, self.topics)
        except DecodeError as exc:
            log.warning("__consumer_offsets-%s: consumer group records unreadable: %s", partition, exc)
            return
        now = self.clock_ms()
        for group_id, group in loaded.items():
            if self.manager.partition_of(group_id) != partition:
                continue
            group.assignor_name = group.choose_assignor(self.config)
            self.groups[group_id] = group
            self._written.remember(group_id, group_records(group, self.topics))
            for member_id, member in group.members.items():
                session = member.classic.session_timeout_ms if member.classic is not None else None
                deadline = now + (session or self.config.session_timeout_ms)
                self.manager.timers.schedule(
                    ("cg-session", group_id, member_id),
                    deadline,
                    functools.partial(self._expire, group_id, member_id, "session"),
                )
            log.info(
                "consumer group %s loaded at epoch %d (%d member(s))", group_id, group.group_epoch, len(group.members)
            )

    def live_subscriptions(self, group_id: str) -> frozenset[str] | None:
        """The topics a consumer group with members subscribes to (its committed offsets of those
        do not expire, as Kafka's); None for a group without members or not a consumer group."""
        group = self.groups.get(group_id)
        if group is None or not group.members:
            return None
        return frozenset().union(*group.subscribed_topics(self.topics).values())

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        version: int,
        partitions: Iterable[tuple[str, int]],
        *,
        transactional: bool = False,
        instance_id: str | None = None,
    ) -> dict[tuple[str, int], int] | None:
        """Kafka ``ConsumerGroup.validateOffsetCommit`` with KIP-1251's assignment epochs (Kafka
        4.3) for OffsetCommit and TxnOffsetCommit: None if ``group_id`` is not a consumer group
        here, else each partition's verdict (NONE: commit it).

        An epoch below 0 is a standalone/admin commit, allowed while the group has no members; a
        TxnOffsetCommit without any membership (epoch -1, no member id, no instance id: v0-v2
        carry none, and a producer may send none) is allowed in every state. Otherwise the
        member must exist (UNKNOWN_MEMBER_ID), and a plain commit must be
        OffsetCommit v9+ (UNSUPPORTED_VERSION). The member's current epoch commits anything; an
        epoch above it is stale; an older one commits a partition the member still owns (assigned
        or pending revocation) and got at that epoch or before, else that partition is stale.
        Stale is STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for a transactional commit (Kafka's
        ``validateTransactionalOffsetCommit``: TxnOffsetCommit has no STALE_MEMBER_EPOCH)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        wanted = list(partitions)

        def every(code: int) -> dict[tuple[str, int], int]:
            return dict.fromkeys(wanted, code)

        if member_epoch < 0 and not group.members:
            return every(ErrorCode.NONE)
        if transactional and member_epoch == NO_GENERATION and not member_id and instance_id is None:
            return every(ErrorCode.NONE)
        member = group.members.get(member_id)
        if member is None:
            return every(ErrorCode.UNKNOWN_MEMBER_ID)
        if member.classic is not None:  # a classic member: its generation is its member epoch
            return every(ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.ILLEGAL_GENERATION)
        if version < 9 and not transactional:
            return every(ErrorCode.UNSUPPORTED_VERSION)
        stale = ErrorCode.ILLEGAL_GENERATION if transactional else ErrorCode.STALE_MEMBER_EPOCH
        if member_epoch == member.member_epoch:
            return every(ErrorCode.NONE)
        if member_epoch > member.member_epoch:
            return every(stale)
        verdicts: dict[tuple[str, int], int] = {}
        for topic, partition in wanted:
            since = member.assignment.assignment_epoch(topic, partition)
            verdicts[(topic, partition)] = ErrorCode.NONE if since is not None and since <= member_epoch else stale
        return verdicts

    def commit_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> dict[tuple[str, int], int]:
        """Store a member's commit in the group's offsets entry."""
        return self.manager.store_offsets(self._offsets_entry(group_id), offsets)

    def stage_txn_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> dict[tuple[str, int], int]:
        """Stage a member's transactional commit in the group's offsets entry; it becomes the
        group's with the transaction's COMMIT marker."""
        return self.manager.store_txn_offsets(self._offsets_entry(group_id), producer_id, producer_epoch, offsets)

    def _offsets_entry(self, group_id: str) -> Group:
        """The group's entry in the offsets manager (a consumer group's offsets live there as a
        classic group's do), created on first use."""
        entry = self.manager.groups.get(group_id)
        if entry is None:
            entry = self.manager.groups[group_id] = Group(group_id)
        return entry

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int | None:
        """OffsetFetch v9 with a member (KIP-848): UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH."""
        group = self.groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
        return None

    def get(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        if group is None or self.manager.status(group_id, allow_empty_id=True) is not None:
            return None
        return group

    def listed(self) -> list[ConsumerGroup]:
        return [g for g in self.groups.values() if self.manager.status(g.group_id, allow_empty_id=True) is None]

    def delete(self, group_id: str) -> int | None:
        """DeleteGroups: None if not a consumer group, NON_EMPTY_GROUP if it has members, else
        forgotten (its offsets are deleted with the classic entry by the caller)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        group.deleted = True
        del self.groups[group_id]
        self._persist(group)  # tombstones
        self._written.forget(group_id)
        return ErrorCode.NONE

    def forget_empty(self, group_id: str) -> None:
        """A classic JoinGroup takes over an Empty consumer group of the same id (its records
        get tombstones, so a reloaded partition does not bring it back)."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]
            group.deleted = True
            self._persist(group)
            self._written.forget(group_id)

    def is_active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.state is not ConsumerGroupState.EMPTY

    def drop_unowned(self) -> None:
        """Forget groups whose offsets partition this broker no longer leads."""
        for group_id in list(self.groups):
            if self.manager.status(group_id, allow_empty_id=True) in (ErrorCode.NOT_COORDINATOR,):
                self.unload_one(group_id)

    def unload_one(self, group_id: str) -> None:
        self._written.forget(group_id)
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in group.members:
                self._cancel_timers(group_id, member_id)


def topics_of(image: object) -> dict[str, tuple[object, int]]:
    """``topic name -> (topic id, partition count)`` of a metadata image."""
    return {name: (t.topic_id, len(t.partitions)) for name, t in image.topics.items()}  # type: ignore[attr-defined]
