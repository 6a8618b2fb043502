"""One share group's membership and assignment (KIP-932 "Share group membership"): pure.

Members heartbeat with ShareGroupHeartbeat (76): epoch 0 joins (the member generates its own
id, KIP-1082), -1 leaves, any other epoch must be the member's current one (else
FENCED_MEMBER_EPOCH; an unknown id is UNKNOWN_MEMBER_ID). The group epoch grows with every
membership or subscription change; each member takes the new epoch and its assignment at its next
heartbeat (its current or previous epoch is accepted, for a lost response). Share groups have no
revocation step: partitions are shared (KIP-932).

Assignment (``_target``): every member gets every partition of the topics it subscribes to.
Kafka 4.1's ``simple`` assignor spreads the partitions over the members when there are more
partitions than members; pylog always shares each partition with every subscriber (the records
are still delivered once: the share-partition hands each to one member). docs/compatibility.md.
States as Kafka's ``ShareGroup.ShareGroupState``: Empty (no members), Stable, Dead (deleted).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark_log.wire.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1

TopicsView = Mapping[str, tuple[object, int]]  # topic name -> (topic id, partition count)


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed_topic_names: tuple[str, ...]
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: dict[str, frozenset[int]] = field(default_factory=dict)
    previous_epoch: int = -1  # a heartbeat whose response was lost may repeat it


@dataclass(frozen=True)
class HeartbeatOutcome:
    member_id: str
    member_epoch: int
    assignment: dict[str, frozenset[int]] | None  # None: unchanged since the member's last heartbeat
    left: bool = False


@dataclass
class ShareGroup:
    """One share group (module docstring)."""

    group_id: str
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    deleted: bool = False

    @property
    def state(self) -> ShareGroupState:
        if self.deleted:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        subscribed: tuple[str, ...] | None,
        topics: TopicsView,
        *,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        max_size: int = 200,
    ) -> HeartbeatOutcome:
        """Apply one heartbeat; raises HeartbeatError with Kafka's code for a refused one."""
        if not member_id:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch == LEAVE_EPOCH:
            self.remove(member_id, topics)
            return HeartbeatOutcome(member_id, LEAVE_EPOCH, None, left=True)
        member = self.members.get(member_id)
        if member_epoch == JOIN_EPOCH:
            if subscribed is None and member is None:
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            if member is None and len(self.members) >= max_size:
                raise HeartbeatError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of {max_size}."
                )
        elif member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}."
            )
        elif member_epoch not in (member.member_epoch, member.previous_epoch):
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a smaller member epoch ({member_epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        changed = False
        if member is None:
            member = self.members[member_id] = ShareMember(member_id, 0, subscribed or ())
            changed = True
        elif subscribed is not None and tuple(subscribed) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(subscribed)
            changed = True
        member.rack_id = rack_id
        member.client_id, member.client_host = client_id, client_host
        before = dict(member.assignment)
        if changed or self._assignment_stale(topics):
            self.group_epoch += 1
        if member.member_epoch < self.group_epoch:  # the member catches up with the group
            member.previous_epoch = member.member_epoch
            member.member_epoch = self.group_epoch
            member.assignment = self._target(member, topics)
        send = member_epoch == JOIN_EPOCH or member.assignment != before
        return HeartbeatOutcome(member_id, member.member_epoch, dict(member.assignment) if send else None)

    def _assignment_stale(self, topics: TopicsView) -> bool:
        """A topic appeared, went or grew since the last assignment of an up-to-date member."""
        return any(
            m.assignment != self._target(m, topics) for m in self.members.values() if m.member_epoch == self.group_epoch
        )

    @staticmethod
    def _target(member: ShareMember, topics: TopicsView) -> dict[str, frozenset[int]]:
        return {t: frozenset(range(topics[t][1])) for t in member.subscribed_topic_names if t in topics}

    def remove(self, member_id: str, topics: TopicsView) -> bool:
        """A member left or its session expired; True if it was a member."""
        if self.members.pop(member_id, None) is None:
            return False
        self.group_epoch += 1
        return True

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}
