"""``QuorumState``: the one owner of Raft role transitions and of the quorum-state file contents.

Mirrors Kafka's ``QuorumState.durableTransitionTo``: every transition first emits a
``PersistQuorumState`` effect (to be made durable before anything of the same step is sent, see
``effects``) and only then installs the new role object. Illegal transitions raise
``IllegalTransitionError``; they are bugs, not operating errors.
"""

from __future__ import annotations

import random

from broker.raft.config import RaftConfig
from broker.raft.effects import EffectBuffer, PersistQuorumState, QuorumStateData
from broker.raft.log import OffsetAndEpoch
from broker.raft.messages import NO_LEADER, NO_VOTE
from broker.raft.roles import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ObserverState,
    ResignedState,
    UnattachedState,
    VotedState,
)


class IllegalTransitionError(RuntimeError):
    """A role transition the table of ``QuorumState`` does not allow."""


class QuorumState:
    """Owner of the current role (``self.state``), the epoch, the vote and the high watermark.

    Transition table (``e`` is the current epoch, ``e'`` the target epoch; ``-`` = illegal)::

        from \\ to      unattached voted   candidate leader  follower resigned observer
        unattached(e)  e'>e       e'>=e   e+1       -       e'>=e    -        -
        voted(e)       e'>e       e'>e    e+1       -       e'>=e    -        -
        candidate(e)   e'>e       e'>e    e+1       e  (1)  e'>=e    -        -
        leader(e)      e'>e       e'>e    e+1 (2)   -       e'>e     e        -
        follower(e)    e'>e       e'>e    e+1 (3)   -       e'>e (4) -        e'>=e (5)
        resigned(e)    e'>e       e'>e    e+1       -       e'>e     -        -
        observer(e)    -          -       -         -       e'>=e    -        e'>e

    (1) only with a majority of granted votes. (2) the zombie-leader rule: no Fetch from a majority
    within ``quorum.fetch.timeout.ms``. (3) fetch timeout or EndQuorumEpoch. (4) a follower of epoch
    ``e`` never switches to another leader of the same epoch: two leaders in one epoch raise.
    (5) observers only. Voters never become observers; observers (non-voters) only ever are
    ``observer`` or ``follower``. Voted(e) for X never becomes voted(e) for Y.

    Quorum-state file mapping: unattached/observer -> (leader -1, vote -1); voted -> (-1, X);
    candidate -> (-1, self); leader/resigned -> (self, self); follower -> (L, vote kept if same
    epoch). ``applied_offset`` is the high watermark at the time of the write.
    """

    def __init__(
        self,
        config: RaftConfig,
        *,
        rng: random.Random,
        effects: EffectBuffer,
        stored: QuorumStateData | None,
        log_end: OffsetAndEpoch,
        now_ms: int,
        voters: frozenset[int] | None = None,
    ) -> None:
        self.config = config
        self.local_id = config.node_id
        self.voters = config.voters if voters is None else voters  # KIP-853: the set in effect in the log
        self.is_voter = self.local_id in self.voters
        self._rng = rng
        self._effects = effects
        self.high_watermark = 0
        self.needs_initial_write = stored is None
        if stored is None:
            # No quorum-state file but a log or snapshot (KIP-630 restore): start unattached in
            # the log's last epoch, as Kafka's QuorumState.initialize does.
            stored = QuorumStateData(NO_LEADER, log_end.epoch, NO_VOTE, 0, tuple(sorted(self.voters)))
        if stored.leader_epoch < 0:
            raise ValueError(f"quorum-state epoch {stored.leader_epoch} is negative")
        if log_end.epoch > stored.leader_epoch:
            raise ValueError(f"log has epoch {log_end.epoch} beyond the quorum-state epoch {stored.leader_epoch}")
        self.high_watermark = min(max(stored.applied_offset, 0), log_end.offset)
        self.state: EpochState = self._restore(stored, now_ms)

    # -- restore ---------------------------------------------------------------------------------
    def _restore(self, stored: QuorumStateData, now_ms: int) -> EpochState:
        epoch = stored.leader_epoch
        if not self.is_voter:
            if stored.leader_id not in (NO_LEADER, self.local_id):
                return FollowerState(epoch, stored.leader_id, now_ms + self.config.fetch_timeout_ms, False)
            return ObserverState(epoch)
        if stored.leader_id == self.local_id:
            # A restarted leader cannot resume: it resigns and waits for an election.
            return ResignedState(epoch, self.local_id, (), now_ms + self.random_election_timeout_ms())
        if stored.leader_id != NO_LEADER:
            return FollowerState(epoch, stored.leader_id, now_ms + self.config.fetch_timeout_ms, True, stored.voted_id)
        if stored.voted_id == self.local_id:
            return CandidateState(
                epoch, self.local_id, self.voters, now_ms + self.random_election_timeout_ms(), retries=1
            )
        if stored.voted_id != NO_VOTE:
            return VotedState(epoch, stored.voted_id, now_ms + self.random_election_timeout_ms())
        return UnattachedState(epoch, now_ms + self.random_election_timeout_ms())

    def initialize(self) -> None:
        """Write the bootstrap quorum state (epoch 0) when there was no file."""
        if self.needs_initial_write:
            self.needs_initial_write = False
            self._persist(self.state)

    # -- queries ---------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def voted_id(self) -> int:
        return self.state.voted_id

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def is_voter_id(self, replica_id: int) -> bool:
        return replica_id in self.voters

    def snapshot(self) -> QuorumStateData:
        """The quorum-state file contents implied by the current role."""
        return QuorumStateData(
            self.leader_id, self.epoch, self.voted_id, self.high_watermark, tuple(sorted(self.voters))
        )

    # -- randomness ------------------------------------------------------------------------------
    def random_election_timeout_ms(self) -> int:
        """``quorum.election.timeout.ms`` plus up to as much random jitter (as Kafka does)."""
        timeout = self.config.election_timeout_ms
        return timeout + self._rng.randrange(timeout)

    def random_election_backoff_ms(self) -> int:
        """KIP-595: a new election is delayed by a random time bounded by election.backoff.max.ms."""
        return self._rng.randint(1, self.config.election_backoff_max_ms)

    # -- high watermark ----------------------------------------------------------------------------
    def update_high_watermark(self, high_watermark: int) -> bool:
        """Raise the high watermark; it never goes down. True if it moved."""
        if high_watermark <= self.high_watermark:
            return False
        self.high_watermark = high_watermark
        return True

    # -- transitions -------------------------------------------------------------------------------
    def _persist(self, new_state: EpochState) -> None:
        self.state = new_state
        self._effects.persist(PersistQuorumState(self.snapshot()))

    def _illegal(self, target: str, epoch: int) -> IllegalTransitionError:
        return IllegalTransitionError(
            f"replica {self.local_id}: {self.state.name}(epoch {self.epoch}) -> {target}(epoch {epoch})"
        )

    def _require_voter(self, target: str, epoch: int) -> None:
        if not self.is_voter:
            raise self._illegal(target, epoch)

    def transition_to_unattached(self, epoch: int, now_ms: int) -> None:
        self._require_voter("unattached", epoch)
        if epoch <= self.epoch:
            raise self._illegal("unattached", epoch)
        state = self.state
        if isinstance(state, UnattachedState | VotedState | CandidateState):
            # Keep the running election timer: otherwise a candidate that can never win (its log
            # is behind) would, by bumping the epoch again and again, keep postponing the
            # elections of the replicas that could.
            deadline = state.timer_deadline_ms()
            assert deadline is not None
        else:
            deadline = now_ms + self.random_election_timeout_ms()
        self._persist(UnattachedState(epoch, deadline))

    def transition_to_voted(self, epoch: int, candidate_id: int, now_ms: int) -> None:
        self._require_voter("voted", epoch)
        same_epoch_ok = isinstance(self.state, UnattachedState)
        if epoch < self.epoch or (epoch == self.epoch and not same_epoch_ok):
            raise self._illegal("voted", epoch)
        if candidate_id == self.local_id or candidate_id not in self.voters:
            raise self._illegal(f"voted-for-{candidate_id}", epoch)
        self._persist(VotedState(epoch, candidate_id, now_ms + self.random_election_timeout_ms()))

    def transition_to_candidate(self, now_ms: int) -> None:
        """Bump the epoch and vote for ourselves (persisted before any VoteRequest is sent)."""
        self._require_voter("candidate", self.epoch + 1)
        if isinstance(self.state, ObserverState):
            raise self._illegal("candidate", self.epoch + 1)
        retries = self.state.retries + 1 if isinstance(self.state, CandidateState) else 1
        self._persist(
            CandidateState(
                self.epoch + 1,
                self.local_id,
                self.voters,
                now_ms + self.random_election_timeout_ms(),
                retries,
            )
        )

    def transition_to_leader(self, epoch_start_offset: int, now_ms: int) -> LeaderState:
        state = self.state
        if not isinstance(state, CandidateState) or not state.is_vote_granted():
            raise self._illegal("leader", self.epoch)
        leader = LeaderState(
            self.epoch,
            self.local_id,
            self.voters,
            epoch_start_offset,
            now_ms,
            granting_voters=tuple(sorted(state.granted)),
        )
        self._persist(leader)
        return leader

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        if leader_id in (self.local_id, NO_LEADER):
            raise self._illegal(f"follower-of-{leader_id}", epoch)
        state = self.state
        if epoch < self.epoch:
            raise self._illegal("follower", epoch)
        if epoch == self.epoch and isinstance(state, FollowerState | LeaderState | ResignedState):
            # Same epoch, already a leader known: switching would mean two leaders in one epoch.
            raise self._illegal(f"follower-of-{leader_id}", epoch)
        voted = state.voted_id if epoch == self.epoch else NO_VOTE
        deadline = now_ms + self.config.fetch_timeout_ms
        self._persist(FollowerState(epoch, leader_id, deadline, self.is_voter, voted))

    def transition_to_resigned(self, preferred_successors: tuple[int, ...], now_ms: int) -> None:
        if not isinstance(self.state, LeaderState):
            raise self._illegal("resigned", self.epoch)
        self._persist(
            ResignedState(self.epoch, self.local_id, preferred_successors, now_ms + self.random_election_timeout_ms())
        )

    def transition_to_observer(self, epoch: int) -> None:
        """A non-voter loses (or never had) the leader of ``epoch``."""
        if self.is_voter:
            raise self._illegal("observer", epoch)
        if epoch < self.epoch or (epoch == self.epoch and isinstance(self.state, ObserverState)):
            raise self._illegal("observer", epoch)
        self._persist(ObserverState(epoch))

    def update_voters(self, voters: frozenset[int], now_ms: int) -> None:
        """KIP-853: a new voter set took effect (a ``VotersRecord`` was appended or truncated away).

        The role keeps its epoch; only its voter/observer nature changes, and the new set is
        persisted with the quorum state: a follower becomes an observer-follower or the reverse;
        a non-voter without a leader becomes ``observer``, an observer that became a voter becomes
        ``unattached`` (it may then stand for election); a leader starts counting the new set for
        its majority (a leader removed from the set keeps leading until the change is committed,
        then resigns, see ``RaftCore``). A candidate or a voted replica keeps its vote."""
        if voters == self.voters:
            return
        if not voters:
            raise IllegalTransitionError("an empty voter set")
        self.voters = voters
        self.is_voter = self.local_id in voters
        state = self.state
        if isinstance(state, LeaderState):
            state.set_voters(voters, now_ms)
        elif isinstance(state, CandidateState):
            state.voters = voters
            state.granted &= voters
            state.rejected &= voters
        elif isinstance(state, FollowerState):
            state.is_voter = self.is_voter
        elif isinstance(state, ObserverState) and self.is_voter:
            self._persist(UnattachedState(state.epoch, now_ms + self.random_election_timeout_ms()))
            return
        elif isinstance(state, UnattachedState) and not self.is_voter:
            self._persist(ObserverState(state.epoch))
            return
        self._effects.persist(PersistQuorumState(self.snapshot()))

    def override_follower_fetch_deadline(self, deadline_ms: int) -> None:
        """EndQuorumEpoch: start the election after the successor's backoff (no persisted change)."""
        if not isinstance(self.state, FollowerState):
            raise self._illegal("follower(deadline)", self.epoch)
        self.state.fetch_deadline_ms = min(self.state.fetch_deadline_ms, deadline_ms)
