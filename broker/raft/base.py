"""Shared state and role-change helpers of ``RaftCore`` (its handler mixins build on this).

Everything here runs inside one step: it mutates the in-memory model and records effects in
``self._effects``; it never performs I/O.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from broker.raft.config import RaftConfig
from broker.raft.effects import (
    AppendToLog,
    EffectBuffer,
    FatalError,
    FlushLog,
    HighWatermarkAdvanced,
    TruncateLog,
)
from broker.raft.log import Entry, LeaderChange, RaftLog, VotersRecord
from broker.raft.messages import NO_LEADER, ErrorCode
from broker.raft.metrics import RaftMetrics
from broker.raft.requests import RequestManager
from broker.raft.roles import (
    CandidateState,
    FollowerState,
    LeaderState,
    ObserverState,
    UnattachedState,
    VotedState,
)
from broker.raft.state import QuorumState


class CoreBase:
    """Attributes every part of the core shares, and the transitions they all use."""

    config: RaftConfig
    local_id: int
    cluster_id: str | None
    log: RaftLog
    quorum: QuorumState
    _rng: random.Random
    _effects: EffectBuffer
    _requests: RequestManager
    _metrics: RaftMetrics
    _fatal: FatalError | None
    _voter_records: list[tuple[int, VotersRecord]]

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def high_watermark(self) -> int:
        return self.quorum.high_watermark

    def _become_candidate(self, now_ms: int) -> None:
        self.quorum.transition_to_candidate(now_ms)
        self._on_role_change(now_ms)
        self._metrics.on_candidate(now_ms)
        state = self.quorum.state
        if isinstance(state, CandidateState) and state.is_vote_granted():
            self._become_leader(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        """Majority reached: persist leadership, then append the LeaderChange control record."""
        leader = self.quorum.transition_to_leader(self.log.end_offset, now_ms)
        self._on_role_change(now_ms)
        record = LeaderChange(self.local_id, tuple(sorted(self.quorum.voters)), leader.granting_voters)
        entries = [Entry(self.log.end_offset, leader.epoch, record)]
        if not self._voter_records and self.config.bootstrap_voters is not None:
            # KIP-853: the bootstrap voter set (storage format) enters the replicated log with the
            # first leader (Kafka keeps it in the 0-0 checkpoint; pylog's log has no snapshot yet).
            entries.append(Entry(self.log.end_offset + 1, leader.epoch, self.config.bootstrap_voters))
        self._append_as_leader(leader, entries, now_ms)

    def _transition_for_epoch(self, epoch: int, leader_id: int, now_ms: int) -> None:
        """Adopt a larger epoch learnt from a peer, with its leader when known."""
        if leader_id not in (NO_LEADER, self.local_id):
            self.quorum.transition_to_follower(epoch, leader_id, now_ms)
        elif self.quorum.is_voter:
            self.quorum.transition_to_unattached(epoch, now_ms)
        else:
            self.quorum.transition_to_observer(epoch)
        self._on_role_change(now_ms)

    def _maybe_handle_common_response(self, leader_id: int, leader_epoch: int, now_ms: int) -> bool:
        """Every response piggybacks the sender's leader and epoch (KIP-595 "common properties").
        Returns True if that moved this replica to another role (the response is then spent)."""
        if leader_epoch > self.epoch:
            self._transition_for_epoch(leader_epoch, leader_id, now_ms)
            return True
        state = self.quorum.state
        if (
            leader_epoch == self.epoch
            and leader_id not in (NO_LEADER, self.local_id)
            and isinstance(state, UnattachedState | VotedState | CandidateState | ObserverState)
        ):
            self.quorum.transition_to_follower(leader_epoch, leader_id, now_ms)
            self._on_role_change(now_ms)
            return True
        return False

    def _on_role_change(self, now_ms: int) -> None:
        self._requests.reset_all()
        state = self.quorum.state
        if isinstance(state, FollowerState | LeaderState):
            self._metrics.on_leader_known(now_ms)
        if not isinstance(state, LeaderState):
            self._metrics.on_not_leader()

    # -- KIP-853 voter set ------------------------------------------------------------------------
    def _scan_voter_records(self, entries: Sequence[Entry]) -> None:
        self._voter_records.extend((e.offset, e.payload) for e in entries if isinstance(e.payload, VotersRecord))

    def _voters_in_log(self) -> frozenset[int]:
        """KIP-853: the last VotersRecord in the log (committed or not), else the bootstrap set,
        else the static ``controller.quorum.voters``."""
        if self._voter_records:
            return self._voter_records[-1][1].ids
        return self.config.voters

    def current_voters_record(self) -> VotersRecord | None:
        """The voter set in effect as a record (None in a static quorum, kraft.version 0)."""
        if self._voter_records:
            return self._voter_records[-1][1]
        bootstrap: VotersRecord | None = self.config.bootstrap_voters
        return bootstrap

    def _refresh_voters(self, now_ms: int) -> None:
        voters = self._voters_in_log()
        if voters != self.quorum.voters:
            self.quorum.update_voters(voters, now_ms)

    def _voter_change_pending(self) -> bool:
        """A VotersRecord is appended but not yet committed (KIP-853: one change at a time)."""
        return bool(self._voter_records) and self._voter_records[-1][0] >= self.high_watermark

    def _append_as_leader(self, leader: LeaderState, entries: list[Entry], now_ms: int) -> None:
        self.log.append(entries)
        self._scan_voter_records(entries)
        self._refresh_voters(now_ms)
        self._effects.persist(AppendToLog(tuple(entries)))
        self._effects.persist(FlushLog(self.log.end_offset))
        leader.update_local_end_offset(self.log.end_offset, now_ms)
        self._metrics.on_leader_append(self.log.end_offset, len(entries), now_ms)
        self._maybe_advance_leader_high_watermark(leader, now_ms)

    def _maybe_advance_leader_high_watermark(self, leader: LeaderState, now_ms: int) -> None:
        """KIP-595 "additional condition on commit": only once a majority holds an entry of the
        current epoch (the LeaderChange record at ``epoch_start_offset``) does the HW move."""
        majority_offset = leader.majority_end_offset()
        if majority_offset > leader.epoch_start_offset and self.quorum.update_high_watermark(majority_offset):
            self._on_high_watermark(now_ms)

    def _on_high_watermark(self, now_ms: int) -> None:
        self._metrics.on_high_watermark(self.high_watermark, now_ms)
        self._effects.notify(HighWatermarkAdvanced(self.high_watermark))
        state = self.quorum.state
        if isinstance(state, LeaderState) and not self.quorum.is_voter and not self._voter_change_pending():
            # KIP-853: a leader that removed itself leads until that change is committed, then resigns.
            self._resign_now(state, now_ms)

    def _resign_now(self, state: LeaderState, now_ms: int) -> None:
        raise NotImplementedError  # RaftCore

    def _truncate_log(self, end_offset: int) -> None:
        if end_offset < self.high_watermark:
            raise AssertionError(
                f"replica {self.local_id}: truncation to {end_offset} below the high watermark "
                f"{self.high_watermark} would remove committed entries"
            )
        if end_offset < self.log.end_offset:
            self.log.truncate_to(end_offset)
            self._voter_records = [(o, r) for o, r in self._voter_records if o < end_offset]
            self._effects.persist(TruncateLog(end_offset))
            self._effects.persist(FlushLog(self.log.end_offset))

    def _fail(self, error_code: ErrorCode, reason: str) -> None:
        self._fatal = FatalError(error_code, reason)
        self._effects.notify(self._fatal)

    def _cluster_id_matches(self, cluster_id: str | None) -> bool:
        """KIP-595 "Cluster Bootstrapping": a null id on either side skips the check."""
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id
