"""``RaftCore``: the KIP-595 state machine of one replica, with no I/O at all.

A driver owns one core and calls, one at a time, each with the current time in ms:

* ``start(now_ms)`` once, after building the core from what is durable
  (``RaftCore(config, stored_state=..., log_entries=..., cluster_id=..., rng=..., now_ms=...)``);
* ``handle(Inbound(source, correlation_id, message), now_ms)`` for every received message;
* ``tick(now_ms)`` whenever ``next_deadline_ms(now_ms)`` has passed (timeouts, backoffs, retries);
* ``request_failed(destination, correlation_id, now_ms)`` when a request could not be sent or its
  connection broke before the response (else the request times out after
  ``quorum.request.timeout.ms``);
* ``append(payloads, now_ms)`` on the leader, for new records; ``resign(now_ms)`` to step down
  gracefully before shutting down (sends EndQuorumEpoch).

Each call returns a ``StepResult`` that the driver executes as ``effects`` describes: every
``persist`` effect durably, in order, *then* the ``send`` messages, then the ``notify`` items.
Before returning it the core checks its own safety invariants (``invariants``: epoch, one vote
and one leader per epoch, high watermark, persist before send) and raises ``RaftInvariantError``
(an AssertionError, fatal for the driver) when one is broken.
Randomness comes only from the injected ``random.Random``; time only from the ``now_ms`` arguments.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from broker.raft.config import RaftConfig
from broker.raft.effects import DeleteLogPrefix, EffectBuffer, FatalError, QuorumStateData, StepResult
from broker.raft.election import ElectionHandlers
from broker.raft.invariants import ReplicaView, StepInvariants
from broker.raft.log import Entry, OffsetAndEpoch, RaftLog, VoterSpec, VotersRecord
from broker.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Inbound,
    VoteRequest,
    VoteResponse,
)
from broker.raft.metrics import RaftMetrics
from broker.raft.replication import ReplicationHandlers
from broker.raft.requests import RequestManager
from broker.raft.roles import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ResignedState,
    UnattachedState,
    VotedState,
    state_name,
)
from broker.raft.snapshot import SnapshotId
from broker.raft.state import QuorumState


class NotLeaderError(Exception):
    """``append`` on a replica that is not the leader; carries the known leader and epoch."""

    def __init__(self, leader_id: int, leader_epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {leader_epoch})")
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The step to execute and the offsets the appended records got (committed once the high
    watermark passes ``last_offset``)."""

    step: StepResult
    base_offset: int
    last_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class VoterChangeResult:
    """The leader's answer to a KIP-853 AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter.

    ``error_code`` NONE: the new VotersRecord is appended (``append``); the request succeeds once
    the high watermark passes ``append.last_offset`` (the driver waits, up to the request's
    timeout, then answers REQUEST_TIMED_OUT as Kafka does). Otherwise ``append`` is None and
    ``error_message`` says why, with Kafka's error code."""

    error_code: ErrorCode
    error_message: str | None = None
    append: AppendResult | None = None


