"""One KIP-848 consumer group: members, the group epoch, the target assignment and its epoch, and
the decisions of ConsumerGroupHeartbeat (Kafka 4.1 ``GroupMetadataManager.consumerGroupHeartbeat``).

Pure: time comes in as ``now_ms``, the topics as a mapping, randomness as the member id the caller
generated; nothing here does I/O or reads a clock. The driver (``coordinator.py``) owns the timers
and tells the group when a session or a revocation deadline passes.

Epochs (KIP-848 "Group Epoch", "Target Assignment Epoch", "Member Epoch"):

* the **group epoch** goes up when the membership or a subscription or the assignor changes, or
  when the subscribed topics' metadata (ids, partition counts, regex matches) changes;
* the **assignment epoch** is the group epoch the target assignment was computed at; a heartbeat
  that finds ``group_epoch > assignment_epoch`` computes a new target with the group's assignor;
* a **member epoch** reaches the assignment epoch through reconciliation (``reconcile``): a member
  that must revoke partitions stays at its epoch until it reports them revoked, and a partition
  goes to its new owner only once no other member holds it.

Group states (the names ConsumerGroupDescribe and ListGroups report): Empty (no members),
Assigning (group epoch ahead of the assignment epoch; transient here, the target is computed in
the same heartbeat), Reconciling (some member not yet STABLE at the assignment epoch), Stable.

Errors (ConsumerGroupHeartbeat): UNKNOWN_MEMBER_ID for a member this group does not have,
FENCED_MEMBER_EPOCH for an epoch that is not the member's (nor its previous one with owned
partitions it really has: a lost response), UNRELEASED_INSTANCE_ID for a static instance id still
held by a live member, GROUP_MAX_SIZE_REACHED past ``group.consumer.max.size``,
UNSUPPORTED_ASSIGNOR for a ``ServerAssignor`` the broker does not configure,
INVALID_REGULAR_EXPRESSION for a regex RE2 cannot compile, INVALID_REQUEST for malformed joins.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from broker.coordinator.consumer_group.assignors import ASSIGNORS, Assignment
from broker.coordinator.consumer_group.config import ConsumerGroupConfig
from broker.coordinator.consumer_group.reconcile import (
    MemberAssignment,
    MemberState,
    Partitions,
    is_subset,
    normalize,
    reconcile,
)
from broker.coordinator.consumer_group.regex import RegexError, matching_topics
from pyspark_log.wire.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

TopicsView = Mapping[str, tuple[object, int]]  # topic name -> (topic id, partition count)


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class HeartbeatError(Exception):
    """A heartbeat refused with a Kafka error code (and message)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat's fields, topic ids already mapped to names (None: not sent)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ClassicMetadata:
    """A member that uses the classic protocol inside a consumer group (KIP-848 "Upgrade &
    Downgrade"): its JoinGroup session timeout and supported protocols (name, metadata), as
    Kafka's ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata`` keeps them."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol named in its JoinGroup/SyncGroup answers: its first one (Kafka's)."""
        return self.protocols[0][0]


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assignment: MemberAssignment = field(default_factory=MemberAssignment)
    classic: ClassicMetadata | None = None  # set while the member uses the classic protocol

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None


@dataclass(frozen=True)
class HeartbeatOutcome:
    member_id: str
    member_epoch: int
    assignment: Partitions | None  # None: not sent (unchanged)
    session_deadline_ms: int | None  # None: no session (the member left)
    revocation_deadline_ms: int | None  # set while the member must revoke partitions
    fenced: tuple[str, ...] = ()  # member ids removed by this heartbeat (a rejoin's old self)


