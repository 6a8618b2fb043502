"""Replication: the KIP-595 Fetch API on the leader and on followers/observers.

Leader side ("Fetch request handling"): check the cluster id and the epoch, check that
``LastFetchedEpoch``/``FetchOffset`` match the leader's log (else answer ``DivergingEpoch``), record
the replica's progress, advance the high watermark on voters' fetches, and answer with records. A
fetch with nothing to return is *parked* for up to ``MaxWaitTimeMs`` (a long poll) and answered as
soon as records are appended or the high watermark moves.

Follower side ("Fetch response handling"): learn newer leaders/epochs, truncate on
``DivergingEpoch``, append and fsync records, adopt ``min(HighWatermark, log end offset)``.
Observers and voters without a leader fetch from random voters to find it.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.raft.base import CoreBase
from broker.raft.effects import AppendToLog, FlushLog
from broker.raft.log import Entry
from broker.raft.messages import (
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
)
from broker.raft.roles import FollowerState, LeaderState, ObserverState, UnattachedState


@dataclass(slots=True)
class ParkedFetch:
    source: int
    correlation_id: int
    request: FetchRequest
    epoch: int
    deadline_ms: int


class ReplicationHandlers(CoreBase):
    _parked: dict[int, ParkedFetch]
    _last_sent_high_watermark: dict[int, int]

    def _init_replication(self) -> None:
        self._parked = {}
        self._last_sent_high_watermark = {}

    # -- leader side -----------------------------------------------------------------------------
    def _fetch_error(self, request: FetchRequest) -> ErrorCode | None:
        """Steps 1-2: cluster id, then the request's epoch against ours (and leadership)."""
        if not self._cluster_id_matches(request.cluster_id):
            return ErrorCode.INCONSISTENT_CLUSTER_ID
        if request.current_leader_epoch < self.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if request.current_leader_epoch > self.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.quorum.state, LeaderState):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def _diverging_epoch(self, request: FetchRequest) -> EpochEndOffset | None:
        """Step 3: FetchOffset must lie in the range of LastFetchedEpoch in the leader's log (or be
        the start of the next epoch). Otherwise: the largest epoch <= LastFetchedEpoch the leader
        has and its end offset, so the follower can truncate as far as possible at once."""
        if request.fetch_offset == 0 and request.last_fetched_epoch == 0:
            return None
        end = self.log.end_offset_for_epoch(request.last_fetched_epoch)
        if end.epoch != request.last_fetched_epoch or request.fetch_offset > end.offset:
            return EpochEndOffset(end.epoch, end.offset)
        return None

    def _respond_fetch(
        self,
        source: int,
        correlation_id: int,
        request: FetchRequest,
        error: ErrorCode = ErrorCode.NONE,
        diverging: EpochEndOffset | None = None,
    ) -> None:
        records: tuple[Entry, ...] = ()
        if error == ErrorCode.NONE and diverging is None:
            records = self.log.read(request.fetch_offset, self.config.fetch_max_records)
            self._last_sent_high_watermark[request.replica_id] = self.high_watermark
        response = FetchResponse(
            error,
            self.high_watermark if error == ErrorCode.NONE else -1,
            LeaderIdAndEpoch(self.quorum.leader_id, self.epoch),
            diverging,
            records,
        )
        self._effects.send(source, correlation_id, response)

    def _handle_fetch_request(self, source: int, correlation_id: int, request: FetchRequest, now_ms: int) -> None:
        error = self._fetch_error(request)
        if error is not None:
            self._respond_fetch(source, correlation_id, request, error)
            return
        leader = self.quorum.state
        assert isinstance(leader, LeaderState)
        diverging = self._diverging_epoch(request)
        if diverging is not None:
            self._respond_fetch(source, correlation_id, request, diverging=diverging)
            return
        replica = request.replica_id
        if replica >= 0:
            leader.record_fetch(replica, request.fetch_offset, self.log.end_offset, now_ms)
            if replica in leader.voters:
                # Step 4: only voters' fetches move the high watermark.
                self._maybe_advance_leader_high_watermark(leader, now_ms)
        self._parked.pop(replica, None)  # a newer fetch supersedes a parked one
        nothing_new = request.fetch_offset >= self.log.end_offset and (
            self._last_sent_high_watermark.get(replica) == self.high_watermark
        )
        if nothing_new and request.max_wait_time_ms > 0 and replica >= 0:
            wait_ms = min(request.max_wait_time_ms, self.config.fetch_max_wait_ms)
            self._parked[replica] = ParkedFetch(source, correlation_id, request, leader.epoch, now_ms + wait_ms)
            return
        self._respond_fetch(source, correlation_id, request)

    def _complete_parked_fetches(self, now_ms: int) -> None:
        """Answer parked fetches that have records, a newer high watermark, expired, or lost us
        the leadership (then with the error a fresh request would get)."""
        if not self._parked:
            return
        is_leader = isinstance(self.quorum.state, LeaderState)
        for replica, parked in list(self._parked.items()):
            request = parked.request
            if not is_leader or parked.epoch != self.epoch:
                error = self._fetch_error(request) or ErrorCode.NOT_LEADER_OR_FOLLOWER
                self._respond_fetch(parked.source, parked.correlation_id, request, error)
            elif (
                request.fetch_offset < self.log.end_offset
                or self._last_sent_high_watermark.get(replica) != self.high_watermark
                or now_ms >= parked.deadline_ms
            ):
                self._respond_fetch(parked.source, parked.correlation_id, request)
            else:
                continue
            del self._parked[replica]

    # -- follower / observer side ----------------------------------------------------------------
    def _handle_fetch_response(self, source: int, response: FetchResponse, now_ms: int) -> None:
        leader = response.current_leader
        if response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
            if leader.leader_id == source:
                # Our cluster id conflicts with the elected leader's: fatal (KIP-595 bootstrapping).
                self._fail(
                    ErrorCode.INCONSISTENT_CLUSTER_ID,
                    f"leader {source} of epoch {leader.leader_epoch} rejected cluster id {self.cluster_id!r}",
                )
            else:
                self._requests.on_failure(source, now_ms)  # not the leader's word: try elsewhere
            return
        # FENCED_LEADER_EPOCH (and every other response) carries the current leader and epoch.
        if self._maybe_handle_common_response(leader.leader_id, leader.leader_epoch, now_ms):
            return
        state = self.quorum.state
        if (
            response.error_code != ErrorCode.NONE
            or not isinstance(state, FollowerState)
            or state.leader != source
            or leader.leader_epoch != state.epoch
        ):
            self._requests.on_failure(source, now_ms)  # retry later (another voter if searching)
            return
        self._requests.on_success(source)
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        if response.diverging_epoch is not None:
            # Truncate every offset >= DivergingEpoch.EndOffset and every offset whose epoch is
            # larger than DivergingEpoch.Epoch, then fetch again from the new end.
            diverging = response.diverging_epoch
            self._truncate_log(self.log.truncation_offset_for(diverging.epoch, diverging.end_offset))
            self._refresh_voters(now_ms)  # KIP-853: a truncated VotersRecord is no longer in effect
            return
        records = response.records
        if records and records[0].offset == self.log.end_offset:
            self.log.append(records)
            self._scan_voter_records(records)
            self._refresh_voters(now_ms)  # KIP-853: a VotersRecord takes effect once appended
            self._effects.persist(AppendToLog(records))
            self._effects.persist(FlushLog(self.log.end_offset))  # fsync before the next Fetch
            self._metrics.on_fetched_records(len(records), now_ms)
        if response.high_watermark >= 0:
            new_high_watermark = min(response.high_watermark, self.log.end_offset)
            if self.quorum.update_high_watermark(new_high_watermark):
                self._on_high_watermark(now_ms)

    def _on_request_timeout(self, destination: int, now_ms: int) -> None:
        """A request got no answer within quorum.request.timeout.ms (already backing off)."""

    def _send_fetch_requests(self, now_ms: int) -> None:
        """A follower fetches from its leader. An observer, or a voter without leader or vote
        (e.g. at start-up), fetches from a random voter until it learns the leader; with KIP-853
        ``controller.quorum.bootstrap.servers`` (negative ids) also from those, so a replica
        whose log names no voter yet finds the leader."""
        state = self.quorum.state
        if isinstance(state, FollowerState):
            target: int | None = state.leader if self._requests.is_ready(state.leader, now_ms) else None
        elif isinstance(state, ObserverState | UnattachedState) and not self._requests.has_in_flight():
            known = self.quorum.voters | frozenset(self.config.bootstrap_servers)
            choices = sorted(v for v in known if v != self.local_id and not self._requests.is_backing_off(v, now_ms))
            target = self._rng.choice(choices) if choices else None
        else:
            target = None
        if target is None:
            return
        last = self.log.end_offset_and_epoch()
        request = FetchRequest(
            self.cluster_id,
            self.local_id,
            self.config.fetch_max_wait_ms,
            self.epoch,
            last.offset,
            last.epoch,
        )
        self._effects.send(target, self._requests.on_send(target, now_ms), request)
