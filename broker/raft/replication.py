"""Replication: the KIP-595 Fetch API on the leader and on followers/observers.

Leader side ("Fetch request handling"): check the cluster id and the epoch, check that
``LastFetchedEpoch``/``FetchOffset`` match the leader's log (else answer ``DivergingEpoch``), record
the replica's progress, advance the high watermark on voters' fetches, and answer with records. A
fetch with nothing to return is *parked* for up to ``MaxWaitTimeMs`` (a long poll) and answered as
soon as records are appended or the high watermark moves.

Follower side ("Fetch response handling"): learn newer leaders/epochs, truncate on
``DivergingEpoch``, append and fsync records, adopt ``min(HighWatermark, log end offset)``.
Observers and voters without a leader fetch from random voters to find it.

KIP-630 ("Fetching Snapshots"): a Fetch below the leader's log start offset (or one whose
divergence point lies below it) is answered with the leader's newest ``SnapshotId``; the follower
then sends FetchSnapshot requests (``snapshot_chunk_bytes`` each) to the leader instead of Fetch,
checks the whole file (``decode_snapshot``), and installs it (``InstallSnapshot``: its log starts
at the snapshot's end offset, its voter set is the snapshot's VotersRecord plus later ones), then
fetches from there. A new leader or epoch, SNAPSHOT_NOT_FOUND or POSITION_OUT_OF_RANGE starts over
with a Fetch. The leader's core checks epoch/leadership/id; its driver reads the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.raft.base import CoreBase
from broker.raft.effects import AppendToLog, FlushLog, InstallSnapshot
from broker.raft.log import Entry, VoterSpec, VotersRecord
from broker.raft.messages import (
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
)
from broker.raft.roles import FollowerState, LeaderState, ObserverState, UnattachedState
from broker.raft.snapshot import CorruptSnapshotError, SnapshotId, decode_snapshot

FETCH_SNAPSHOT_MAX_BYTES = 1 << 20  # bytes asked per FetchSnapshot request


@dataclass(slots=True)
class ParkedFetch:
    source: int
    correlation_id: int
    request: FetchRequest
    epoch: int
    deadline_ms: int


@dataclass(slots=True)
class SnapshotFetch:
    """A KIP-630 snapshot being fetched from ``leader`` in ``epoch``: the bytes so far."""

    snapshot_id: SnapshotId
    leader: int
    epoch: int
    chunks: list[bytes] = field(default_factory=list)
    position: int = 0


class ReplicationHandlers(CoreBase):
    _parked: dict[int, ParkedFetch]
    _last_sent_high_watermark: dict[int, int]
    _snapshot_fetch: SnapshotFetch | None
    latest_snapshot: SnapshotId | None
    snapshot_chunk_bytes: int

    def _init_replication(self) -> None:
        self._parked = {}
        self._last_sent_high_watermark = {}
        self._snapshot_fetch = None
        self.snapshot_chunk_bytes = FETCH_SNAPSHOT_MAX_BYTES

    # -- leader side -----------------------------------------------------------------------------
    def _fetch_error(self, request: FetchRequest | FetchSnapshotRequest) -> ErrorCode | None:
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
        snapshot = self.latest_snapshot
        diverging = None
        if snapshot is not None and request.fetch_offset < self.log.start_offset:
            self._respond_snapshot_needed(source, correlation_id, snapshot)
            return
        diverging = self._diverging_epoch(request)
        if diverging is not None and snapshot is not None and diverging.end_offset < self.log.start_offset:
            # The follower would have to truncate below what this log still holds: KIP-630 says
            # fetch the snapshot instead.
            self._respond_snapshot_needed(source, correlation_id, snapshot)
            return
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

    def _respond_snapshot_needed(self, source: int, correlation_id: int, snapshot: SnapshotId) -> None:
        """KIP-630: FetchOffset is below the log start offset: answer with the snapshot id."""
        response = FetchResponse(
            ErrorCode.NONE,
            self.high_watermark,
            LeaderIdAndEpoch(self.quorum.leader_id, self.epoch),
            log_start_offset=self.log.start_offset,
            snapshot_id=snapshot,
        )
        self._effects.send(source, correlation_id, response)

    def _handle_fetch_snapshot_request(
        self, source: int, correlation_id: int, request: FetchSnapshotRequest, now_ms: int
    ) -> None:
        """KIP-630 FetchSnapshot on the leader: the same cluster-id/epoch/leadership checks as
        Fetch, SNAPSHOT_NOT_FOUND for an id newer than the newest snapshot; otherwise the driver
        reads up to ``max_bytes`` from ``position`` of the file when it sends the answer."""
        error = self._fetch_error(request)
        snapshot = self.latest_snapshot
        if error is None and (snapshot is None or request.snapshot_id > snapshot):
            error = ErrorCode.SNAPSHOT_NOT_FOUND
        leader = LeaderIdAndEpoch(self.quorum.leader_id, self.epoch)
        if error is not None:
            self._effects.send(source, correlation_id, FetchSnapshotResponse(error, leader, request.snapshot_id))
            return
        max_bytes = min(request.max_bytes, FETCH_SNAPSHOT_MAX_BYTES)
        response = FetchSnapshotResponse(
            ErrorCode.NONE, leader, request.snapshot_id, position=request.position, max_bytes=max_bytes
        )
        self._effects.send(source, correlation_id, response)

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
        if response.snapshot_id is not None:
            # KIP-630: our fetch offset is below the leader's log start: fetch its snapshot first.
            fetch = self._snapshot_fetch
            if fetch is None or fetch.snapshot_id != response.snapshot_id or fetch.epoch != state.epoch:
                self._snapshot_fetch = SnapshotFetch(response.snapshot_id, source, state.epoch)
            return
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

    def _handle_fetch_snapshot_response(self, source: int, response: FetchSnapshotResponse, now_ms: int) -> None:
        """KIP-630 follower side: append the chunk; once whole, check and install the snapshot."""
        leader = response.current_leader
        if self._maybe_handle_common_response(leader.leader_id, leader.leader_epoch, now_ms):
            self._snapshot_fetch = None
            return
        state = self.quorum.state
        fetch = self._snapshot_fetch
        if (
            fetch is None
            or not isinstance(state, FollowerState)
            or state.leader != source
            or fetch.epoch != state.epoch
            or response.snapshot_id != fetch.snapshot_id
        ):
            self._requests.on_failure(source, now_ms)
            return
        if response.error_code != ErrorCode.NONE or response.position != fetch.position or response.size < 0:
            if response.error_code in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
                self._snapshot_fetch = None  # Fetch again: the leader names its current snapshot
            self._requests.on_failure(source, now_ms)
            return
        self._requests.on_success(source)
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        if response.data:
            fetch.chunks.append(response.data)
            fetch.position += len(response.data)
        if fetch.position < response.size:
            if not response.data:
                self._snapshot_fetch = None  # no progress: start over
            return
        self._snapshot_fetch = None
        data = b"".join(fetch.chunks)
        try:
            snapshot = decode_snapshot(fetch.snapshot_id, data)
        except CorruptSnapshotError:
            return  # fetched bytes that do not check out: Fetch again, which names the snapshot again
        self._install_snapshot(fetch.snapshot_id, data, snapshot.voters, now_ms)

    def _install_snapshot(self, snapshot_id: SnapshotId, data: bytes, voters: object, now_ms: int) -> None:
        """Make the log start at the snapshot's end offset; the voter set is the snapshot's
        VotersRecord (KIP-853) plus any later one still in the log."""
        end = snapshot_id.end_offset
        cut = max(end, self.high_watermark)
        if self.log.end_offset > cut:
            self._truncate_log(cut)  # an uncommitted tail that may not follow the snapshot
        self.log.delete_prefix(end, snapshot_id.epoch)
        self.latest_snapshot = snapshot_id
        records: list[tuple[int, VotersRecord]] = []
        if voters is not None:
            specs = []
            for voter in voters.voters:  # type: ignore[attr-defined]
                endpoint = voter.endpoints[0] if voter.endpoints else None
                host, port = (endpoint.host, endpoint.port) if endpoint is not None else ("", 0)
                specs.append(VoterSpec(voter.voter_id, bytes(voter.directory_id), host, port))
            records.append((end - 1, VotersRecord(tuple(specs))))
        self._voter_records = records + [(o, r) for o, r in self._voter_records if o >= end]
        self._refresh_voters(now_ms)
        self._effects.persist(InstallSnapshot(snapshot_id, data))
        self._effects.persist(FlushLog(self.log.end_offset))
        if self.quorum.update_high_watermark(min(end, self.log.end_offset)):
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
        fetch = self._snapshot_fetch
        if fetch is not None:
            if isinstance(state, FollowerState) and fetch.leader == target and fetch.epoch == state.epoch:
                snapshot_request = FetchSnapshotRequest(
                    self.cluster_id, self.local_id, self.epoch, fetch.snapshot_id, fetch.position,
                    self.snapshot_chunk_bytes,
                )  # fmt: skip
                self._effects.send(target, self._requests.on_send(target, now_ms), snapshot_request)
                return
            self._snapshot_fetch = None  # another leader or epoch: Fetch from the start again
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