@dataclass
class ConsumerGroup:
    """See the module docstring; ``heartbeat`` is the one entry for member requests."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: Assignment = field(default_factory=dict)  # member id -> topic -> partitions
    subscription_metadata: dict[str, tuple[object, int]] = field(default_factory=dict)
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # assigned or revoking -> member
    assignor_name: str = ""
    deleted: bool = False

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            a = member.assignment
            if a.state is not MemberState.STABLE or a.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topics(self, topics: TopicsView) -> dict[str, frozenset[str]]:
        """member id -> the existing topics it subscribes to (names and regex matches)."""
        names = frozenset(topics)
        out: dict[str, frozenset[str]] = {}
        for member in self.members.values():
            subs = {t for t in member.subscribed_topic_names if t in names}
            if member.subscribed_topic_regex:
                subs |= matching_topics(member.subscribed_topic_regex, names)
            out[member.member_id] = frozenset(subs)
        return out

    # -- ownership ----------------------------------------------------------------------------

    def _set_assignment(self, member: ConsumerMember, new: MemberAssignment) -> None:
        old = member.assignment
        for parts in (old.assigned, old.pending_revocation):
            for topic, ps in parts.items():
                for p in ps:
                    if self.owners.get((topic, p)) == member.member_id:
                        del self.owners[(topic, p)]
        for parts in (new.assigned, new.pending_revocation):
            for topic, ps in parts.items():
                for p in ps:
                    self.owners[(topic, p)] = member.member_id
        member.assignment = new

    def _owned_elsewhere(self, member_id: str) -> Callable[[str, int], bool]:
        owners = self.owners

        def check(topic: str, partition: int) -> bool:
            owner = owners.get((topic, partition))
            return owner is not None and owner != member_id

        return check

    # -- membership changes -------------------------------------------------------------------

    def remove_member(self, member_id: str) -> bool:
        """Drop a member (left, fenced or timed out): its partitions become free and the group
        epoch goes up. Returns False if it was not a member."""
        member = self.members.pop(member_id, None)
        if member is None:
            return False
        self._set_assignment(member, MemberAssignment())
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self.group_epoch += 1
        return True

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def heartbeat(
        self,
        req: HeartbeatRequest,
        topics: TopicsView,
        config: ConsumerGroupConfig,
        now_ms: int,
        *,
        full_request: bool,
    ) -> HeartbeatOutcome:
        """Apply one heartbeat (validated for shape by the caller); raises ``HeartbeatError``."""
        if req.server_assignor is not None and req.server_assignor not in config.assignors:
            raise HeartbeatError(
                ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported"
            )
        if req.subscribed_topic_regex is not None:
            try:
                matching_topics(req.subscribed_topic_regex, frozenset())
            except RegexError as exc:
                raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)) from None

        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req, now_ms, config)

        fenced: list[str] = []
        bump = False
        member = self.members.get(req.member_id)
        if req.member_epoch == JOIN_EPOCH:
            if req.instance_id is not None:
                holder_id = self.static_members.get(req.instance_id)
                holder = self.members.get(holder_id) if holder_id is not None else None
                if holder is not None and holder.member_id != req.member_id:
                    if holder.member_epoch != STATIC_LEAVE_EPOCH:
                        raise HeartbeatError(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member with instance id {req.instance_id} is not released yet",
                        )
                    # a static member back under a new member id takes over its assignment
                    del self.members[holder.member_id]
                    fenced.append(holder.member_id)
                    self.target[req.member_id] = self.target.pop(holder.member_id, {})
                    restored = replace(
                        holder.assignment,
                        member_epoch=holder.assignment.previous_member_epoch,
                    )
                    holder.member_id = req.member_id
                    holder.assignment = MemberAssignment()
                    self.members[req.member_id] = holder
                    self._set_assignment(holder, restored)
                    self.static_members[req.instance_id] = req.member_id
                    member = holder
            if member is not None and not fenced and member.member_epoch == STATIC_LEAVE_EPOCH:
                # a static member back under the same member id: its assignment was kept for it
                self._set_assignment(
                    member, replace(member.assignment, member_epoch=member.assignment.previous_member_epoch)
                )
            elif member is not None and not fenced:
                # a known member rejoining has lost its state: it owns nothing any more
                self._set_assignment(member, MemberAssignment())
                bump = True
            if member is None:
                if len(self.members) >= config.max_size:
                    raise HeartbeatError(
                        ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The consumer group has reached its maximum capacity of {config.max_size} members.",
                    )
                member = ConsumerMember(req.member_id)
                self.members[req.member_id] = member
                if req.instance_id is not None:
                    self.static_members[req.instance_id] = req.member_id
                bump = True
        else:
            if member is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {self.group_id}."
                )
            self._check_epoch(member, req)

        # the member's fields (a null field did not change)
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                bump = True
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                bump = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            bump = True

        previous = member.assignment
        nxt = self._update_and_reconcile(member, bump, topics, config, req.owned)
        # sent on a join, a full request (a client after an error), a change, or when the member
        # reports owning something else than it should (it missed a response)
        differs = req.owned is not None and normalize(req.owned) != nxt.assigned
        send = req.member_epoch == JOIN_EPOCH or full_request or nxt.assigned != previous.assigned or differs
        revoking = nxt.state is MemberState.UNREVOKED_PARTITIONS
        revocation = now_ms + member.rebalance_timeout_ms if revoking else None
        return HeartbeatOutcome(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            assignment=dict(nxt.assigned) if send else None,
            session_deadline_ms=now_ms + config.session_timeout_ms,
            revocation_deadline_ms=revocation,
            fenced=tuple(fenced),
        )

    def _update_and_reconcile(
        self,
        member: ConsumerMember,
        bump: bool,
        topics: TopicsView,
        config: ConsumerGroupConfig,
        owned: Partitions | None,
    ) -> MemberAssignment:
        """The common tail of a heartbeat and of a classic JoinGroup: refresh the subscribed
        topics' metadata, bump the group epoch, compute a new target when the group epoch moved
        past it, and take one reconciliation step for ``member``; returns its new assignment."""
        # the subscribed topics' metadata: a new match, a deleted topic or more partitions
        subscriptions = self.subscribed_topics(topics)
        wanted = frozenset().union(*subscriptions.values()) if subscriptions else frozenset()
        metadata = {t: topics[t] for t in sorted(wanted)}
        if metadata != self.subscription_metadata:
            self.subscription_metadata = metadata
            bump = True
        if bump:
            self.group_epoch += 1

        if self.group_epoch > self.assignment_epoch:
            self._compute_target(subscriptions, config)

        previous = member.assignment
        target = self.target.get(member.member_id, {})
        nxt = reconcile(previous, self.assignment_epoch, target, self._owned_elsewhere(member.member_id), owned)
        if nxt != previous:
            self._set_assignment(member, nxt)
        return nxt

    # -- classic members (KIP-848 "Upgrade & Downgrade") ----------------------------------------

    def supports_classic_protocols(self, protocol_type: str, names: set[str], member_id: str) -> bool:
        """Kafka ``ConsumerGroup.supportsClassicProtocols``: a classic member may join if its
        protocol type is ``consumer`` and it shares a protocol with every other classic member
        (any protocol when there is none)."""
        if protocol_type != "consumer" or not names:
            return False
        others = [m.classic for m in self.members.values() if m.classic is not None and m.member_id != member_id]
        return not others or any(all(n in {p for p, _ in c.protocols} for c in others) for n in names)

    def classic_join(  # noqa: PLR0917 - the fields of JoinGroup
        self,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        classic: ClassicMetadata,
        subscribed: tuple[str, ...],
        owned: Partitions,
        rack_id: str | None,
        topics: TopicsView,
        config: ConsumerGroupConfig,
    ) -> tuple[ConsumerMember, tuple[str, ...]]:
        """A classic member's JoinGroup answered by this consumer group (Kafka
        ``classicGroupJoinToConsumerGroup``): the member is created or updated from the
        subscription of its first protocol, the group epoch goes up if it is new or its topics
        changed, and it reconciles with ``owned`` (the partitions its subscription says it still
        owns; an eager member owns none when it rejoins). Its member epoch is the generation of
        the JoinGroup answer. A static instance id held by another member id replaces that member.
        Returns the member and the member ids removed. Raises ``HeartbeatError``."""
        fenced: list[str] = []
        member = self.members.get(member_id)
        bump = False
        if instance_id is not None:
            holder = self.static_members.get(instance_id)
            if holder is not None and holder != member_id:
                self.remove_member(holder)
                fenced.append(holder)
        if member is None:
            if len(self.members) >= config.max_size:
                raise HeartbeatError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of {config.max_size} members.",
                )
            member = self.members[member_id] = ConsumerMember(member_id)
            bump = True
        if instance_id is not None:
            member.instance_id = instance_id
            self.static_members[instance_id] = member_id
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id, member.client_host, member.classic = client_id, client_host, classic
        names = tuple(sorted(set(subscribed)))
        if names != member.subscribed_topic_names or member.subscribed_topic_regex is not None:
            member.subscribed_topic_names, member.subscribed_topic_regex = names, None
            bump = True
        self._update_and_reconcile(member, bump, topics, config, owned)
        return member, tuple(fenced)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Kafka ``waitingOnUnreleasedPartition``: some partition of its target is still held by
        another member."""
        if member.assignment.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        held = member.assignment.assigned
        for topic, parts in self.target.get(member.member_id, {}).items():
            for p in parts:
                owner = self.owners.get((topic, p))
                if p not in held.get(topic, frozenset()) and owner not in (None, member.member_id):
                    return True
        return False

    def classic_must_rejoin(self, member: ConsumerMember) -> bool:
        """What a classic member's Heartbeat answers with REBALANCE_IN_PROGRESS (Kafka
        ``classicGroupHeartbeatToConsumerGroup``): the group epoch moved past its epoch, it must
        revoke partitions, or partitions it waits for are free now."""
        state = member.assignment.state
        return (
            member.member_epoch < self.group_epoch
            or state is MemberState.UNREVOKED_PARTITIONS
            or (state is MemberState.UNRELEASED_PARTITIONS and not self.waiting_on_unreleased(member))
        )

    def all_classic_except(self, member_id: str) -> bool:
        """Kafka ``allMembersUseClassicProtocolExcept``: ``member_id`` uses the consumer protocol
        and every other member the classic one."""
        member = self.members.get(member_id)
        if member is None or member.classic is not None:
            return False
        return all(m.classic is not None for mid, m in self.members.items() if mid != member_id)

    def _check_epoch(self, member: ConsumerMember, req: HeartbeatRequest) -> None:
        """Kafka ``throwIfConsumerGroupMemberEpochIsInvalid``: a newer epoch than the member's is
        fenced; an older one is accepted only if it is the previous epoch and the member reports
        owning a subset of what it has (it missed the response that bumped its epoch)."""
        received, current = req.member_epoch, member.member_epoch
        if received > current:
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({received}) than the one known by the "
                f"group coordinator ({current}). The member must abandon all its partitions and rejoin.",
            )
        if received < current:
            a = member.assignment
            if received == a.previous_member_epoch and req.owned is not None and is_subset(req.owned, a.assigned):
                return
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
                f"group coordinator ({current}). The member must abandon all its partitions and rejoin.",
            )

    def _leave(self, req: HeartbeatRequest, now_ms: int, config: ConsumerGroupConfig) -> HeartbeatOutcome:
        member = self.members.get(req.member_id)
        if member is None and req.instance_id is not None:
            held = self.static_members.get(req.instance_id)
            member = self.members.get(held) if held is not None else None
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {self.group_id}."
            )
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # KIP-848 static member leaving temporarily: keep its assignment until its session ends
            kept = member.assignment
            member.assignment = replace(kept, member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=kept.member_epoch)
            return HeartbeatOutcome(
                member.member_id, STATIC_LEAVE_EPOCH, None, now_ms + config.session_timeout_ms, None
            )
        self.remove_member(member.member_id)
        return HeartbeatOutcome(member.member_id, LEAVE_EPOCH, None, None, None)

    def _compute_target(self, subscriptions: Mapping[str, frozenset[str]], config: ConsumerGroupConfig) -> None:
        """A new target assignment at the group epoch, with the assignor most members name
        (ties: the broker's order), or the broker's default."""
        name = self.assignor_name = self.choose_assignor(config)
        counts = {t: count for t, (_, count) in self.subscription_metadata.items()}
        self.target = ASSIGNORS[name](subscriptions, counts, self.target)
        self.assignment_epoch = self.group_epoch

    def choose_assignor(self, config: ConsumerGroupConfig) -> str:
        """The assignor most members name in ``ServerAssignor`` (ties: the broker's order), or
        the broker's default (the first of ``group.consumer.assignors``)."""
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor is not None:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return config.default_assignor
        return max(config.assignors, key=lambda a: (votes.get(a, 0), -config.assignors.index(a)))

    def expire_member(self, member_id: str) -> bool:
        """A session or revocation deadline passed: the member is fenced (KIP-848 "Member
        Expiration", "Rebalance Timeout")."""
        return self.remove_member(member_id)

    def describe_target(self, member_id: str) -> Partitions:
        return normalize(self.target.get(member_id, {}))