class RaftCore(ElectionHandlers, ReplicationHandlers):
    """One replica's KIP-595 state machine. Not thread-safe: one driver thread calls it."""

    def __init__(
        self,
        config: RaftConfig,
        *,
        stored_state: QuorumStateData | None,
        log_entries: Sequence[Entry] = (),
        cluster_id: str | None = None,
        rng: random.Random,
        now_ms: int,
        snapshot_id: SnapshotId | None = None,
        snapshot_voters: VotersRecord | None = None,
    ) -> None:
        """``snapshot_id``: the newest snapshot on disk (KIP-630); ``log_entries`` then start at
        its end offset (the prefix was deleted) or at 0 (not yet). ``snapshot_voters``: the
        VotersRecord the snapshot carries (KIP-853), in effect until a
        later one in the log."""
        self.config = config
        self.local_id = config.node_id
        self.cluster_id = cluster_id
        self._rng = rng
        self._effects = EffectBuffer()
        self.latest_snapshot = snapshot_id
        first_offset = log_entries[0].offset if log_entries else None
        if snapshot_id is not None and (first_offset is None or first_offset > 0):
            if first_offset is not None and first_offset != snapshot_id.end_offset:
                raise ValueError(f"the log starts at {first_offset}, the snapshot ends at {snapshot_id.end_offset}")
            self.log = RaftLog(log_entries, start_offset=snapshot_id.end_offset, start_epoch=snapshot_id.epoch)
        elif first_offset not in (None, 0):
            raise ValueError(f"the log starts at {first_offset} and no snapshot covers the entries below")
        else:
            self.log = RaftLog(log_entries)
        self._voter_records = []
        if snapshot_voters is not None and snapshot_id is not None:
            self._voter_records.append((snapshot_id.end_offset - 1, snapshot_voters))
        self._scan_voter_records(
            [e for e in self.log.entries() if snapshot_id is None or e.offset >= snapshot_id.end_offset]
        )
        self.quorum = QuorumState(
            config,
            rng=rng,
            effects=self._effects,
            stored=stored_state,
            log_end=self.log.end_offset_and_epoch(),
            now_ms=now_ms,
            voters=self._voters_in_log(),
        )
        if snapshot_id is not None and self.quorum.high_watermark < snapshot_id.end_offset:
            self.quorum.high_watermark = snapshot_id.end_offset  # KIP-630: a snapshot is committed
        self._requests = RequestManager(config, rng.getrandbits(31))
        self._metrics = RaftMetrics()
        self._init_replication()
        self._fatal: FatalError | None = None
        self._started = False
        self._invariants = StepInvariants(self.local_id, self._view())

    # -- read-only views ---------------------------------------------------------------------------
    @property
    def state(self) -> EpochState:
        return self.quorum.state

    @property
    def leader_id(self) -> int:
        return self.quorum.leader_id

    @property
    def voted_id(self) -> int:
        return self.quorum.voted_id

    @property
    def role(self) -> str:
        return state_name(self.quorum.state)

    @property
    def is_leader(self) -> bool:
        return isinstance(self.quorum.state, LeaderState)

    @property
    def fatal_error(self) -> FatalError | None:
        return self._fatal

    def quorum_state_data(self) -> QuorumStateData:
        """What the quorum-state file must hold once the last step's effects are executed."""
        return self.quorum.snapshot()

    # -- entry points ------------------------------------------------------------------------------
    def start(self, now_ms: int) -> StepResult:
        """First step after construction: writes the bootstrap quorum state, starts timers."""
        if self._started:
            raise RuntimeError("RaftCore.start called twice")
        self._started = True
        self.quorum.initialize()
        if self.quorum.voters == frozenset((self.local_id,)) and not self.is_leader:
            self._become_candidate(now_ms)  # a single voter elects itself at once
        self._poll(now_ms)
        return self._finish_step()

    def handle(self, inbound: Inbound, now_ms: int) -> StepResult:
        """Process one received message, then timers; returns the effects to execute."""
        self._check_started()
        if self._fatal is None:
            self._dispatch(inbound, now_ms)
            if self._fatal is None:
                self._poll(now_ms)
        return self._finish_step()

    def tick(self, now_ms: int) -> StepResult:
        """Advance timers (elections, fetch timeouts, retries, parked fetches)."""
        self._check_started()
        if self._fatal is None:
            self._poll(now_ms)
        return self._finish_step()

    def request_failed(self, destination: int, correlation_id: int, now_ms: int) -> StepResult:
        """The driver could not send a request, or lost the connection before its response
        (KIP-595: retries after "retriable request errors or disconnects" back off from
        ``quorum.retry.backoff.ms``). Unknown or already answered requests are ignored."""
        self._check_started()
        if self._fatal is None and self._requests.match_response(destination, correlation_id):
            self._requests.on_failure(destination, now_ms)
            self._poll(now_ms)
        return self._finish_step()

    def append(self, payloads: Sequence[bytes], now_ms: int) -> AppendResult:
        """Leader only: append records in the current epoch (fsynced by the returned step)."""
        self._check_started()
        state = self.quorum.state
        if self._fatal is not None or not isinstance(state, LeaderState):
            raise NotLeaderError(self.leader_id, self.epoch)
        if not payloads:
            raise ValueError("append of no records")
        base = self.log.end_offset
        entries = [Entry(base + i, state.epoch, bytes(p)) for i, p in enumerate(payloads)]
        self._append_as_leader(state, entries, now_ms)
        self._poll(now_ms)
        return AppendResult(self._finish_step(), base, base + len(entries) - 1, state.epoch)

    def resign(self, now_ms: int) -> StepResult:
        """Graceful step-down (KIP-595 EndQuorumEpoch): a leader resigns and tells every voter,
        naming its preferred successors, most replicated first. Best effort: never retried."""
        self._check_started()
        state = self.quorum.state
        if self._fatal is None and isinstance(state, LeaderState):
            self._resign_now(state, now_ms)
        return self._finish_step()

    def _resign_now(self, state: LeaderState, now_ms: int) -> None:
        successors = state.preferred_successors()
        self.quorum.transition_to_resigned(successors, now_ms)
        self._on_role_change(now_ms)
        for voter in successors:
            correlation_id = self._requests.on_send(voter, now_ms)
            self._effects.send(
                voter,
                correlation_id,
                EndQuorumEpochRequest(self.cluster_id, self.local_id, self.local_id, state.epoch, successors),
            )
        self._complete_parked_fetches(now_ms)

    # -- KIP-630 snapshots -------------------------------------------------------------------------
    def snapshot_voters(self, end_offset: int) -> VotersRecord | None:
        """The VotersRecord in effect at ``end_offset`` (the last one below it), which a snapshot
        ending there must carry (KIP-853: the log start needs the voter set); None if none."""
        found = None
        for offset, record in self._voter_records:
            if offset < end_offset:
                found = record
        return found

    def snapshot_id_at(self, end_offset: int) -> SnapshotId:
        """The id of a snapshot of everything below ``end_offset`` (committed, in the log)."""
        if not self.log.start_offset < end_offset <= self.high_watermark:
            raise ValueError(
                f"snapshot end {end_offset} outside ({self.log.start_offset}, high watermark {self.high_watermark}]"
            )
        return SnapshotId(end_offset, self.log.entry(end_offset - 1).epoch)

    def release_payloads(self, end_offset: int) -> None:
        """The data payloads below ``end_offset`` (at most the high watermark) were handed to the
        state machine and stay readable in the log file: the in-memory log keeps only their
        offsets and epochs (``RaftLog.release_payloads``). Fetch answers are built from the file
        (``broker.raft.driver``), so no decision of the core reads a released payload."""
        self.log.release_payloads(min(end_offset, self.high_watermark))

    def snapshot_created(self, snapshot_id: SnapshotId) -> None:
        """A snapshot is durable on disk (KIP-630): it becomes the one a prefix deletion (and a
        FetchSnapshot) refers to. Only committed offsets may be snapshotted."""
        if snapshot_id.end_offset > self.high_watermark:
            raise ValueError(f"snapshot {snapshot_id} is beyond the high watermark {self.high_watermark}")
        if self.latest_snapshot is None or snapshot_id > self.latest_snapshot:
            self.latest_snapshot = snapshot_id

    def delete_log_prefix(self, start_offset: int) -> StepResult:
        """KIP-630 retention: drop the log below ``start_offset`` (at most the newest snapshot's
        end offset, which is committed). Returns the step with the ``DeleteLogPrefix`` effect."""
        self._check_started()
        snapshot = self.latest_snapshot
        if snapshot is None or not self.log.start_offset < start_offset <= snapshot.end_offset:
            raise ValueError(f"log start {start_offset} is not covered by the newest snapshot {snapshot}")
        epoch = snapshot.epoch if start_offset == snapshot.end_offset else self.log.entry(start_offset - 1).epoch
        self.log.delete_prefix(start_offset, epoch)
        self._effects.persist(DeleteLogPrefix(start_offset, epoch))
        return self._finish_step()

    # -- KIP-853 voter changes (leader only) -------------------------------------------------------
    def _voter_change_precheck(self, operation: str) -> VoterChangeResult | None:
        """Kafka's common refusals: not the leader; a static quorum (kraft.version 0); no commit
        yet in this epoch; another change in flight (one at a time)."""
        state = self.quorum.state
        if self._fatal is not None or not isinstance(state, LeaderState):
            return VoterChangeResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader of the KRaft quorum")
        if self.current_voters_record() is None:
            return VoterChangeResult(
                ErrorCode.UNSUPPORTED_VERSION,
                f"Cluster doesn't support {operation} because the kraft.version feature is 0 "
                "(a static quorum from controller.quorum.voters)",
            )
        if self.high_watermark <= state.epoch_start_offset or not self._voter_records:
            return VoterChangeResult(
                ErrorCode.REQUEST_TIMED_OUT, "the leader has not yet committed an offset in its epoch"
            )
        if self._voter_change_pending():
            return VoterChangeResult(
                ErrorCode.REQUEST_TIMED_OUT, f"{operation} failed due to a pending voter set change"
            )
        return None

    def _append_voters(self, record: VotersRecord, now_ms: int) -> VoterChangeResult:
        return VoterChangeResult(ErrorCode.NONE, None, self.append_control(record, now_ms))

    def append_control(self, record: VotersRecord, now_ms: int) -> AppendResult:
        """Leader only: append one control record (a VotersRecord) in the current epoch."""
        state = self.quorum.state
        if self._fatal is not None or not isinstance(state, LeaderState):
            raise NotLeaderError(self.leader_id, self.epoch)
        base = self.log.end_offset
        self._append_as_leader(state, [Entry(base, state.epoch, record)], now_ms)
        self._poll(now_ms)
        return AppendResult(self._finish_step(), base, base, state.epoch)

    def add_voter(self, voter: VoterSpec, now_ms: int) -> VoterChangeResult:
        """KIP-853 AddRaftVoter: add a caught-up observer to the voter set.

        Refusals (Kafka's codes): DUPLICATE_VOTER if the id is already a voter; REQUEST_TIMED_OUT
        if the replica has not fetched within ``quorum.fetch.timeout.ms`` or is not caught up to
        the leader's log end at its last fetch (Kafka: "not caught up"), or a change is pending."""
        refused = self._voter_change_precheck("adding voter")
        if refused is not None:
            return refused
        record = self.current_voters_record()
        assert record is not None
        if voter.voter_id in record.ids:
            return VoterChangeResult(
                ErrorCode.DUPLICATE_VOTER, f"The voter id {voter.voter_id} is already part of the set of voters"
            )
        state = self.quorum.state
        assert isinstance(state, LeaderState)
        progress = state.progress.get(voter.voter_id)
        fresh_ms = now_ms - self.config.fetch_timeout_ms
        if progress is None or progress.last_fetch_ms < fresh_ms or progress.last_caught_up_ms < fresh_ms:
            return VoterChangeResult(
                ErrorCode.REQUEST_TIMED_OUT,
                f"Voter {voter.voter_id} is not an observer caught up with the leader's log",
            )
        return self._append_voters(VotersRecord((*record.voters, voter)), now_ms)

    def remove_voter(self, voter_id: int, directory_id: bytes | None, now_ms: int) -> VoterChangeResult:
        """KIP-853 RemoveRaftVoter: VOTER_NOT_FOUND if ``(voter_id, directory_id)`` is not a voter
        (a None directory id matches any); INVALID_REQUEST if it is the last voter."""
        refused = self._voter_change_precheck("removing voter")
        if refused is not None:
            return refused
        record = self.current_voters_record()
        assert record is not None
        spec = record.spec(voter_id)
        if spec is None or (directory_id is not None and spec.directory_id != directory_id):
            return VoterChangeResult(
                ErrorCode.VOTER_NOT_FOUND, f"Cannot remove voter {voter_id}: it is not part of the set of voters"
            )
        if len(record.voters) == 1:
            return VoterChangeResult(ErrorCode.INVALID_REQUEST, "Cannot remove the last voter of the quorum")
        return self._append_voters(VotersRecord(tuple(v for v in record.voters if v.voter_id != voter_id)), now_ms)

    def update_voter(self, voter: VoterSpec, now_ms: int) -> VoterChangeResult:
        """KIP-853 UpdateRaftVoter: a voter's new endpoint (same id and directory id);
        VOTER_NOT_FOUND if it is not a voter with that directory id."""
        refused = self._voter_change_precheck("updating voter")
        if refused is not None:
            return refused
        record = self.current_voters_record()
        assert record is not None
        spec = record.spec(voter.voter_id)
        if spec is None or spec.directory_id != voter.directory_id:
            return VoterChangeResult(
                ErrorCode.VOTER_NOT_FOUND, f"Voter {voter.voter_id} with this directory id is not a voter"
            )
        if spec == voter:
            return VoterChangeResult(ErrorCode.NONE)
        return self._append_voters(
            VotersRecord(tuple(voter if v.voter_id == voter.voter_id else v for v in record.voters)), now_ms
        )

    @property
    def voters(self) -> frozenset[int]:
        """The voter set in effect (KIP-853: the last VotersRecord appended)."""
        return self.quorum.voters

    def set_cluster_id(self, cluster_id: str) -> None:
        """Adopt the cluster id once it is known (committed in the metadata log, meta.properties)."""
        if self.cluster_id is not None and self.cluster_id != cluster_id:
            raise ValueError(f"cluster id is {self.cluster_id}, not {cluster_id}")
        self.cluster_id = cluster_id

    def next_deadline_ms(self, now_ms: int) -> int | None:
        """When ``tick`` must next be called (None: only a message can change anything)."""
        if self._fatal is not None:
            return None
        state = self.quorum.state
        deadlines: list[int] = []
        if isinstance(state, LeaderState):
            role_deadline = state.quorum_deadline_ms(self.config.fetch_timeout_ms)
        else:
            role_deadline = state.timer_deadline_ms()
        if role_deadline is not None:
            deadlines.append(role_deadline)
        request_deadline = self._requests.next_deadline_ms(now_ms)
        if request_deadline is not None:
            deadlines.append(request_deadline)
        deadlines.extend(parked.deadline_ms for parked in self._parked.values())
        return max(min(deadlines), now_ms) if deadlines else None

    def metrics(self, now_ms: int) -> dict[str, float | int | str]:
        """KIP-595 raft-manager metrics as a plain dict."""
        values: dict[str, float | int | str] = {
            "current-leader": self.leader_id,
            "current-epoch": self.epoch,
            "current-vote": self.voted_id,
            "current-state": self.role,
            "log-end-offset": self.log.end_offset,
            "log-end-epoch": self.log.last_epoch,
            "high-watermark": self.high_watermark,
        }
        values.update(self._metrics.windowed(now_ms))
        return values

    def describe_quorum(self, now_ms: int) -> DescribeQuorumResponse:
        """KIP-595 DescribeQuorum: replication state as known by the leader (error elsewhere)."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return DescribeQuorumResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch, -1)
        state.update_local_end_offset(self.log.end_offset, now_ms)
        return DescribeQuorumResponse(
            ErrorCode.NONE,
            self.local_id,
            state.epoch,
            self.high_watermark,
            state.describe_voters(),
            state.describe_observers(),
        )

    # -- internals ---------------------------------------------------------------------------------
    def _view(self) -> ReplicaView:
        return ReplicaView(self.quorum.snapshot(), self.is_leader, self.high_watermark, self.log.end_offset)

    def _finish_step(self) -> StepResult:
        """The step's effects, once the replica's invariants hold (``invariants``; a broken one
        raises ``RaftInvariantError`` and the driver stops the node)."""
        step = self._effects.drain()
        self._invariants.after_step(self._view(), step)
        return step

    def _check_started(self) -> None:
        if not self._started:
            raise RuntimeError("RaftCore.start must be called first")

    def _dispatch(self, inbound: Inbound, now_ms: int) -> None:
        source, correlation_id, message = inbound.source, inbound.correlation_id, inbound.message
        if isinstance(message, VoteRequest):
            self._handle_vote_request(source, correlation_id, message, now_ms)
        elif isinstance(message, BeginQuorumEpochRequest):
            self._handle_begin_quorum_epoch_request(source, correlation_id, message, now_ms)
        elif isinstance(message, EndQuorumEpochRequest):
            self._handle_end_quorum_epoch_request(source, correlation_id, message, now_ms)
        elif isinstance(message, FetchRequest):
            self._handle_fetch_request(source, correlation_id, message, now_ms)
        elif isinstance(message, FetchSnapshotRequest):
            self._handle_fetch_snapshot_request(source, correlation_id, message, now_ms)
        elif isinstance(message, DescribeQuorumRequest):
            self._effects.send(source, correlation_id, self.describe_quorum(now_ms))
        elif isinstance(message, DescribeQuorumResponse):
            return  # the core never asks
        elif not self._requests.match_response(source, correlation_id):
            return  # duplicate, stale or unsolicited response
        elif isinstance(message, VoteResponse):
            self._handle_vote_response(source, message, now_ms)
        elif isinstance(message, BeginQuorumEpochResponse):
            self._handle_begin_quorum_epoch_response(source, message, now_ms)
        elif isinstance(message, EndQuorumEpochResponse):
            self._handle_end_quorum_epoch_response(source, message, now_ms)
        elif isinstance(message, FetchResponse):
            self._handle_fetch_response(source, message, now_ms)
        elif isinstance(message, FetchSnapshotResponse):
            self._handle_fetch_snapshot_response(source, message, now_ms)

    def _poll(self, now_ms: int) -> None:
        """Timers, then outstanding requests, then parked fetches (run at the end of every step)."""
        for destination in self._requests.expire(now_ms):
            self._on_request_timeout(destination, now_ms)
        self._poll_role_timer(now_ms)
        self._send_election_requests(now_ms)
        self._send_fetch_requests(now_ms)
        self._complete_parked_fetches(now_ms)

    def _poll_role_timer(self, now_ms: int) -> None:
        state = self.quorum.state
        removable = UnattachedState | VotedState | ResignedState | CandidateState
        if isinstance(state, removable) and not self.quorum.is_voter:
            # KIP-853: removed from the voter set: never stand for election, find the leader instead.
            self.quorum.transition_to_observer(state.epoch)
            self._on_role_change(now_ms)
        elif isinstance(state, LeaderState):
            deadline = state.quorum_deadline_ms(self.config.fetch_timeout_ms)
            if deadline is not None and now_ms >= deadline:
                # KIP-595 "Leader Progress Timeout": no Fetch from a majority -> zombie; new election
                # (a leader no longer in the voter set, KIP-853, resigns instead).
                if self.quorum.is_voter:
                    self._become_candidate(now_ms)
                else:
                    self._resign_now(state, now_ms)
        elif isinstance(state, CandidateState):
            if state.backoff_until_ms is not None:
                if now_ms >= state.backoff_until_ms:
                    self._become_candidate(now_ms)
            elif now_ms >= state.election_deadline_ms:
                # No majority within quorum.election.timeout.ms: the election failed; back off.
                state.backoff_until_ms = now_ms + self.quorum.random_election_backoff_ms()
        elif isinstance(state, FollowerState) and now_ms >= state.fetch_deadline_ms:
            # No successful Fetch from the leader within quorum.fetch.timeout.ms.
            if state.is_voter:
                self._become_candidate(now_ms)
            else:
                self.quorum.transition_to_observer(state.epoch)
                self._on_role_change(now_ms)
        elif isinstance(state, UnattachedState | VotedState | ResignedState) and now_ms >= state.election_deadline_ms:
            self._become_candidate(now_ms)

    def committed_entries(self) -> Sequence[Entry]:
        """Committed entries still in the log (from the log start offset)."""
        return self.log.entries()[: self.high_watermark - self.log.start_offset]

    def log_end(self) -> OffsetAndEpoch:
        return self.log.end_offset_and_epoch()
