"""``OperationRunner``: runs a metadata operation where it belongs and waits until this node's
metadata shows it — the write path every control manager of ``QuorumController`` shares.

* **On the active controller** (the Raft leader): operations are serialized by one lock; the
  first operation of each leader epoch appends a no-op entry first (and, on a new quorum, the
  cluster id and the bootstrap records), so that every entry of earlier epochs has been applied
  before the operation validates against the state (KIP-595: a new leader's entries are
  committed only with one of its own epoch). The operation's records go to the log as one entry
  (``broker.metadata.records``: one entry is applied atomically), answered once committed and
  applied here. Kafka's ``QuorumController`` runs its control managers' operations the same way,
  one write event at a time.
* **Elsewhere** the operation is forwarded to the leader over the Kafka protocol
  (``broker.controller.forwarding``), retried on NOT_CONTROLLER, transport failures and unknown
  leaders until ``request_timeout_ms``; a request that was itself forwarded is answered
  NOT_CONTROLLER instead (one hop at most), also when this node leads again only in a later
  epoch than the one it arrived in (its sender may have retried it elsewhere meanwhile).
* **At most once per decision**: an operation is decided only by the leader of the epoch it
  started in, under the lock; once its records are appended, a lost leadership is
  NOT_CONTROLLER to the client (the outcome is unknown), never a second decision.
* **Waiting**: ``wait_until`` resumes after every entry this node applies (``MetadataLoader``),
  so a caller returns once its own image shows the change.

It holds the Raft driver, the operation lock, the epoch it last caught up in, the channels to the
controllers and the waiters on this node's image.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from broker import state_change
from broker.controller.errors import MetadataError
from broker.controller.forwarding import (
    ControllerChannel,
    ControllerChannels,
    ControllerUnavailable,
    NotActive,
    forwarded_request,
    unless_leader_moves,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import MetadataImage
from broker.metadata.loader import MetadataLoader
from broker.metadata.records import ClusterIdRecord, MetadataRecord, encode_records
from broker.network.dial import Dialer
from broker.raft.core import NotLeaderError
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")

Local = Callable[[ClusterState], tuple[list[MetadataRecord], T]]  # decide on the active controller
Remote = Callable[[ControllerChannel, int], Awaitable[T]]  # forward there (channel, timeout_ms)


class RaftDriverLike(Protocol):
    """What the controller uses of ``broker.raft.driver.RaftDriver`` (see the contract)."""

    @property
    def leader_id(self) -> int: ...

    @property
    def epoch(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...

    def add_committed_listener(self, listener: Callable[[int, bytes], None]) -> None: ...

    async def append(self, payloads: Sequence[bytes]) -> int: ...

    def voter_endpoints(self) -> dict[int, tuple[str, int]]: ...


class OperationRunner:
    """The shared write path of ``QuorumController`` (see the module docstring)."""

    def __init__(
        self,
        driver: RaftDriverLike,
        loader: MetadataLoader,
        *,
        cluster_id: str,
        node_id: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        clock_ms: Callable[[], int],
        dialer: Dialer | None,
        bootstrap: Sequence[MetadataRecord] = (),
    ) -> None:
        self._driver = driver
        self._loader = loader
        self._cluster_id = cluster_id
        self._node_id = node_id
        self._bootstrap = tuple(bootstrap)
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.clock_ms = clock_ms
        self._lock: asyncio.Lock | None = None
        self._caught_up_epoch = -1
        self._activation_hooks: list[Callable[[], None]] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._channels = ControllerChannels(dialer)  # registration, heartbeats, AlterPartition, forwarding
        self._voter_cursor = random.randrange(1 << 16)
        loader.add_listener(self._wake_waiters)

    # -- this node's metadata -----------------------------------------------------------------------
    @property
    def state(self) -> ClusterState:
        return self._loader.state

    @property
    def image(self) -> MetadataImage:
        return self._loader.image

    @property
    def is_leader(self) -> bool:
        return self._driver.is_leader

    @property
    def fatal_error(self) -> object:
        """The Raft driver's fatal error, if it has one and it is set (``RaftDriver.fatal_error``)."""
        return getattr(self._driver, "fatal_error", None)

    def _wake_waiters(self, old: MetadataImage, new: MetadataImage) -> None:
        del old, new
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_until(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        """Wait until ``predicate()`` holds after some applied entry (or now); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return predicate()
        return True

    async def await_image(self, predicate: Callable[[], bool], what: str) -> None:
        """``wait_until`` for ``request_timeout_ms``; REQUEST_TIMED_OUT when the image never shows ``what``."""
        if not await self.wait_until(predicate, self.request_timeout_ms):
            raise MetadataError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the active controller accepted the change, but this node's metadata does not show {what} yet",
            )

    # -- running an operation where it belongs ---------------------------------------------------------
    async def execute(self, local: Local[T], remote: Remote[T]) -> T:
        """Run on the active controller (here, or forwarded there); see the module docstring."""
        deadline = self.clock_ms() + self.request_timeout_ms
        last_problem = "no active controller is known"
        forwarded = forwarded_request.get()
        arrival_epoch = self._driver.epoch
        while True:
            if self._driver.is_leader and not (forwarded and self._driver.epoch != arrival_epoch):
                try:
                    return await self._run_locally(local, self._driver.epoch)
                except NotActive:
                    last_problem = "this node lost the leadership before the operation was decided"
                    if forwarded:  # the sender retries at the leader it learns next, not this node later
                        raise MetadataError(ErrorCode.NOT_CONTROLLER, last_problem) from None
            elif forwarded:
                raise MetadataError(ErrorCode.NOT_CONTROLLER, f"node {self._node_id} is not the active controller")
            else:
                channel = self.leader_channel()
                if channel is not None:
                    remaining = max(1, deadline - self.clock_ms())
                    try:
                        return await unless_leader_moves(remote(channel, remaining), lambda: self._driver.epoch)
                    except NotActive:
                        last_problem = f"controller {channel.host}:{channel.port} is not the active controller"
                    except ControllerUnavailable as exc:
                        last_problem = str(exc)
            if self.clock_ms() >= deadline:
                raise MetadataError(ErrorCode.REQUEST_TIMED_OUT, f"no active controller completed it: {last_problem}")
            await asyncio.sleep(self.retry_backoff_ms / 1000)

    def leader_channel(self) -> ControllerChannel | None:
        endpoint = self._driver.voter_endpoints().get(self._driver.leader_id)
        return self._channels.get(*endpoint) if endpoint is not None else None

    def any_controller_channel(self) -> ControllerChannel | None:
        """The leader's channel, else the next voter in turn (to reach the quorum at all)."""
        channel = self.leader_channel()
        if channel is not None:
            return channel
        endpoints = [e for _, e in sorted(self._driver.voter_endpoints().items())]
        if not endpoints:
            return None
        self._voter_cursor += 1
        return self._channels.get(*endpoints[self._voter_cursor % len(endpoints)])

    async def _run_locally(self, op: Local[T], epoch: int) -> T:
        """Decide and append ``op`` as the active controller of ``epoch``. ``NotActive`` when this
        node is not that any more by the time it holds the lock and has caught up (nothing of
        ``op`` was appended: the caller may retry). Once ``op``'s records are appended, losing the
        leadership before they commit is NOT_CONTROLLER to the client, whose outcome is unknown
        (a later leader may still commit them), as Kafka's controller answers; running ``op``
        again here could apply it twice."""
        async with self.op_lock():
            # an operation that waited for the lock across a leadership change must not be decided
            # in a later epoch: its sender may have retried it elsewhere meanwhile
            if not self._driver.is_leader or self._driver.epoch != epoch:
                raise NotActive
            await self.ensure_caught_up()
            if self._driver.epoch != epoch:
                raise NotActive
            records, result = op(self._loader.state)
            if records:
                try:
                    await self.append(records)
                except NotActive:
                    raise MetadataError(
                        ErrorCode.NOT_CONTROLLER,
                        f"node {self._node_id} lost the leadership before the change was committed; it may or may "
                        "not take effect",
                    ) from None
            return result

    def op_lock(self) -> asyncio.Lock:
        """The lock that serializes every change on the active controller (held around
        ``ensure_caught_up``, the decision and ``append``)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append ``records`` as one entry; its offset once committed. ``NotActive`` when this
        node is no longer the leader."""
        state = self._loader.state
        state_change.controller_decided(self._node_id, state.topics, state.topic_ids, records)
        try:
            return await self._driver.append([encode_records(records)])
        except NotLeaderError as exc:
            raise NotActive from exc

    def on_activation(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` each time this node has caught up as the active controller of a new epoch."""
        self._activation_hooks.append(hook)

    async def ensure_caught_up(self) -> None:
        """First call of a leader epoch: commit a no-op so that every earlier entry is applied
        before validating against the state, then the cluster id if the log has none yet (the
        first leader of a new quorum). Caller holds the lock."""
        epoch = self._driver.epoch
        if self._caught_up_epoch == epoch:
            return
        await self.append([])
        if self._loader.state.cluster_id is None:  # only known after the no-op: a stale state may lack it
            await self.append([ClusterIdRecord(self._cluster_id), *self._bootstrap])
        self._caught_up_epoch = epoch
        for hook in self._activation_hooks:
            hook()
        log.info(
            "active controller for epoch %d; metadata applied up to offset %d", epoch, self._loader.state.applied_offset
        )

    async def close(self) -> None:
        await self._channels.close()
