"""One class per Raft role (Kafka's ``EpochState`` family). Only ``QuorumState`` creates them.

Each role knows its epoch, the leader and vote it implies, whether it may grant a vote (KIP-595
"Vote request handling", steps 3-4) and its own timer. A role object never changes role: a change
of role is a new object made by ``QuorumState``, whose docstring is the transition table.

=============  ========================================================  ==========================
role           who                                                       timer
=============  ========================================================  ==========================
unattached     voter, epoch known, no leader and no vote in it          election timeout
voted          voter that voted for another candidate in this epoch     election timeout
candidate      voter that voted for itself and asks for votes           election timeout, backoff
leader         the elected voter                                        fetch (progress) timeout
follower       voter or observer that knows the leader of its epoch     fetch timeout
resigned       former leader of this epoch that stepped down            election timeout
observer       non-voter that does not know the leader                  (none: fetches voters)
=============  ========================================================  ==========================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from broker.raft.messages import NO_LEADER, NO_VOTE, ReplicaState


class EpochState:
    """Base of the roles: an epoch and the (leader, vote) it implies."""

    name: ClassVar[str] = "?"
    epoch: int

    @property
    def leader_id(self) -> int:
        return NO_LEADER

    @property
    def voted_id(self) -> int:
        return NO_VOTE

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool) -> bool:
        """May this replica grant ``candidate_id`` its vote in ``self.epoch``? (seed: Vote step 3)"""
        return False

    def timer_deadline_ms(self) -> int | None:
        return None


@dataclass(slots=True)
class UnattachedState(EpochState):
    name: ClassVar[str] = "unattached"
    epoch: int
    election_deadline_ms: int

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool) -> bool:
        return log_up_to_date

    def timer_deadline_ms(self) -> int | None:
        return self.election_deadline_ms


@dataclass(slots=True)
class VotedState(EpochState):
    name: ClassVar[str] = "voted"
    epoch: int
    voted_for: int
    election_deadline_ms: int

    @property
    def voted_id(self) -> int:
        return self.voted_for

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool) -> bool:
        # "Grant only if the CandidateId matches the id already voted for."
        return candidate_id == self.voted_for

    def timer_deadline_ms(self) -> int | None:
        return self.election_deadline_ms


@dataclass(slots=True)
class CandidateState(EpochState):
    """A voter that bumped the epoch and voted for itself; counts the votes it receives."""

    name: ClassVar[str] = "candidate"
    epoch: int
    local_id: int
    voters: frozenset[int]
    election_deadline_ms: int
    retries: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until_ms: int | None = None

    def __post_init__(self) -> None:
        self.granted.add(self.local_id)

    @property
    def voted_id(self) -> int:
        return self.local_id

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool) -> bool:
        return candidate_id == self.local_id

    def record_vote(self, voter_id: int, granted: bool) -> None:
        if voter_id not in self.voters:
            return
        if granted:  # a grant is durable on the voter: it outranks an earlier refusal
            self.rejected.discard(voter_id)
            self.granted.add(voter_id)
        elif voter_id not in self.granted:
            self.rejected.add(voter_id)

    def is_vote_granted(self) -> bool:
        return len(self.granted) >= self.majority

    def is_vote_rejected(self) -> bool:
        """A majority can no longer be reached (e.g. the other of two voters said no)."""
        return len(self.voters) - len(self.rejected) < self.majority

    def unrecorded_voters(self) -> list[int]:
        return sorted(self.voters - self.granted - self.rejected)

    @property
    def is_backing_off(self) -> bool:
        return self.backoff_until_ms is not None

    def timer_deadline_ms(self) -> int | None:
        return self.backoff_until_ms if self.backoff_until_ms is not None else self.election_deadline_ms


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica's log (for the high watermark and DescribeQuorum)."""

    replica_id: int
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1

    def describe(self) -> ReplicaState:
        return ReplicaState(self.replica_id, self.end_offset, self.last_fetch_ms, self.last_caught_up_ms)


