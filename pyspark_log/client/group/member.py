"""What the two group memberships of a consumer share: the classic protocol's
``membership.ConsumerGroup`` and the KIP-848 ``consumer_member.ConsumerProtocolGroup``.

Both keep the consumer's group settings, run on the consumer's loop, and own the same offset
work (Kafka documentation §4.5 "The Consumer", "Offset management"; Kafka's ``ConsumerCoordinator``
and ``ConsumerMembershipManager`` share it the same way through ``AbstractCoordinator``/the commit
request manager):

* auto-commit (``enable.auto.commit``) commits the fetch positions every
  ``auto.commit.interval.ms`` while the member may commit (``may_commit``: a stable generation,
  or a positive member epoch), in a task of its own; a failed auto-commit is logged, not raised;
* revoking everything commits first (auto-commit), then calls ``on_partitions_revoked``;
  losing the partitions calls ``on_partitions_lost`` without a commit;
* committed offsets are read with OffsetFetch (``require_stable``, KIP-447), retried on
  retriable errors with backoff until the time budget is spent (``KafkaTimeoutError``);
* ``close`` commits, revokes and leaves within its timeout, then stops the background tasks and
  closes the coordinator link; ``unsubscribe`` revokes and leaves.

A subclass sets up its own settings and state (``_configure``, ``_subscribed``), runs its
heartbeats (``_heartbeat_loop``) and says how it commits
(``commit``), leaves (``_leave``), which tasks it runs (``_background_tasks``) and when it may
commit (``may_commit``).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.clock import Clock
from pyspark_log.client.cluster import Cluster
from pyspark_log.client.connection import Connector
from pyspark_log.client.errors import CommitFailedError, KafkaTimeoutError
from pyspark_log.client.fetcher import Fetcher
from pyspark_log.client.group import requests as rq
from pyspark_log.client.group.link import CoordinatorLink
from pyspark_log.client.group.state import Membership
from pyspark_log.client.group.subscription import (
    CallbackRunner,
    ConsumerRebalanceListener,
    PartitionSet,
    Subscription,
    run_inline,
)
from pyspark_log.client.groups import ConsumerGroupMetadata, OffsetAndMetadata
from pyspark_log.client.tasks import cancel_and_wait
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import KafkaError

log = logging.getLogger(__name__)

T = TypeVar("T")


class GroupMemberBase(abc.ABC):
    """The settings, offsets and shutdown both memberships share; lives on the consumer's loop."""

    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    heartbeat_task_name: str

    def __init__(  # noqa: PLR0917 - the consumer's parts it shares
        self,
        config: Mapping[str, Any],
        cluster: Cluster,
        fetcher: Fetcher,
        backoff: ExponentialBackoff,
        clock: Clock,
        connector: Connector,
    ) -> None:
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config["group.instance.id"] or None
        self.rebalance_timeout_ms = config["max.poll.interval.ms"]
        self.auto_commit: bool = config["enable.auto.commit"]
        self.auto_commit_interval_ms: int = config["auto.commit.interval.ms"]
        self.exclude_internal: bool = config["exclude.internal.topics"]
        self.default_timeout_ms: float = config["default.api.timeout.ms"]
        self.cluster, self.fetcher, self._backoff, self._clock = cluster, fetcher, backoff, clock
        self.link = CoordinatorLink(cluster, self.group_id, config, connector)
        self.membership = Membership()
        self.subscription: Subscription | None = None
        self.listener: ConsumerRebalanceListener = ConsumerRebalanceListener()
        self.callback_runner: CallbackRunner = run_inline
        self._lost = False  # the membership ended without revoking: on_partitions_lost next poll
        self._fatal: KafkaError | None = None
        self._last_poll_ms = clock.monotonic_ms()
        self._next_commit_ms = 0.0
        self._commit_task: asyncio.Task[None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._heartbeat_wake = asyncio.Event()
        self._closing = False
        self.on_wakeup: Callable[[], None] = lambda: None  # wakes a waiting poll (set by the consumer)
        self._configure(config)

    # -- what a subclass says ------------------------------------------------------------------

    @abc.abstractmethod
    def _configure(self, config: Mapping[str, Any]) -> None:
        """The protocol's own settings and state (called last by ``__init__``)."""

    @property
    @abc.abstractmethod
    def may_commit(self) -> bool:
        """True while this member's commits can succeed (a stable generation, a member epoch)."""

    @abc.abstractmethod
    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's generation (or member epoch) and ids now, for a transaction's offsets."""

    @abc.abstractmethod
    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], timeout_ms: float) -> None:
        """Commit ``offsets`` for this member's group (OffsetCommit with its generation or epoch)."""

    @abc.abstractmethod
    async def _leave(self, reason: str) -> None:
        """Leave the group the protocol's way (LeaveGroup, or a heartbeat with the leave epoch)."""

    @abc.abstractmethod
    async def _heartbeat_loop(self) -> None:
        """Keep the membership alive until the member closes (the protocol's heartbeats)."""

    @abc.abstractmethod
    def _subscribed(self) -> None:
        """What a new subscription resets of the protocol's state (called by ``subscribe``)."""

    def _background_tasks(self) -> tuple[asyncio.Task[Any] | None, ...]:
        """The tasks ``close`` cancels."""
        return (self._heartbeat_task, self._commit_task)

    # -- subscription --------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.subscription is not None

    @property
    def poll_interval_s(self) -> float:
        """How long a waiting ``poll`` may go without calling ``poll`` here (auto-commit, the
        max.poll.interval.ms clock and rejoins are driven from it)."""
        interval = min(self.heartbeat_interval_ms, self.rebalance_timeout_ms // 2)
        if self.auto_commit:
            interval = min(interval, self.auto_commit_interval_ms)
        return max(interval, 10) / 1000.0

    def subscribe(self, subscription: Subscription, listener: ConsumerRebalanceListener | None) -> None:
        """Take ``subscription`` (its named topics join the metadata) and ``listener``, let the
        protocol reset what it must (``_subscribed``), and start the heartbeat task once."""
        self.subscription = subscription
        self.listener = listener or ConsumerRebalanceListener()
        if subscription.topics is not None and self.cluster.add_topics(subscription.topics):
            self.cluster.request_update()
        self._subscribed()
        if self._heartbeat_task is None:
            self._heartbeat_task = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=self.heartbeat_task_name
            )

    def subscribed_topics(self) -> set[str]:
        sub = self.subscription
        return (
            set() if sub is None else set(sub.matching(self.cluster.metadata, exclude_internal=self.exclude_internal))
        )

    async def unsubscribe(self) -> None:
        """Revoke everything (``on_partitions_revoked``), leave the group, forget the subscription."""
        if self.subscription is None:
            return
        await self._revoke_all(commit=True)
        await self._leave("the consumer unsubscribed")
        self.subscription = None

    async def close(self, timeout_ms: float) -> None:
        """Commit (auto-commit), revoke, leave, stop the background tasks, close the link."""
        if self._closing:
            return
        self._closing = True
        try:
            if self.subscription is not None and self._fatal is None:
                async with asyncio.timeout(timeout_ms / 1000.0):
                    await self._revoke_all(commit=True)
                    await self._leave("the consumer is closing")
        except (KafkaError, TimeoutError) as exc:
            log.warning("group %s: closing without a clean leave: %s", self.group_id, exc)
        finally:
            await cancel_and_wait(self._background_tasks())
            self.link.close()

    # -- revoking and losing partitions --------------------------------------------------------

    async def _revoke_all(self, *, commit: bool) -> None:
        owned = set(self.fetcher.assignment)
        if commit and self.auto_commit and self.may_commit:
            await self._commit_positions_quietly()
        if owned:
            await self._callback(self.listener.on_partitions_revoked, owned)
        self.fetcher.assign([])

    async def _lose_all(self) -> None:
        self._lost = False
        owned = set(self.fetcher.assignment)
        self.fetcher.assign([])
        if owned:
            await self._callback(self.listener.on_partitions_lost, owned)

    async def _callback(self, fn: Any, partitions: PartitionSet) -> None:
        try:
            await self.callback_runner(fn, set(partitions))
        except Exception:
            log.exception("group %s: rebalance listener %s failed", self.group_id, getattr(fn, "__name__", fn))

    # -- offsets -------------------------------------------------------------------------------

    def _maybe_auto_commit(self) -> None:
        now = self._clock.monotonic_ms()
        if not self.auto_commit or not self.may_commit or now < self._next_commit_ms:
            return
        self._next_commit_ms = now + self.auto_commit_interval_ms
        if self._commit_task is None or self._commit_task.done():
            self._commit_task = asyncio.get_running_loop().create_task(self._commit_positions_quietly())

    def positions(self, partitions: set[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        return {
            tp: st.position
            for tp, st in self.fetcher.assignment.items()
            if st.position is not None and (partitions is None or tp in partitions)
        }

    async def _commit_positions_quietly(self, partitions: set[TopicPartition] | None = None) -> None:
        offsets = self.positions(partitions)
        if not offsets:
            return
        try:
            await self.commit(offsets, self.default_timeout_ms)
        except KafkaError as exc:
            log.warning("group %s: committing %d offset(s) failed: %s", self.group_id, len(offsets), exc)

    async def fetch_committed(
        self, partitions: set[TopicPartition], timeout_ms: float
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if not partitions:
            return {}

        async def once() -> dict[TopicPartition, OffsetAndMetadata]:
            resp = await self.link.request(rq.OFFSET_FETCH, rq.fetch_body(self, partitions))
            return rq.parse_fetch(self, resp)

        return await self._with_retries(timeout_ms, once)

    async def _with_retries(self, timeout_ms: float, attempt_fn: Callable[[], Awaitable[T]]) -> T:
        """``attempt_fn`` until it succeeds, a non-retriable error (or a ``CommitFailedError``)
        or the time budget is spent (``KafkaTimeoutError``); backoff between attempts."""
        deadline = self._clock.monotonic_ms() + timeout_ms
        attempt = 0
        while True:
            try:
                return await attempt_fn()
            except KafkaError as exc:
                if not exc.retriable or isinstance(exc, CommitFailedError):
                    raise
                wait_ms = self._backoff.backoff_ms(attempt)
                attempt += 1
                if self._clock.monotonic_ms() + wait_ms >= deadline:
                    raise KafkaTimeoutError(
                        f"group {self.group_id!r}: no success in {timeout_ms:.0f} ms: {exc}"
                    ) from exc
                await asyncio.sleep(wait_ms / 1000.0)
