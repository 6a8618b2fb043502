"""Leader election: KIP-595 Vote, BeginQuorumEpoch and EndQuorumEpoch, both directions.

Every handler answers after the transitions it makes; since transitions are ``persist`` effects
and replies are ``send`` effects, the quorum-state file is durable before the reply leaves.
"""

from __future__ import annotations

from broker.raft.base import CoreBase
from broker.raft.config import RaftConfig
from broker.raft.log import OffsetAndEpoch
from broker.raft.messages import (
    INVALID_QUORUM_STATE,
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    VoteRequest,
    VoteResponse,
)
from broker.raft.roles import CandidateState, FollowerState, LeaderState, UnattachedState


def end_quorum_epoch_backoff_ms(config: RaftConfig, position: int) -> int:
    """KIP-595 EndQuorumEpoch: the successor at ``position`` N > 0 of ``PreferredSuccessors``
    starts its election after ``MIN(retryBackoffMaxMs, retryBackoffMs * 2^(N - 1))``; N = 0 at once."""
    if position <= 0:
        return 0
    return min(config.retry_backoff_max_ms, config.retry_backoff_ms << min(position - 1, 30))


class ElectionHandlers(CoreBase):
    # -- Vote ----------------------------------------------------------------------------------
    def _handle_vote_request(self, source: int, correlation_id: int, request: VoteRequest, now_ms: int) -> None:
        """KIP-595 "Vote request handling", steps 1-4."""

        def reply(error: ErrorCode, granted: bool) -> None:
            response = VoteResponse(error, self.quorum.leader_id, self.epoch, granted)
            self._effects.send(source, correlation_id, response)

        # 1. The cluster id must match the cached one (if any); otherwise reject.
        if not self._cluster_id_matches(request.cluster_id):
            reply(ErrorCode.INCONSISTENT_CLUSTER_ID, False)
            return
        # 2. A larger epoch than the candidate's is known: reject.
        if request.candidate_epoch < self.epoch:
            reply(ErrorCode.FENCED_LEADER_EPOCH, False)
            return
        if not self.quorum.is_voter or request.candidate_id == self.local_id:
            reply(ErrorCode.INCONSISTENT_VOTER_SET, False)
            return
        # 4a. The candidate must be an expected voter. If not, reject, but accept the epoch bump
        #     and start a new election ourselves (it may be a half-done voter reassignment).
        if request.candidate_id not in self.quorum.voters:
            if request.candidate_epoch > self.epoch:
                self._transition_for_epoch(request.candidate_epoch, NO_LEADER, now_ms)
                self._become_candidate(now_ms)
            reply(ErrorCode.INCONSISTENT_VOTER_SET, False)
            return
        if request.candidate_epoch > self.epoch:
            # A larger candidate epoch: a new leader may be elected in it; become a voter again.
            self._transition_for_epoch(request.candidate_epoch, NO_LEADER, now_ms)
        # 3./4b. One vote per epoch; grant only to a candidate whose log is at least as up to date:
        #        compare the last epochs, then the end offsets.
        candidate_log = OffsetAndEpoch(request.last_offset_epoch, request.last_offset)
        up_to_date = candidate_log >= self.log.end_offset_and_epoch()
        state = self.quorum.state
        granted = state.can_grant_vote(request.candidate_id, up_to_date)
        if granted and isinstance(state, UnattachedState):
            # Update the quorum-state file first, then answer voteGranted=true.
            self.quorum.transition_to_voted(state.epoch, request.candidate_id, now_ms)
            self._on_role_change(now_ms)
        reply(ErrorCode.NONE, granted)

    def _handle_vote_response(self, source: int, response: VoteResponse, now_ms: int) -> None:
        """KIP-595 "Vote response handling"."""
        if response.error_code == ErrorCode.NONE:
            self._requests.on_success(source)
        if self._maybe_handle_common_response(response.leader_id, response.leader_epoch, now_ms):
            return
        state = self.quorum.state
        # 1. Ignore the response unless still a candidate of that epoch.
        if not isinstance(state, CandidateState) or response.leader_epoch != state.epoch:
            return
        # INCONSISTENT_CLUSTER_ID (and any other error) is simply a vote refusal.
        granted = response.vote_granted and response.error_code == ErrorCode.NONE
        state.record_vote(source, granted)
        # 2./3. A majority: become leader (then LeaderChange, then BeginQuorumEpoch).
        if state.is_vote_granted():
            self._become_leader(now_ms)
        elif state.is_vote_rejected() and not state.is_backing_off:
            # The election is lost (e.g. the other of two voters said no): step down and back
            # off at once instead of waiting for the election timeout.
            state.backoff_until_ms = now_ms + self.quorum.random_election_backoff_ms()

    # -- BeginQuorumEpoch ----------------------------------------------------------------------
    def _handle_begin_quorum_epoch_request(
        self, source: int, correlation_id: int, request: BeginQuorumEpochRequest, now_ms: int
    ) -> None:
        """KIP-595 "BeginQuorumEpoch request handling"."""

        def reply(error: ErrorCode) -> None:
            response = BeginQuorumEpochResponse(error, self.quorum.leader_id, self.epoch)
            self._effects.send(source, correlation_id, response)

        if not self._cluster_id_matches(request.cluster_id):
            # Sent by an elected leader: a cluster id mismatch is fatal for this broker.
            reply(ErrorCode.INCONSISTENT_CLUSTER_ID)
            self._fail(
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"BeginQuorumEpoch from leader {request.leader_id} of epoch {request.leader_epoch} "
                f"carries cluster id {request.cluster_id!r}, ours is {self.cluster_id!r}",
            )
            return
        if request.leader_epoch < self.epoch:
            reply(ErrorCode.FENCED_LEADER_EPOCH)
            return
        # Only voters receive BeginQuorumEpoch (observers find the leader by fetching).
        if not self.quorum.is_voter or request.leader_id not in self.quorum.voters:
            reply(ErrorCode.INCONSISTENT_VOTER_SET)
            return
        known = self.quorum.leader_id
        if request.leader_epoch == self.epoch and known != NO_LEADER:
            # Accept only if it does not conflict: leader A of epoch 5 rules out B in epoch 5.
            reply(ErrorCode.NONE if known == request.leader_id else INVALID_QUORUM_STATE)
            return
        if request.leader_id == self.local_id:
            reply(INVALID_QUORUM_STATE)
            return
        self.quorum.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
        self._on_role_change(now_ms)
        reply(ErrorCode.NONE)

    def _handle_begin_quorum_epoch_response(self, source: int, response: BeginQuorumEpochResponse, now_ms: int) -> None:
        """No error: the voter endorses this leader; FENCED_LEADER_EPOCH: follow the newer leader."""
        if self._maybe_handle_common_response(response.leader_id, response.leader_epoch, now_ms):
            return
        state = self.quorum.state
        if not isinstance(state, LeaderState) or response.leader_epoch != state.epoch:
            self._requests.on_failure(source, now_ms)
            return
        if response.error_code == ErrorCode.NONE:
            self._requests.on_success(source)
            state.endorsed.add(source)
        else:
            self._requests.on_failure(source, now_ms)  # retried until endorsed

    # -- EndQuorumEpoch ------------------------------------------------------------------------
    def _handle_end_quorum_epoch_request(
        self, source: int, correlation_id: int, request: EndQuorumEpochRequest, now_ms: int
    ) -> None:
        """KIP-595 "EndQuorumEpoch request handling"."""

        def reply(error: ErrorCode) -> None:
            response = EndQuorumEpochResponse(error, self.quorum.leader_id, self.epoch)
            self._effects.send(source, correlation_id, response)

        if not self._cluster_id_matches(request.cluster_id):
            reply(ErrorCode.INCONSISTENT_CLUSTER_ID)
            return
        if request.leader_epoch < self.epoch:
            reply(ErrorCode.FENCED_LEADER_EPOCH)
            return
        if not self.quorum.is_voter:
            reply(ErrorCode.INCONSISTENT_VOTER_SET)
            return
        if request.leader_epoch > self.epoch:
            self._transition_for_epoch(request.leader_epoch, request.leader_id, now_ms)
        elif self.quorum.leader_id == NO_LEADER and request.leader_id not in (NO_LEADER, self.local_id):
            self.quorum.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
            self._on_role_change(now_ms)
        state = self.quorum.state
        # Rejected if the leader of this epoch is unknown (or is someone else).
        if not isinstance(state, FollowerState) or state.leader != request.leader_id:
            reply(INVALID_QUORUM_STATE)
            return
        if self.local_id not in request.preferred_successors:
            reply(ErrorCode.INCONSISTENT_VOTER_SET)
            return
        position = request.preferred_successors.index(self.local_id)
        if position == 0:
            self._become_candidate(now_ms)  # the first successor does not wait
        else:
            self.quorum.override_follower_fetch_deadline(now_ms + end_quorum_epoch_backoff_ms(self.config, position))
        reply(ErrorCode.NONE)

    def _handle_end_quorum_epoch_response(self, source: int, response: EndQuorumEpochResponse, now_ms: int) -> None:
        """No error: nothing to do. A newer leader: follow it (the sender may be shutting down)."""
        self._maybe_handle_common_response(response.leader_id, response.leader_epoch, now_ms)

    # -- outbound --------------------------------------------------------------------------------
    def _send_election_requests(self, now_ms: int) -> None:
        """Candidate: VoteRequest to every voter that has not answered. Leader: BeginQuorumEpoch to
        every voter that has not endorsed it yet (so a partitioned voter learns it after healing)."""
        state = self.quorum.state
        if isinstance(state, CandidateState) and not state.is_backing_off:
            last = self.log.end_offset_and_epoch()
            request = VoteRequest(self.cluster_id, state.epoch, self.local_id, last.epoch, last.offset)
            for voter in state.unrecorded_voters():
                if self._requests.is_ready(voter, now_ms):
                    self._effects.send(voter, self._requests.on_send(voter, now_ms), request)
        elif isinstance(state, LeaderState):
            begin = BeginQuorumEpochRequest(self.cluster_id, self.local_id, state.epoch)
            for voter in state.unendorsed_voters():
                if self._requests.is_ready(voter, now_ms):
                    self._effects.send(voter, self._requests.on_send(voter, now_ms), begin)
