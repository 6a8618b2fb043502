"""One consumer group's membership state: the classic group protocol's state machine, members,
generation, protocol selection and leader (Kafka ``GroupMetadata`` / ``MemberMetadata``).

Pure: no clock reads, no I/O, no timers. The coordinator (``coordinator.py``) drives it and owns
the timers; a member's pending JoinGroup or SyncGroup is a callback stored on the member and
completed exactly once.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.coordinator.group.records import CommittedOffset, StoredGroup, StoredMember
from broker.coordinator.group.txn_offsets import PendingOffsets
from pyspark_log.wire.consumer_protocol import PROTOCOL_TYPE, decode_subscription
from pyspark_log.wire.errors import DecodeError, ErrorCode

TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    """A classic group's states; the values are the names DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.DEAD: frozenset(_S),
}


class IllegalStateTransition(RuntimeError):
    """A transition the table of ``Group.transition_to`` does not allow: a coordinator bug."""


@dataclass(frozen=True, slots=True)
class UnreplicatedOffset:
    """A committed offset appended to ``__consumer_offsets`` that OffsetFetch may answer once the
    partition's high watermark passes ``needs``: the commit's own record, or for a transactional
    commit its COMMIT marker. ``position`` is the commit record's offset, which orders it against
    the partition's other commits (the later record wins, as on a reload)."""

    needs: int
    position: int
    value: CommittedOffset


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata)


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(eq=False)
class Member:
    """One member; ``join_callback``/``sync_callback`` are set while its JoinGroup/SyncGroup waits."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None
    is_new: bool = False  # joined but no JoinGroup response yet: expires after the new-member timeout

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]


@dataclass(eq=False)
class Group:
    """A group and its one owner of state transitions (``transition_to``)."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp_ms: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)  # member ids handed out, not joined yet
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_sync_members: set[str] = field(default_factory=set)
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    offset_positions: dict[TopicPartition, int] = field(default_factory=dict)  # log offset of each commit
    # commits appended but not yet on the offsets partition's ISR (GroupManager.cache_replicated)
    unreplicated_offsets: dict[TopicPartition, list[UnreplicatedOffset]] = field(default_factory=dict)
    pending_txn_offsets: PendingOffsets = field(default_factory=PendingOffsets)  # TxnOffsetCommit, unmarked
    subscribed_topics: frozenset[str] | None = None  # None: unknown (not a consumer group)
    new_member_added: bool = False  # a member joined during the initial delay (extends it)
    initial_join: bool = False  # the pending join timer is the initial delay (cannot end early)
    _awaiting_join: int = 0
    _protocol_votes: dict[str, int] = field(default_factory=dict)  # protocol -> members supporting it

    # -- the state machine -------------------------------------------------------------------

    def transition_to(self, target: GroupState) -> None:
        """Move to ``target``; raise ``IllegalStateTransition`` unless the table allows it::

            from \\ to            Empty  PreparingRebalance  CompletingRebalance  Stable  Dead
            Empty                   -          yes                  -              -     yes
            PreparingRebalance     yes          -                  yes             -     yes
            CompletingRebalance     -          yes                  -             yes    yes
            Stable                  -          yes                  -              -     yes
            Dead                    -           -                   -              -     yes

        Empty → PreparingRebalance: a member joins. PreparingRebalance → CompletingRebalance: every
        member rejoined (or the rebalance timeout passed) and a leader was chosen;
        → Empty: no member is left. CompletingRebalance → Stable: the leader's SyncGroup
        assignment was stored; → PreparingRebalance: a member joins, leaves, changes or misses
        its SyncGroup. Stable → PreparingRebalance: a member joins with new metadata, the leader
        rejoins, or a member leaves or expires. Any → Dead: the group is deleted, its offsets
        expire, or its partition moves away.
        """
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(f"group {self.group_id!r}: {self.state.value} -> {target.value} is illegal")
        self.state = target

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # -- members -----------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> Member:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def num_awaiting_join(self) -> int:
        return self._awaiting_join

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def add(self, member: Member, join_callback: JoinCallback | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type, "protocol type checked by supports_protocols"
        self.members[member.member_id] = member
        for name in member.protocol_names():
            self._protocol_votes[name] = self._protocol_votes.get(name, 0) + 1
        if member.is_static:
            assert member.group_instance_id is not None
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)
        if join_callback is not None:
            self._set_join_callback(member, join_callback)

    def remove(self, member_id: str) -> None:
        """Forget a member (or a pending member id); the leader moves to another member."""
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return
        for name in member.protocol_names():
            self._protocol_votes[name] -= 1
            if not self._protocol_votes[name]:
                del self._protocol_votes[name]
        if member.is_awaiting_join:
            self._awaiting_join -= 1
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def update_member(
        self, member: Member, protocols: list[tuple[str, bytes]], join_callback: JoinCallback | None
    ) -> None:
        """New protocols for a member and its pending JoinGroup (an earlier pending one is told
        to rejoin: REBALANCE_IN_PROGRESS). ``join_callback`` None drops the pending JoinGroup
        unanswered (undoing an update whose answer is sent by the caller)."""
        for name in member.protocol_names():
            self._protocol_votes[name] -= 1
            if not self._protocol_votes[name]:
                del self._protocol_votes[name]
        member.protocols = [(n, bytes(m)) for n, m in protocols]
        for name in member.protocol_names():
            self._protocol_votes[name] = self._protocol_votes.get(name, 0) + 1
        if join_callback is None:
            if member.join_callback is not None:
                member.join_callback = None
                self._awaiting_join -= 1
            return
        if member.join_callback is not None:
            self.invoke_join(member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        self._set_join_callback(member, join_callback)

    def _set_join_callback(self, member: Member, callback: JoinCallback) -> None:
        if member.join_callback is None:
            self._awaiting_join += 1
        member.join_callback = callback

    def invoke_join(self, member: Member, result: JoinResult) -> bool:
        """Answer the member's pending JoinGroup, if any; True if there was one."""
        callback = member.join_callback
        if callback is None:
            return False
        member.join_callback = None
        self._awaiting_join -= 1
        member.is_new = False
        callback(result)
        return True

    def invoke_sync(self, member: Member, result: SyncResult) -> bool:
        callback = member.sync_callback
        if callback is None:
            return False
        member.sync_callback = None
        callback(result)
        return True

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Give a static member a new member id (KIP-345); the old id's pending requests are
        answered FENCED_INSTANCE_ID."""
        member = self.members.pop(old_member_id)
        if member.join_callback is not None:
            self.invoke_join(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        self.invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self._awaiting_join and not self.pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ---------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """A first member needs a protocol type and protocols; later ones the group's type and
        at least one protocol every member supports."""
        names = list(protocols)
        if not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self._protocol_votes.get(n, 0) == len(self.members) for n in names
        )

    def candidate_protocols(self) -> list[str]:
        return [name for name, count in self._protocol_votes.items() if count == len(self.members)]

    def select_protocol(self) -> str:
        """The protocol every member supports that most members list first among those
        candidates; ties go to the leader's preference order (Kafka leaves ties unspecified)."""
        candidates = set(self.candidate_protocols())
        if not candidates:
            raise IllegalStateTransition(f"group {self.group_id!r} has no protocol every member supports")
        votes: dict[str, int] = dict.fromkeys(candidates, 0)
        for member in self.members.values():
            choice = next(n for n in member.protocol_names() if n in candidates)
            votes[choice] += 1
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(leader.protocol_names())}
        return max(votes, key=lambda n: (votes[n], -order.get(n, len(order))))

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.is_awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.is_awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def init_next_generation(self, now_ms: int) -> None:
        """Start the next generation: CompletingRebalance with members, Empty without."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.current_state_timestamp_ms = now_ms
        self.pending_sync_members.clear()

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        assert self.protocol_name is not None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
        except (DecodeError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """What the leader's JoinGroup response lists: each member's metadata of the chosen protocol."""
        assert self.protocol_name is not None
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values())

    # -- persistence -------------------------------------------------------------------------

    def to_stored(self, assignment: dict[str, bytes]) -> StoredGroup:
        protocol = self.protocol_name
        members = tuple(
            StoredMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol) if protocol is not None else b"",
                assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        )
        return StoredGroup(
            self.protocol_type or "",
            self.generation_id,
            protocol,
            self.leader_id,
            self.current_state_timestamp_ms,
            members,
        )

    @classmethod
    def from_stored(cls, group_id: str, stored: StoredGroup) -> Group:
        """A group as loaded from its last metadata record: Stable with members, else Empty."""
        group = cls(
            group_id, generation_id=stored.generation, current_state_timestamp_ms=stored.current_state_timestamp_ms
        )
        group.protocol_type = stored.protocol_type or None
        group.protocol_name = stored.protocol
        for sm in stored.members:
            member = Member(
                sm.member_id,
                sm.group_instance_id,
                sm.client_id,
                sm.client_host,
                sm.rebalance_timeout_ms,
                sm.session_timeout_ms,
                stored.protocol_type,
                [(stored.protocol or "", sm.subscription)],
                sm.assignment,
            )
            group.add(member)
        group.leader_id = stored.leader if stored.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed_topics = group._compute_subscribed_topics()
        return group
