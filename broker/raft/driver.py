"""``RaftDriver``: runs one ``RaftCore`` against sockets, timers, the metadata log and the
``quorum-state`` file (KIP-595; the core's I/O edge; docs/architecture.md, "The house style").

One owning task (``raft-driver``) is the only caller of the core. Everything else puts events in
its inbox: inbound requests from the network handlers (``broker.api.raft``), responses and failures
of outbound requests, ``append`` and ``resign``. For each event it calls the core once and executes
the returned ``StepResult`` completely before the next event (``broker.raft.effects``):

1. ``persist`` in order, each durable before the next (quorum-state: atomic replace; log:
   write, truncate, fsync) - on the event loop thread, like the broker's other file I/O;
2. ``send``: a response is turned into its wire body right there, in the owning task (a Fetch
   response's batches are read from the log file before any later step can truncate it), and
   resolves the handler waiting on it (matched by the driver-assigned correlation id of the
   inbound request); a request goes to the peer's connection (``broker.raft.voter_peers``) in
   a task of its own whose response or failure (``request_failed``) comes back through the inbox;
3. ``notify``: a higher high watermark hands what it committed to the listeners (per-entry
   listeners one entry at a time, batch listeners all of it as one batch), releases those
   payloads from the in-memory log (the file keeps them; Fetch answers are read from it), then
   resolves the ``append`` futures it commits; a ``FatalError`` stops the driver and calls
   ``on_fatal``.

Failures, by kind:

* A persist that fails, a ``FatalError`` of the core, a broken core invariant (AssertionError) or
  a committed-entry listener that raises stop the driver (``fatal_error``, ``on_fatal``). A
  listener failure is fatal because the state built from the log (the metadata image) would
  otherwise silently miss that entry and diverge from the other nodes, as Kafka treats a
  metadata-apply fault on a controller as fatal. At start-up the same failure makes ``start``
  raise ``RaftStoppedError``.
* Any other exception while the core handles one inbound message affects that message only: a
  request is answered UNKNOWN_SERVER_ERROR, a response is dropped (the core retries), and the
  effects the core recorded before the exception are still executed, so disk matches memory.
  Malformed requests never get that far (``broker.raft.rpc`` answers them INVALID_REQUEST).
* At most ``MAX_PENDING_INBOUND`` inbound requests may wait at once; beyond that
  ``handle_request`` raises ``RaftBusyError`` at once (the handler closes the connection, which
  the sending replica's core treats as a failed request and backs off). The task handles at most
  ``EVENTS_PER_TURN`` events before it runs due timers and yields to the event loop.

Snapshots (KIP-630) are ``broker.raft.snapshot_keeper.SnapshotKeeper``'s: after committed
entries are delivered it may start one (captured on the loop, written in an executor); once it is
durable the core learns of it and the retention pass may delete the log below it
(``DeleteLogPrefix``). ``start`` loads the newest valid snapshot and replays only the tail, as
one batch up to the high watermark it knows; a clean ``shutdown`` may write one more.

Timers: between events the task sleeps until ``core.next_deadline_ms`` and then calls ``tick``.
Appends wait for commitment (KIP-595 "Client Interactions": *a record append ... does not return
until the leader's high watermark passes the offset of the appended record*) and fail with
``NotLeaderError`` when this replica stops being the leader first. When the driver stops, every
waiter fails (principle 10): appends and inbound requests with ``RaftStoppedError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.log.config import system_clock_ms
from broker.network.dial import Dialer
from broker.network.peer import PeerConnection
from broker.raft.config import RaftConfig
from broker.raft.core import NotLeaderError, RaftCore
from broker.raft.effects import (
    AppendToLog,
    DeleteLogPrefix,
    FatalError,
    FlushLog,
    HighWatermarkAdvanced,
    InstallSnapshot,
    PersistQuorumState,
    StepResult,
    TruncateLog,
)
from broker.raft.log import Entry, VoterSpec
from broker.raft.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Inbound,
    Message,
    Request,
    Response,
    VoteRequest,
    is_response,
)
from broker.raft.metrics import WindowedStat
from broker.raft.rpc import (
    CONTROLLER_LISTENER_NAME,
    describe_quorum_from_wire,
    error_response_to_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from broker.raft.snapshot import RetentionPolicy, SnapshotId, SnapshotPolicy
from broker.raft.snapshot_keeper import SnapshotCapture, SnapshotKeeper, SnapshotLoad
from broker.raft.store import (
    MetadataLog,
    QuorumStateFile,
    StoreError,
    decode_entries,
    load_newest_valid,
    voters_from_control,
)
from broker.raft.voter_peers import VoterPeers
from pyspark_log.wire.api_keys import ApiKey

log = logging.getLogger(__name__)

CommittedListener = Callable[[int, bytes], None]
CommittedBatchListener = Callable[[Sequence[tuple[int, bytes]]], None]  # [(offset, payload), ...]
MAX_PENDING_INBOUND = 1024
EVENTS_PER_TURN = 64
_MAX_INCOMING_BATCHES = 4096
_IDLE_SAMPLE_WINDOW_MS = 30_000
_UNKNOWN_SERVER_ERROR = -1
_REQUEST_API_KEYS: dict[type, int] = {
    VoteRequest: ApiKey.VOTE,
    BeginQuorumEpochRequest: ApiKey.BEGIN_QUORUM_EPOCH,
    EndQuorumEpochRequest: ApiKey.END_QUORUM_EPOCH,
    FetchRequest: ApiKey.FETCH,
    DescribeQuorumRequest: ApiKey.DESCRIBE_QUORUM,
    FetchSnapshotRequest: ApiKey.FETCH_SNAPSHOT,
}


def _snapshot_log_mismatch(snapshot_id: SnapshotId | None, log_start_offset: int) -> str | None:
    """Why the newest valid snapshot and the log cannot rebuild the state (a gap), or None."""
    if snapshot_id is not None and log_start_offset > snapshot_id.end_offset:
        return f"the log starts at {log_start_offset} beyond the newest valid snapshot {snapshot_id}"
    if snapshot_id is None and log_start_offset > 0:
        return f"the log starts at {log_start_offset} and there is no valid snapshot"
    return None


def _listener_failure(what: str, exc: Exception) -> str:
    return (
        f"applying committed metadata {what} failed ({exc!r}); stopping so this node's metadata does not "
        "diverge from the log"
    )


class RaftStoppedError(RuntimeError):
    """The driver stopped (shutdown or fatal error) before the operation completed."""


class RaftBusyError(RuntimeError):
    """``MAX_PENDING_INBOUND`` inbound requests are already waiting: this one is refused."""


@dataclass(slots=True)
class _PendingAppend:
    last_offset: int
    epoch: int
    future: asyncio.Future[int]


class RaftDriver:
    """Runs one replica of the metadata quorum (voter or observer); see the module docstring."""

    def __init__(
        self,
        config: RaftConfig,
        node_id: int,
        cluster_id: str | None,
        metadata_dir: Path,
        *,
        clock_ms: Callable[[], int] = system_clock_ms,
        rng: random.Random | None = None,
        on_fatal: Callable[[str], None] | None = None,
        dialer: Dialer | None = None,
        snapshot_policy: SnapshotPolicy | None = None,
        retention_policy: RetentionPolicy | None = None,
        local_endpoint: tuple[str, int] | None = None,
        directory_id: bytes | None = None,
    ) -> None:
        """``dialer``: how Raft RPCs reach the other voters (their controller listener's security);
        ``snapshot_policy`` / ``retention_policy``: KIP-630 (Kafka's defaults when None).
        ``local_endpoint`` and ``directory_id``: this node's controller endpoint and metadata
        directory id; a voter whose entry in the voter set records another endpoint sends
        UpdateRaftVoter (KIP-853) to the leader once it knows one."""
        if config.node_id != node_id:
            raise ValueError(f"RaftConfig is for node {config.node_id}, not {node_id}")
        self.config = config
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.metadata_dir = Path(metadata_dir)
        self._clock_ms = clock_ms
        self._rng = rng or random.Random()
        self._on_fatal = on_fatal
        self._state_file = QuorumStateFile(self.metadata_dir, cluster_id)
        self._log = MetadataLog(self.metadata_dir, clock_ms)
        self._core: RaftCore | None = None
        self._listeners: list[CommittedListener] = []
        self._batch_listeners: list[CommittedBatchListener] = []
        self._delivered = 0  # entries below this offset were handed to the listeners
        self._inbox: deque[tuple[Any, ...]] = deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._inbound: dict[tuple[int, int], asyncio.Future[dict[str, Any]]] = {}
        self._next_inbound_id = 1
        self._appends: list[_PendingAppend] = []
        self._outbound: set[asyncio.Task[None]] = set()
        self._end_quorum_tasks: set[asyncio.Task[None]] = set()
        self._incoming_batches: dict[tuple[int, int], bytes] = {}
        known = {**config.bootstrap_servers, **config.voter_endpoints}
        endpoints = {voter: (ep.host, ep.port) for voter, ep in known.items()}
        self._peers = VoterPeers(
            node_id, endpoints, request_timeout_ms=config.request_timeout_ms, dialer=dialer, rng=self._rng,
            spawn=self._spawn,
        )  # fmt: skip
        self._snapshots = SnapshotKeeper(
            self.metadata_dir, self._log, node_id, clock_ms, snapshot_policy=snapshot_policy,
            retention_policy=retention_policy,
        )  # fmt: skip
        self._local_endpoint = local_endpoint
        self._directory_id = directory_id
        self._update_task: asyncio.Task[None] | None = None
        self._replica_directories: dict[int, bytes] = {}  # replica id -> directory id its Fetch v17 named
        self._update_retry_at_ms = 0
        self._leader_known = asyncio.Event()
        self._idle_ratio = WindowedStat(_IDLE_SAMPLE_WINDOW_MS)
        self.fatal_error: str | None = None

    # -- views -----------------------------------------------------------------------------------
    @property
    def core(self) -> RaftCore:
        if self._core is None:
            raise RuntimeError("RaftDriver.start has not run")
        return self._core

    @property
    def leader_id(self) -> int:
        return self._core.leader_id if self._core is not None else -1

    @property
    def epoch(self) -> int:
        return self._core.epoch if self._core is not None else 0

    @property
    def is_leader(self) -> bool:
        return self._core is not None and self._core.is_leader and self.fatal_error is None

    @property
    def high_watermark(self) -> int:
        return self._core.high_watermark if self._core is not None else 0

    @property
    def snapshots_written(self) -> int:
        return self._snapshots.written

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def voter_endpoints(self) -> dict[int, tuple[str, int]]:
        """Each voter's endpoint: the voter set in effect (KIP-853), else ``controller.quorum.voters``."""
        if self._core is None:
            return {voter: (ep.host, ep.port) for voter, ep in self.config.voter_endpoints.items()}
        return {v.voter_id: (v.host, v.port) for v in self.voter_specs() if v.port}

    def add_committed_listener(self, listener: CommittedListener) -> None:
        """``listener(offset, payload)`` for every committed data entry, in order, once (register
        before ``start``: the committed prefix on disk is replayed to it then)."""
        self._listeners.append(listener)

    def add_batch_listener(self, listener: CommittedBatchListener) -> None:
        """``listener(entries)`` with the committed data entries ``(offset, payload)`` in order,
        each once, a batch per call (register before ``start``): at start-up the whole committed
        tail after the snapshot is one batch, later each advance of the high watermark delivers
        what it committed as one. Kafka's ``RaftClient.Listener.handleCommit`` gets batches the
        same way, and its ``MetadataLoader`` publishes one image per batch, none before it caught
        up at start-up."""
        self._batch_listeners.append(listener)

    def set_snapshot_handler(self, capture: SnapshotCapture, load: SnapshotLoad) -> None:
        """KIP-630 (register before ``start``): ``capture()`` returns, on the loop, a thunk that
        encodes the state as of every entry delivered so far into snapshot records (it runs in
        an executor, so it must only read what ``capture`` froze); ``load(end_offset, records)``
        replaces the state by a snapshot's (at start-up)."""
        self._snapshots.set_handler(capture, load)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the quorum state, the newest valid snapshot and the log, replay the committed
        tail, start the task."""
        if self._core is not None:
            raise RuntimeError("RaftDriver.start called twice")
        stored = self._state_file.read()
        loop = asyncio.get_running_loop()
        snapshot = await loop.run_in_executor(None, load_newest_valid, self.metadata_dir)
        if snapshot is not None and snapshot.snapshot_id.end_offset == 0:
            snapshot = None  # KIP-853's bootstrap checkpoint (0-0): read by bootstrap.py for its voter set only
        entries = self._log.open()
        now_ms = self._clock_ms()
        problem = _snapshot_log_mismatch(snapshot.snapshot_id if snapshot else None, self._log.start_offset)
        if problem is not None:
            self._log.close()
            raise StoreError(f"metadata dir {self.metadata_dir} is inconsistent: {problem}")
        snapshot_head = snapshot is not None and bool(entries) and entries[0].offset < snapshot.snapshot_id.end_offset
        if snapshot is not None and snapshot_head:
            entries = entries[snapshot.snapshot_id.end_offset - entries[0].offset :]  # the log is longer
        try:
            core = RaftCore(
                self.config,
                stored_state=stored,
                log_entries=entries,
                cluster_id=self.cluster_id,
                rng=self._rng,
                now_ms=now_ms,
                snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
                snapshot_voters=voters_from_control(snapshot.voters) if snapshot and snapshot.voters else None,
            )
        except ValueError as exc:
            self._log.close()
            raise StoreError(f"metadata dir {self.metadata_dir} is inconsistent: {exc}") from exc
        if self._log.start_offset < core.log.start_offset:
            # The file still holds what the snapshot covers (or nothing: a restore from a bare
            # snapshot file): it continues at the snapshot's end offset.
            self._log.delete_prefix(core.log.start_offset)
        if snapshot is not None:
            self._snapshots.load(snapshot.snapshot_id.end_offset, snapshot.records)
            self._delivered = snapshot.snapshot_id.end_offset
            log.info(
                "raft: node %d loaded snapshot %s (%d records)", self.node_id, snapshot.snapshot_id,
                len(snapshot.records),
            )  # fmt: skip
        self._core = core
        log.info(
            "raft: node %d starts as %s in epoch %d (log end %d, high watermark %d, voters %s)",
            self.node_id, core.role, core.epoch, core.log.end_offset, core.high_watermark, sorted(self.config.voters),
        )  # fmt: skip
        failure = self._deliver_committed(core.high_watermark)
        if failure is not None:
            self.fatal_error = failure
            log.critical("raft: node %d cannot start: %s", self.node_id, failure)
            self._log.close()
            raise RaftStoppedError(failure)
        self._execute(core.start(now_ms))
        if self.fatal_error is None:
            self._apply_retention(now_ms)  # a log kept longer than the policy allows (an older run's)
        self._task = asyncio.create_task(self._run(), name="raft-driver")

    async def shutdown(self, graceful: bool = True) -> None:
        """Stop. ``graceful``: a leader first resigns (EndQuorumEpoch to its preferred successors)
        and waits up to ``quorum.request.timeout.ms`` for their answers."""
        if self._task is None:
            self._log.close()
            return
        if graceful and self.running and self.is_leader:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._post(("resign", done))
            with contextlib.suppress(RaftStoppedError):
                await done
            if self._end_quorum_tasks:
                await asyncio.wait(set(self._end_quorum_tasks), timeout=self.config.request_timeout_ms / 1000)
        self._stopping = True
        self._wakeup.set()
        task, self._task = self._task, None
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # A snapshot being written finishes (a crash would leave only a .part file); a clean stop
        # may write one more.
        if graceful and self.fatal_error is None:
            await self._snapshots.at_shutdown(self.core, self._delivered)
        else:
            await self._snapshots.finish()
        self._fail_waiters(RaftStoppedError("the metadata quorum driver stopped"))
        for outbound in list(self._outbound):
            outbound.cancel()
        await asyncio.gather(*self._outbound, return_exceptions=True)
        await self._peers.close()
        self._log.close()
        log.info("raft: node %d stopped in epoch %d", self.node_id, self.epoch)

    async def wait_for_leader(self, timeout_ms: int) -> int:
        """The leader id once one is known; TimeoutError after ``timeout_ms``."""
        async with asyncio.timeout(timeout_ms / 1000):
            while self.leader_id < 0:
                self._leader_known.clear()
                await self._leader_known.wait()
        return self.leader_id

    # -- operations ------------------------------------------------------------------------------
    async def append(self, payloads: Sequence[bytes]) -> int:
        """Append on the leader; returns the last offset once committed and delivered to the
        listeners. NotLeaderError if this replica is not (or stops being) the leader first."""
        if not payloads:
            raise ValueError("append of no records")
        if not self.is_leader:
            raise NotLeaderError(self.leader_id, self.epoch)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._post(("append", [bytes(p) for p in payloads], future))
        return await future

    async def handle_request(self, source: int, message: Request) -> dict[str, Any]:
        """Hand an inbound request to the core and wait for the wire body of its answer (a parked
        Fetch waits up to its MaxWaitTimeMs). RaftStoppedError if the driver stops first;
        RaftBusyError at once if ``MAX_PENDING_INBOUND`` requests are waiting already."""
        if not self.running:
            raise RaftStoppedError("the metadata quorum driver is not running")
        if len(self._inbound) >= MAX_PENDING_INBOUND:
            raise RaftBusyError(f"{len(self._inbound)} Raft requests are waiting already")
        correlation_id = self._next_inbound_id
        self._next_inbound_id = (correlation_id + 1) & 0x7FFF_FFFF
        key = (source, correlation_id)
        if isinstance(message, FetchRequest) and message.replica_directory_id is not None and message.replica_id >= 0:
            self._replica_directories[message.replica_id] = message.replica_directory_id  # KIP-853, Fetch v17
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._inbound[key] = future
        self._post(("inbound", Inbound(source, correlation_id, message)))
        try:
            async with asyncio.timeout((self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000):
                return await future
        except TimeoutError:
            raise RaftStoppedError(f"no answer to {type(message).__name__} from the core") from None
        finally:
            self._inbound.pop(key, None)

    def error_body(self, api_key: int, error_code: int) -> dict[str, Any]:
        """A wire body answering a request of ``api_key`` with ``error_code`` (e.g. INVALID_REQUEST),
        with this replica's leader and epoch."""
        return error_response_to_wire(api_key, error_code, self.leader_id, self.epoch)

    def voter_specs(self) -> tuple[VoterSpec, ...]:
        """The voter set in effect with directory ids and endpoints: the last VotersRecord in the
        log (KIP-853), else the static ``controller.quorum.voters`` (directory ids unknown: zero)."""
        record = self.core.current_voters_record() if self._core is not None else None
        if record is not None:
            return tuple(record.voters)
        return tuple(VoterSpec(v, bytes(16), ep.host, ep.port) for v, ep in sorted(self.config.voter_endpoints.items()))

    def describe_quorum(self) -> dict[str, Any]:
        """The DescribeQuorum response body as this replica can answer it (an error unless it is
        the leader; ``describe_quorum_anywhere`` asks the leader)."""
        return self._describe_body(self.core.describe_quorum(self._clock_ms()))

    def _describe_body(self, message: DescribeQuorumResponse) -> dict[str, Any]:
        """DescribeQuorum v2: voters' directory ids from the voter set, observers' from their Fetch v17."""
        return response_to_wire(message, voters=self.voter_specs(), observer_directories=self._replica_directories)

    async def describe_quorum_anywhere(self) -> dict[str, Any]:
        """DescribeQuorum answered by the leader: locally, or forwarded to it (as Kafka's brokers
        forward it to the active controller). The leader's answer is passed on as it is (v2)."""
        local = self.core.describe_quorum(self._clock_ms())
        peer = self._peers.get(local.leader_id)
        if local.error_code == ErrorCode.NONE or peer is None:
            return self._describe_body(local)
        try:
            api_key, version, body = request_to_wire(DescribeQuorumRequest())
            answer = await peer.request(api_key, version, body)
            describe_quorum_from_wire(answer)  # checks the answer is one
            return dict(answer)
        except Exception as exc:  # noqa: BLE001 - any failure of the forwarded request: "no leader to ask now"
            log.info("raft: DescribeQuorum forwarded to leader %d failed: %r", local.leader_id, exc)
            return response_to_wire(DescribeQuorumResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, self.epoch, -1))

    # -- KIP-853 voter changes ---------------------------------------------------------------------
    async def change_voters(self, operation: str, spec: VoterSpec, timeout_ms: int) -> tuple[int, str | None]:
        """AddRaftVoter (``add``), RemoveRaftVoter (``remove``) or UpdateRaftVoter (``update``) on
        the leader: ``(error_code, error_message)`` once the new VotersRecord is committed (Kafka
        answers only then), REQUEST_TIMED_OUT after ``timeout_ms``, NOT_LEADER_OR_FOLLOWER if this
        replica is not (or stops being) the leader first. The core decides and refuses
        (``RaftCore.add_voter`` / ``remove_voter`` / ``update_voter``)."""
        if not self.running:
            raise RaftStoppedError("the metadata quorum driver is not running")
        future: asyncio.Future[tuple[int, str | None]] = asyncio.get_running_loop().create_future()
        self._post(("voters", operation, spec, future))
        try:
            async with asyncio.timeout(max(timeout_ms, 1) / 1000):
                return await future
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT, f"the voter change was not committed within {timeout_ms} ms"
        except NotLeaderError:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, "the leader changed before the voter change was committed"

    async def forward_to_leader(
        self, api_key: int, version: int, body: Mapping[str, Any], timeout_ms: int
    ) -> Mapping[str, Any] | None:
        """Send a request to the quorum leader and return its answer (None: no leader known or
        reachable now), as Kafka's brokers forward AddRaftVoter/RemoveRaftVoter to the active
        controller. A connection of its own: the answer may wait up to ``timeout_ms``."""
        leader = self.leader_id
        if leader < 0 or leader == self.node_id:
            return None
        return await self._peers.forward(leader, api_key, version, body, timeout_ms)

    def metrics(self) -> dict[str, float | int | str]:
        """KIP-595 raft-manager metrics: the core's, plus the driver's poll-idle-ratio-avg and
        number-unknown-voter-connections."""
        now_ms = self._clock_ms()
        values = self.core.metrics(now_ms)
        values["poll-idle-ratio-avg"] = self._idle_ratio.avg(now_ms)
        values["number-unknown-voter-connections"] = self._peers.unknown_connections()
        return values

    # -- the owning task -------------------------------------------------------------------------
    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A background task of the driver's (outbound requests, connection upkeep): cancelled
        and awaited by ``shutdown``."""
        task = asyncio.create_task(work, name=name)
        self._outbound.add(task)
        task.add_done_callback(self._outbound.discard)
        return task

    def _post(self, event: tuple[Any, ...]) -> None:
        self._inbox.append(event)
        self._wakeup.set()

    async def _run(self) -> None:
        core = self.core
        try:
            while not self._stopping and self.fatal_error is None:
                busy_from = self._clock_ms()
                for _ in range(EVENTS_PER_TURN):
                    if not self._inbox or self._stopping or self.fatal_error is not None:
                        break
                    self._process(self._inbox.popleft())
                now_ms = self._clock_ms()
                deadline = core.next_deadline_ms(now_ms)
                if deadline is not None and deadline <= now_ms and self.fatal_error is None:
                    self._execute(core.tick(now_ms))
                    deadline = core.next_deadline_ms(self._clock_ms())
                if self._stopping or self.fatal_error is not None:
                    break
                self._wakeup.clear()
                if self._inbox:
                    await asyncio.sleep(0)  # let the network and the other tasks run between turns
                    continue
                idle_from = self._clock_ms()
                timeout_s = None if deadline is None else max(deadline - idle_from, 1) / 1000
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout_s):
                        await self._wakeup.wait()
                end = self._clock_ms()
                if end > busy_from:
                    self._idle_ratio.record((end - idle_from) / (end - busy_from), end)
        except Exception as exc:
            log.exception("raft: the driver failed")
            self._fatal(f"raft driver failed: {exc!r}")

    def _process(self, event: tuple[Any, ...]) -> None:
        try:
            self._process_event(event)
        except BaseException as exc:
            # Fatal for the driver (_run); the event is out of the inbox already, so its own waiter
            # (an append or a resign) is failed here, as _fail_waiters fails the others.
            future = event[-1]
            if isinstance(future, asyncio.Future) and not future.done():
                future.set_exception(RaftStoppedError(f"raft driver failed: {exc!r}"))
            raise

    def _process_event(self, event: tuple[Any, ...]) -> None:
        core = self.core
        kind = event[0]
        now_ms = self._clock_ms()
        if kind == "inbound":
            inbound = event[1]
            try:
                step = core.handle(inbound, now_ms)
            except AssertionError:
                raise  # a broken invariant of the core: fatal (_run)
            except Exception:  # noqa: BLE001 - logged there; one bad message must not stop the node
                self._inbound_failed(inbound, now_ms)
                return
            self._execute(step)
        elif kind == "failed":
            self._execute(core.request_failed(event[1], event[2], now_ms))
        elif kind == "append":
            payloads, future = event[1], event[2]
            if future.done():
                return
            try:
                result = core.append(payloads, now_ms)
            except NotLeaderError as exc:
                future.set_exception(exc)
                return
            self._appends.append(_PendingAppend(result.last_offset, result.epoch, future))
            self._execute(result.step)
        elif kind == "voters":
            self._voter_change_event(event[1], event[2], event[3], now_ms)
        elif kind == "resign":
            future = event[1]
            self._execute(core.resign(now_ms))
            if not future.done():
                future.set_result(None)
        elif kind == "snapshot":
            self._snapshots.created(core, event[1])
            self._apply_retention(now_ms)

    def _voter_change_event(
        self, operation: str, spec: VoterSpec, future: asyncio.Future[tuple[int, str | None]], now_ms: int
    ) -> None:
        if future.done():
            return
        core = self.core
        fetched_with = self._replica_directories.get(spec.voter_id)
        if operation == "add" and fetched_with is not None and fetched_with != spec.directory_id:
            # KIP-853: the observer to add is the replica (id and directory) that fetches
            future.set_result(
                (ErrorCode.REQUEST_TIMED_OUT, f"Replica {spec.voter_id} fetches with another directory id")
            )
            return
        if operation == "add":
            result = core.add_voter(spec, now_ms)
        elif operation == "remove":
            directory_id = spec.directory_id if spec.directory_id != bytes(16) else None
            result = core.remove_voter(spec.voter_id, directory_id, now_ms)
        else:
            result = core.update_voter(spec, now_ms)
        if result.append is None:
            future.set_result((int(result.error_code), result.error_message))
            return
        log.info("raft: voter change (%s voter %d) appended at offset %d", operation, spec.voter_id,
                 result.append.last_offset)  # fmt: skip
        committed: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future[int]) -> None:
            if future.done():
                return
            if f.cancelled() or f.exception() is not None:
                error = f.exception() if not f.cancelled() else None
                if isinstance(error, NotLeaderError):
                    future.set_result((ErrorCode.NOT_LEADER_OR_FOLLOWER, "the leader changed before the commit"))
                else:
                    future.set_result((ErrorCode.UNKNOWN_SERVER_ERROR, f"the quorum driver stopped: {error!r}"))
            else:
                future.set_result((ErrorCode.NONE, None))

        committed.add_done_callback(done)
        self._appends.append(_PendingAppend(result.append.last_offset, result.append.epoch, committed))
        self._execute(result.append.step)

    def _maybe_update_voter(self) -> None:
        """KIP-853 UpdateRaftVoter: this voter's entry records another endpoint than the one it
        listens on now (its listeners changed since it was added): tell the leader, retried at
        most every ``quorum.request.timeout.ms`` until the voter set records the new one."""
        if self._local_endpoint is None or self._directory_id is None or self._stopping:
            return
        if self._update_task is not None and not self._update_task.done():
            return
        core = self.core
        record = core.current_voters_record()
        spec = record.spec(self.node_id) if record is not None else None
        if spec is None or spec.directory_id != self._directory_id or core.leader_id < 0:
            return
        wanted = VoterSpec(self.node_id, self._directory_id, *self._local_endpoint)
        now_ms = self._clock_ms()
        if spec == wanted or now_ms < self._update_retry_at_ms:
            return
        self._update_retry_at_ms = now_ms + self.config.request_timeout_ms
        self._update_task = self._spawn(self._update_voter(wanted), "raft-update-voter")

    async def _update_voter(self, wanted: VoterSpec) -> None:
        timeout_ms = self.config.request_timeout_ms
        if self.is_leader:
            code, message = await self.change_voters("update", wanted, timeout_ms)
        else:
            body = {
                "cluster_id": self.cluster_id,
                "current_leader_epoch": self.epoch,
                "voter_id": wanted.voter_id,
                "voter_directory_id": uuid.UUID(bytes=wanted.directory_id),
                "listeners": [{"name": CONTROLLER_LISTENER_NAME, "host": wanted.host, "port": wanted.port}],
                "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
            }
            answer = await self.forward_to_leader(ApiKey.UPDATE_RAFT_VOTER, 0, body, timeout_ms)
            code, message = (answer.get("error_code", 0), None) if answer is not None else (-1, "no leader reachable")
        log.info("raft: UpdateRaftVoter of node %d to %s:%d: %s %s", wanted.voter_id, wanted.host, wanted.port,
                 "accepted" if code == 0 else f"error {code}", message or "")  # fmt: skip

    def _execute(self, step: StepResult) -> None:
        """Execute one step: persist (durably, in order), then send, then notify."""
        try:
            for effect in step.persist:
                if isinstance(effect, PersistQuorumState):
                    self._state_file.write(effect.state)
                elif isinstance(effect, AppendToLog):
                    self._log.append(effect.entries, self._incoming_batches)
                    for entry in effect.entries:
                        self._incoming_batches.pop((entry.offset, entry.epoch), None)
                elif isinstance(effect, TruncateLog):
                    self._log.truncate(effect.end_offset)
                elif isinstance(effect, FlushLog):
                    self._log.flush()
                elif isinstance(effect, DeleteLogPrefix):
                    self._log.delete_prefix(effect.start_offset)
                elif isinstance(effect, InstallSnapshot):
                    self._delivered = self._snapshots.install(effect, self._delivered)
        except (OSError, StoreError) as exc:
            # Nothing of this step may be sent: a replica that cannot persist must stop.
            self._fatal(f"cannot write the metadata dir {self.metadata_dir}: {exc}")
            return
        # a VotersRecord appended in this step: its new voters are sent to next
        self._peers.sync(self.core.current_voters_record())
        for send in step.send:
            if is_response(send.message):
                self._answer(send.destination, send.correlation_id, send.message)
            else:
                self._request(send.destination, send.correlation_id, send.message)
        for notification in step.notify:
            if isinstance(notification, HighWatermarkAdvanced):
                failure = self._deliver_committed(notification.high_watermark)
                if failure is not None:
                    self._fatal(failure)
                    return
            elif isinstance(notification, FatalError):
                self._fatal(f"{notification.error_code.name}: {notification.reason}")
                return
        self._after_step()

    # -- KIP-630 snapshots -------------------------------------------------------------------------
    def _maybe_snapshot(self) -> None:
        if not self._stopping:
            self._snapshots.maybe_start(self.core, self._delivered, self._snapshot_written)

    def _snapshot_written(self, snapshot_id: SnapshotId) -> None:
        self._post(("snapshot", snapshot_id))

    def _apply_retention(self, now_ms: int) -> None:
        """Delete the log below the newest snapshot when ``metadata.max.retention.bytes/ms`` say
        so, and the snapshot files older than the new log start (never the newest snapshot)."""
        start = self._snapshots.retention_start(self.core, now_ms)
        if start is not None:  # a replica behind the new log start fetches the snapshot (FetchSnapshot)
            self._execute(self.core.delete_log_prefix(start))
            if self.fatal_error is None:
                self._snapshots.delete_old()

    def _inbound_failed(self, inbound: Inbound, now_ms: int) -> None:
        """The core raised while handling one message: answer a request UNKNOWN_SERVER_ERROR, drop
        a response, and still execute what the core recorded before (``tick`` drains it)."""
        message = inbound.message
        log.exception(
            "raft: handling %s from %d failed; %s", type(message).__name__, inbound.source,
            "dropped" if is_response(message) else "answered UNKNOWN_SERVER_ERROR",
        )  # fmt: skip
        api_key = _REQUEST_API_KEYS.get(type(message))
        future = self._inbound.get((inbound.source, inbound.correlation_id))
        if api_key is not None and future is not None and not future.done():
            future.set_result(self.error_body(api_key, _UNKNOWN_SERVER_ERROR))
        self._execute(self.core.tick(now_ms))

    def _after_step(self) -> None:
        core = self.core
        self._peers.sync(self.core.current_voters_record())
        self._maybe_update_voter()
        if core.leader_id >= 0:
            self._leader_known.set()
        if self._appends and not core.is_leader:
            error = NotLeaderError(core.leader_id, core.epoch)
            for pending in self._appends:
                if not pending.future.done():
                    pending.future.set_exception(error)
            self._appends.clear()

    def _answer(self, destination: int, correlation_id: int, message: Message) -> None:
        future = self._inbound.get((destination, correlation_id))
        if future is not None and not future.done():
            future.set_result(self._response_body(message))  # type: ignore[arg-type]

    def _response_body(self, message: Response) -> dict[str, Any]:
        """The wire body of a core response, built now: a Fetch response's records are the
        batches in the log file, which at this point holds exactly the core's log; a
        FetchSnapshot response's bytes are read from the snapshot file."""
        if isinstance(message, FetchSnapshotResponse) and message.error_code == ErrorCode.NONE:
            return response_to_wire(self._snapshots.read_chunk(message))
        if isinstance(message, DescribeQuorumResponse):
            return self._describe_body(message)
        if not isinstance(message, FetchResponse) or not message.records:
            return response_to_wire(message)
        try:
            return response_to_wire(message, self._log.read_batches)
        except (OSError, StoreError) as exc:
            log.warning("raft: cannot read the records of a Fetch answer: %s", exc)
            return self.error_body(ApiKey.FETCH, ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def _request(self, destination: int, correlation_id: int, message: Message) -> None:
        peer = self._peers.get(destination)
        if peer is None:
            log.info("raft: no endpoint for replica %d yet; asking the quorum for it", destination)
            self._peers.discover()
            self._post(("failed", destination, correlation_id))
            return
        task = self._spawn(self._send_request(peer, correlation_id, message), f"raft-to-{destination}")
        if isinstance(message, EndQuorumEpochRequest):
            self._end_quorum_tasks.add(task)
            task.add_done_callback(self._end_quorum_tasks.discard)

    async def _send_request(self, peer: PeerConnection, correlation_id: int, message: Message) -> None:
        """Send one request; its response, or ``failed`` whatever went wrong, goes to the inbox
        (a request the core never hears back about would stay in flight until it expires)."""
        name = type(message).__name__
        try:
            dynamic = self._directory_id is not None and bool(self.config.bootstrap_servers)
            api_key, version, body = request_to_wire(message, self._directory_id if dynamic else None)  # type: ignore[arg-type]
            answer = await peer.request(api_key, version, body)
            response = response_from_wire(api_key, answer, self._decode_records)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the core must hear of it to retry
            log.debug("raft: %s to %d failed: %r", name, peer.node_id, exc)
            self._post(("failed", peer.node_id, correlation_id))
            return
        self._post(("inbound", Inbound(peer.node_id, correlation_id, response)))

    def _decode_records(self, raw: Any) -> tuple[Entry, ...]:
        decoded = decode_entries(raw)
        if len(self._incoming_batches) > _MAX_INCOMING_BATCHES:
            self._incoming_batches.clear()
        for entry, batch in decoded:
            self._incoming_batches[(entry.offset, entry.epoch)] = batch
        return tuple(entry for entry, _ in decoded)

    def _deliver_committed(self, high_watermark: int) -> str | None:
        """Hand newly committed data entries to the listeners, then resolve committed appends.

        Everything below ``high_watermark`` not delivered yet is one batch: each per-entry
        listener sees its entries one by one, each batch listener the whole batch at once.
        Returns why the node must stop if a listener raised (nothing after the failing entry,
        or nothing of the failing batch, counts as delivered), else None."""
        core = self.core
        batch: list[tuple[int, bytes]] = []
        for offset in range(self._delivered, high_watermark):
            payload = core.log.entry(offset).payload
            if isinstance(payload, bytes):
                batch.append((offset, payload))
                self._snapshots.delivered(len(payload))
        for offset, payload in batch:
            for listener in self._listeners:
                try:
                    listener(offset, payload)
                except Exception as exc:
                    log.exception("raft: committed-entry listener failed at offset %d", offset)
                    self._delivered = offset
                    return _listener_failure(f"entry {offset}", exc)
        if batch:
            for batch_listener in self._batch_listeners:
                try:
                    batch_listener(batch)
                except Exception as exc:
                    log.exception("raft: committed-batch listener failed on %d..%d", batch[0][0], batch[-1][0])
                    return _listener_failure(f"entries {batch[0][0]}..{batch[-1][0]}", exc)
        self._delivered = max(self._delivered, high_watermark)
        core.release_payloads(self._delivered)  # memory: the bytes stay in the log file
        still: list[_PendingAppend] = []
        for pending in self._appends:
            if pending.last_offset < high_watermark:
                if not pending.future.done():
                    pending.future.set_result(pending.last_offset)
            else:
                still.append(pending)
        self._appends = still
        self._maybe_snapshot()
        return None

    def _fatal(self, reason: str) -> None:
        if self.fatal_error is not None:
            return
        self.fatal_error = reason
        log.critical("raft: node %d must stop: %s", self.node_id, reason)
        self._stopping = True
        self._wakeup.set()
        self._fail_waiters(RaftStoppedError(reason))
        if self._on_fatal is not None:
            self._on_fatal(reason)

    def _fail_waiters(self, error: Exception) -> None:
        for pending in self._appends:
            if not pending.future.done():
                pending.future.set_exception(error)
        self._appends.clear()
        for future in self._inbound.values():
            if not future.done():
                future.set_exception(error)
        while self._inbox:
            event = self._inbox.popleft()
            future = event[-1]
            if isinstance(future, asyncio.Future) and not future.done():
                future.set_exception(error)