@dataclass(slots=True)
class LeaderState(EpochState):
    """The leader of ``epoch``: replica progress, endorsements, high-watermark candidate."""

    name: ClassVar[str] = "leader"
    epoch: int
    local_id: int
    voters: frozenset[int]
    epoch_start_offset: int
    start_ms: int
    granting_voters: tuple[int, ...] = ()
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    endorsed: set[int] = field(default_factory=set)
    quorum_fetch_ms: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for voter in sorted(self.voters):
            self.progress[voter] = ReplicaProgress(voter)
            self.quorum_fetch_ms[voter] = self.start_ms
        self.endorsed.add(self.local_id)

    @property
    def leader_id(self) -> int:
        return self.local_id

    @property
    def voted_id(self) -> int:
        return self.local_id

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def set_voters(self, voters: frozenset[int], now_ms: int) -> None:
        """KIP-853: count majorities over ``voters`` from now on (a new voter starts its
        progress-timeout clock now; a removed one is reported as an observer)."""
        self.voters = voters
        for voter in voters:
            self.progress.setdefault(voter, ReplicaProgress(voter))
            self.quorum_fetch_ms.setdefault(voter, now_ms)
        for replica in list(self.quorum_fetch_ms):
            if replica not in voters:
                del self.quorum_fetch_ms[replica]

    def update_local_end_offset(self, end_offset: int, now_ms: int) -> None:
        me = self.progress[self.local_id]
        me.end_offset = end_offset
        me.last_fetch_ms = me.last_caught_up_ms = now_ms
        me.leader_end_at_last_fetch = end_offset

    def record_fetch(self, replica_id: int, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """A validated Fetch from ``replica_id``: its log matches ours below ``fetch_offset``."""
        replica = self.progress.get(replica_id)
        if replica is None:
            replica = self.progress[replica_id] = ReplicaProgress(replica_id)
        # Caught up: at the leader's end now, or at the leader's end as of the previous fetch.
        if fetch_offset >= leader_end_offset:
            replica.last_caught_up_ms = now_ms
        elif replica.leader_end_at_last_fetch >= 0 and fetch_offset >= replica.leader_end_at_last_fetch:
            replica.last_caught_up_ms = replica.last_fetch_ms
        # A duplicated or reordered older request must not move the offset back.
        replica.end_offset = max(replica.end_offset, fetch_offset)
        replica.last_fetch_ms = now_ms
        replica.leader_end_at_last_fetch = leader_end_offset
        if replica_id in self.voters:
            self.quorum_fetch_ms[replica_id] = now_ms
            self.endorsed.add(replica_id)  # a Fetch in this epoch implies the endorsement

    def majority_end_offset(self) -> int:
        """The largest offset below which a majority of voters hold the log (exclusive)."""
        offsets = sorted((max(self.progress[v].end_offset, 0) for v in self.voters), reverse=True)
        return offsets[self.majority - 1]

    def quorum_deadline_ms(self, fetch_timeout_ms: int) -> int | None:
        """When the leader has heard from less than a majority for ``fetch_timeout_ms``."""
        others = sorted((t for v, t in self.quorum_fetch_ms.items() if v != self.local_id), reverse=True)
        needed = self.majority - (1 if self.local_id in self.voters else 0)  # a voting leader counts itself
        if needed <= 0:
            return None
        return others[needed - 1] + fetch_timeout_ms

    def preferred_successors(self) -> tuple[int, ...]:
        """Other voters, most replicated first (KIP-595 EndQuorumEpoch ``PreferredSuccessors``)."""
        others = [v for v in self.voters if v != self.local_id]
        return tuple(sorted(others, key=lambda v: (-self.progress[v].end_offset, v)))

    def unendorsed_voters(self) -> list[int]:
        return sorted(self.voters - self.endorsed)

    def describe_voters(self) -> tuple[ReplicaState, ...]:
        return tuple(self.progress[v].describe() for v in sorted(self.voters))

    def describe_observers(self) -> tuple[ReplicaState, ...]:
        return tuple(p.describe() for r, p in sorted(self.progress.items()) if r not in self.voters)


@dataclass(slots=True)
class FollowerState(EpochState):
    """Knows the leader of ``epoch`` and fetches from it; ``is_voter`` False for an observer."""

    name: ClassVar[str] = "follower"
    epoch: int
    leader: int
    fetch_deadline_ms: int
    is_voter: bool
    voted_for: int = NO_VOTE

    @property
    def leader_id(self) -> int:
        return self.leader

    @property
    def voted_id(self) -> int:
        return self.voted_for

    @property
    def state_name(self) -> str:
        return "follower" if self.is_voter else "observer"

    def timer_deadline_ms(self) -> int | None:
        return self.fetch_deadline_ms


@dataclass(slots=True)
class ResignedState(EpochState):
    """A leader that stepped down in ``epoch`` (graceful shutdown, or restarted as leader)."""

    name: ClassVar[str] = "resigned"
    epoch: int
    local_id: int
    preferred_successors: tuple[int, ...]
    election_deadline_ms: int

    @property
    def leader_id(self) -> int:
        return self.local_id

    @property
    def voted_id(self) -> int:
        return self.local_id

    def timer_deadline_ms(self) -> int | None:
        return self.election_deadline_ms


@dataclass(slots=True)
class ObserverState(EpochState):
    """A non-voter without a known leader: fetches from random voters to find it."""

    name: ClassVar[str] = "observer"
    epoch: int


def state_name(state: EpochState) -> str:
    """The KIP-595 ``current-state`` metric value of a role."""
    if isinstance(state, FollowerState):
        return state.state_name
    return state.name
