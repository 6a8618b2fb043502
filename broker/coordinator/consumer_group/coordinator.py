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
from collections.abc import Callable
from dataclasses import dataclass

from broker.coordinator.consumer_group.config import ConsumerGroupConfig
from broker.coordinator.consumer_group.group import (
    JOIN_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerGroupState,
    HeartbeatError,
    HeartbeatOutcome,
    HeartbeatRequest,
    TopicsView,
)
from broker.coordinator.consumer_group.records import group_records, replay
from broker.coordinator.group.group import Group, GroupState
from broker.coordinator.group.manager import GroupManager
from broker.coordinator.group.records import CommittedOffset
from broker.coordinator.group.store import StoreError
from pyspark_log.wire.errors import DecodeError, ErrorCode

log = logging.getLogger(__name__)


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
        self._written: dict[str, dict[bytes, bytes]] = {}  # group -> its records as last written
        manager.on_records_loaded = self.load
        manager.live_subscriptions = self.live_subscriptions

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------

    def heartbeat(self, group_id: str, req: HeartbeatRequest, topics: TopicsView, version: int) -> HeartbeatAnswer:
        error = self.manager.status(group_id)
        if error is not None:
            return HeartbeatAnswer(error)
        created = group_id not in self.groups
        try:
            req = self._validate(group_id, req, version)
            group = self._group_for(group_id, req)
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
        error = self._persist(group)
        if error is not None:
            return HeartbeatAnswer(error)
        self._after(group, outcome)
        return HeartbeatAnswer(
            ErrorCode.NONE,
            member_id=outcome.member_id,
            member_epoch=outcome.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=outcome.assignment,
        )

    def _group_for(self, group_id: str, req: HeartbeatRequest) -> ConsumerGroup:
        """The group, created by a join; an Empty classic group of the same id is taken over."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if req.member_epoch != JOIN_EPOCH:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group_id}."
            )
        classic = self.manager.groups.get(group_id)
        if classic is not None and not classic.is_(GroupState.EMPTY) and not classic.is_(GroupState.DEAD):
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

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
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.expire_member(member_id):
            log.info("consumer group %s: member %s fenced (%s timeout)", group_id, member_id, why)
            self._persist(group)
        self.manager.timers.cancel(("cg-session", group_id, member_id))
        self.manager.timers.cancel(("cg-revoke", group_id, member_id))

    # -- offsets, admin and ownership -----------------------------------------------------------

    # -- persistence (Kafka's consumer group records in __consumer_offsets) -----------------------

    def _persist(self, group: ConsumerGroup) -> int | None:
        """Append what changed in the group's records (tombstones for what is gone) before the
        member hears back; None, or the error code of a failed append (the state stays in memory
        and is written with the next change)."""
        written = self._written.get(group.group_id, {})
        current = {} if group.deleted else group_records(group, self.topics)
        entries: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in current.items() if written.get(k) != v]
        entries += [(k, None) for k in written if k not in current]
        if not entries:
            return None
        try:
            self.manager._append(group.group_id, entries)
        except StoreError as exc:
            log.warning("writing consumer group %s failed: %s", group.group_id, exc)
            return exc.code
        self._written[group.group_id] = current
        return None

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
            self._written[group_id] = group_records(group, self.topics)
            for member_id in group.members:
                deadline = now + self.config.session_timeout_ms
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

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int, version: int) -> int | None:
        """Kafka ``ConsumerGroup.validateOffsetCommit``: None if ``group_id`` is not a consumer group
        here or the commit may go on, else the error: an epoch below 0 without a member id is
        a standalone/admin commit, allowed only while the group has no members; otherwise the
        member must exist (UNKNOWN_MEMBER_ID), commit with OffsetCommit v9+ (UNSUPPORTED_VERSION)
        and name its current epoch (STALE_MEMBER_EPOCH)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not member_id:
            return None if not group.members else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def commit_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> dict[tuple[str, int], int]:
        """Store a member's commit in the group's offsets entry (created on first use)."""
        entry = self.manager.groups.get(group_id)
        if entry is None:
            entry = self.manager.groups[group_id] = Group(group_id)
        return self.manager.store_offsets(entry, offsets)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int | None:
        """OffsetFetch v9 with a member (KIP-848): UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH."""
        group = self.groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
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
        self._written.pop(group_id, None)
        return ErrorCode.NONE

    def forget_empty(self, group_id: str) -> None:
        """A classic JoinGroup takes over an Empty consumer group of the same id."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]

    def is_active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.state is not ConsumerGroupState.EMPTY

    def drop_unowned(self) -> None:
        """Forget groups whose offsets partition this broker no longer leads."""
        for group_id in list(self.groups):
            if self.manager.status(group_id, allow_empty_id=True) in (ErrorCode.NOT_COORDINATOR,):
                self.unload_one(group_id)

    def unload_one(self, group_id: str) -> None:
        self._written.pop(group_id, None)
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in group.members:
                self.manager.timers.cancel(("cg-session", group_id, member_id))
                self.manager.timers.cancel(("cg-revoke", group_id, member_id))


def topics_of(image: object) -> dict[str, tuple[object, int]]:
    """``topic name -> (topic id, partition count)`` of a metadata image."""
    return {name: (t.topic_id, len(t.partitions)) for name, t in image.topics.items()}  # type: ignore[attr-defined]
