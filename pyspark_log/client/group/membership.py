"""A consumer's group membership (the classic protocol, as Kafka's ``ConsumerCoordinator``).

``poll`` drives it, on the caller's task, so rebalance callbacks run where the user polls:

1. a member that must (re)join first commits (auto-commit) and, under the eager protocol, revokes
   every partition (``on_partitions_revoked``); then a join task sends JoinGroup — again with
   the member id of a MEMBER_ID_REQUIRED answer — and SyncGroup (the leader computes the
   assignment with the protocol the coordinator chose);
2. once synced, ``poll`` fetches the committed offsets of the new partitions, positions the
   fetcher there (``auto.offset.reset`` where none is committed), and calls
   ``on_partitions_assigned``. Under the cooperative protocol only partitions that moved are
   revoked, after the assignment, followed by another rebalance;
3. auto-commit (``enable.auto.commit``) commits the positions every ``auto.commit.interval.ms``.

One background task heartbeats every ``heartbeat.interval.ms`` while the member is stable. It
learns of rebalances (REBALANCE_IN_PROGRESS: the next poll rejoins), of a lost membership
(UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION: ``on_partitions_lost``, then rejoin) and of a fence
(FENCED_INSTANCE_ID: ``poll`` raises it, Kafka documentation §4.5 "The Consumer"), and leaves the group when
``poll`` was
not called for ``max.poll.interval.ms``. A static member (``group.instance.id``, KIP-345) never
sends LeaveGroup: restarting within ``session.timeout.ms`` keeps its partitions without a rebalance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from pyspark_log.client.errors import ClientClosedError, CommitFailedError, error_for
from pyspark_log.client.group import requests as rq
from pyspark_log.client.group.assignors import COOPERATIVE, assignors_from_config, rebalance_protocol
from pyspark_log.client.group.member import GroupMemberBase
from pyspark_log.client.group.state import MemberState
from pyspark_log.client.groups import ConsumerGroupMetadata, OffsetAndMetadata
from pyspark_log.client.metrics import metrics_of
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ErrorCode, KafkaError
from pyspark_log.wire.consumer_protocol import Assignment

log = logging.getLogger(__name__)


class ConsumerGroup(GroupMemberBase):
    """The membership of one consumer in ``group.id``; lives on the consumer's loop."""

    heartbeat_task_name = "pylog-heartbeat"

    def _configure(self, config: Mapping[str, Any]) -> None:
        self.session_timeout_ms: int = config["session.timeout.ms"]
        self.heartbeat_interval_ms = config["heartbeat.interval.ms"]
        self.metadata_max_age_ms: float = config["metadata.max.age.ms"]
        self.assignors = assignors_from_config(config["partition.assignment.strategy"].split(","))
        self.protocol = rebalance_protocol(self.assignors)
        self._rejoin_needed = True
        self._joined_topics: frozenset[str] = frozenset()
        self._leader_snapshot: dict[str, int] | None = None
        self._join_task: asyncio.Task[Assignment] | None = None
        self._join_started_ms = 0.0
        self._synced: Assignment | None = None
        self._next_pattern_refresh_ms = 0.0

    @property
    def may_commit(self) -> bool:
        """A classic member commits with its generation, once the generation is stable."""
        return self.membership.is_stable

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The generation this member joined (-1 and no member id before its first join)."""
        m = self.membership
        return ConsumerGroupMetadata(self.group_id, m.generation_id, m.member_id, self.instance_id)

    def _background_tasks(self) -> tuple[asyncio.Task[Any] | None, ...]:
        return (self._heartbeat_task, self._join_task, self._commit_task)

    # -- subscription --------------------------------------------------------------------------

    def _subscribed(self) -> None:
        self._next_pattern_refresh_ms = 0.0
        self._rejoin_needed = True

    # -- poll ----------------------------------------------------------------------------------

    async def poll(self, timeout_ms: float) -> None:
        """Keep the membership current for up to ``timeout_ms``; raise a fatal group error."""
        now = self._clock.monotonic_ms()
        self._last_poll_ms = now
        if self._fatal is not None:
            raise self._fatal
        if self.subscription is None:
            return
        await self._refresh_subscription(now)
        if self._lost:
            await self._lose_all()
        if self._join_task is None and self._synced is None and (self._rejoin_needed or not self.membership.is_stable):
            await self._prepare_join()
            self._join_started_ms = self._clock.monotonic_ms()
            self._join_task = asyncio.get_running_loop().create_task(self._join_and_sync(), name="pylog-join")
        if self._join_task is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(timeout_ms, 0) / 1000.0):
                    await asyncio.shield(self._join_task)
            if not self._join_task.done():
                return
            task, self._join_task = self._join_task, None
            exc = task.exception()
            if exc is not None:
                self._fatal = exc if isinstance(exc, KafkaError) else ClientClosedError(f"join failed: {exc!r}")
                raise self._fatal
            self._synced = task.result()
            # consumer-coordinator-metrics rebalance-total / rebalance-latency-* (metrics.py)
            rebalance_ms = self._clock.monotonic_ms() - self._join_started_ms
            metrics_of(self.cluster).sensor("rebalance-latency").record(rebalance_ms)
            self.membership.transition_to(MemberState.STABLE)
            self._heartbeat_wake.set()
        if self._synced is not None:
            await self._install(self._synced, timeout_ms)
        self._maybe_auto_commit()

    async def _refresh_subscription(self, now: float) -> None:
        sub = self.subscription
        assert sub is not None
        if sub.pattern is not None and now >= self._next_pattern_refresh_ms:
            self._next_pattern_refresh_ms = now + self.metadata_max_age_ms
            with contextlib.suppress(KafkaError, TimeoutError):
                async with asyncio.timeout(self.default_timeout_ms / 1000.0):
                    meta = await self.cluster.fetch_metadata(None)
                if self.cluster.add_topics(sub.matching(meta, exclude_internal=self.exclude_internal)):
                    self.cluster.request_update()
        if not self.membership.is_stable:
            return
        if sub.matching(self.cluster.metadata, exclude_internal=self.exclude_internal) != self._joined_topics:
            self.request_rejoin("the subscribed topics changed")
        elif self._leader_snapshot is not None and any(
            (self.cluster.metadata.partition_count(t) or 0) != n for t, n in self._leader_snapshot.items()
        ):
            self.request_rejoin("a subscribed topic appeared or its partition count changed")

    def request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            log.info("group %s: rejoining: %s", self.group_id, reason)
        self._rejoin_needed = True
        self.on_wakeup()

    async def _prepare_join(self) -> None:
        if self.protocol != COOPERATIVE:
            await self._revoke_all(commit=True)
        elif self.membership.is_stable:
            await self._commit_positions_quietly()

    async def _install(self, synced: Assignment, timeout_ms: float) -> None:
        """Position and hand over a new assignment; retried by the next poll if the committed
        offsets cannot be read in time."""
        new = {TopicPartition(t, p) for t, p in synced.partitions}
        owned = set(self.fetcher.assignment)
        added = new - owned
        revoked = owned - new
        try:
            committed = await self.fetch_committed(added, max(timeout_ms, self.default_timeout_ms))
        except KafkaError as exc:
            log.info("group %s: committed offsets not available yet: %s", self.group_id, exc)
            return
        self._synced = None
        if revoked:
            if self.auto_commit:
                await self._commit_positions_quietly(revoked)
            await self._callback(self.listener.on_partitions_revoked, revoked)
        self.fetcher.assign(sorted(new))
        for tp in added:
            found = committed.get(tp)
            if found is not None:
                self.fetcher.seek(tp, found.offset)
        self._next_commit_ms = self._clock.monotonic_ms() + self.auto_commit_interval_ms
        log.info("group %s generation %s: assigned %s", self.group_id, self.membership.generation_id, sorted(new))
        await self._callback(self.listener.on_partitions_assigned, added)
        if revoked and self.protocol == COOPERATIVE:
            self.request_rejoin("partitions were revoked (cooperative protocol)")

    # -- join and sync (the join task) ---------------------------------------------------------

    async def _join_and_sync(self) -> Assignment:
        attempt = 0
        while True:
            try:
                return await self._join_once()
            except rq.RejoinNow:
                continue
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.info("group %s: join failed, retrying: %s", self.group_id, exc)
            await asyncio.sleep(self._backoff.backoff_ms(attempt) / 1000.0)
            attempt += 1

    async def _join_once(self) -> Assignment:
        m = self.membership
        self._rejoin_needed = False
        m.transition_to(MemberState.PREPARING_REBALANCE)
        sub = self.subscription
        assert sub is not None
        topics = sub.matching(self.cluster.metadata, exclude_internal=self.exclude_internal)
        await self.link.connection()
        owned = sorted(self.fetcher.assignment)
        body = rq.join_body(self, topics, owned)
        resp = await self.link.request(rq.JOIN_GROUP, body, timeout_ms=self.rebalance_timeout_ms + 5000)
        rq.check_join(self, resp)
        m.join_answered(resp.generation_id, resp.member_id, resp.protocol_name, resp.leader)
        self._joined_topics = topics
        self._leader_snapshot = None
        assignments: dict[str, bytes] = {}
        if resp.leader == resp.member_id:
            assignments, self._leader_snapshot = await rq.leader_assign(self, resp.protocol_name, resp.members)
        body = rq.sync_body(self, resp.protocol_name, assignments)
        sync = await self.link.request(rq.SYNC_GROUP, body, timeout_ms=self.rebalance_timeout_ms + 5000)
        return rq.check_sync(self, sync)

    # -- heartbeats ----------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        delay_ms = float(self.heartbeat_interval_ms)
        failures = 0
        while True:
            self._heartbeat_wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay_ms / 1000.0):
                    await self._heartbeat_wake.wait()
            delay_ms = float(self.heartbeat_interval_ms)
            m = self.membership
            if self.subscription is None or not m.is_stable:
                continue
            if self._clock.monotonic_ms() - self._last_poll_ms > self.rebalance_timeout_ms:
                log.warning("group %s: poll was not called for max.poll.interval.ms; leaving the group", self.group_id)
                await self._leave("consumer poll timeout has expired")
                continue
            generation = m.generation_id
            try:
                resp = await self.link.request(rq.HEARTBEAT, rq.heartbeat_body(self))
            except KafkaError as exc:
                delay_ms = self._backoff.backoff_ms(failures)
                failures += 1
                log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
                continue
            failures = 0
            if m.generation_id == generation and m.is_stable:
                self._on_heartbeat(resp.error_code)

    def _on_heartbeat(self, code: int) -> None:
        if code == ErrorCode.NONE:
            return
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("the group is rebalancing")
        elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            log.info("group %s: membership lost (%s)", self.group_id, ErrorCode.of(code).name)
            self.membership.reset()
            self._lost = True
            self.request_rejoin("the membership was lost")
        elif code == ErrorCode.FENCED_INSTANCE_ID:
            self._fatal = error_for(
                code, context=f"group.instance.id {self.instance_id!r} was fenced by a newer member"
            )
            self.membership.reset()
            self.on_wakeup()
        else:
            self.link.on_error(code)

    async def _leave(self, reason: str) -> None:
        m = self.membership
        if self.instance_id is None and m.member_id and m.state is not MemberState.UNJOINED:
            try:
                await self.link.request(rq.LEAVE_GROUP, rq.leave_body(self, reason))
            except KafkaError as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        if m.state is not MemberState.UNJOINED:
            m.reset()
        if self.fetcher.assignment:
            self._lost = True
        self._rejoin_needed = True
        self.on_wakeup()

    # -- offsets -------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], timeout_ms: float) -> None:
        """OffsetCommit with this member's generation; retried on coordinator moves."""
        m = self.membership
        if not m.is_stable:
            joining = m.state is not MemberState.UNJOINED or self._join_task is not None
            code = ErrorCode.REBALANCE_IN_PROGRESS if joining else ErrorCode.ILLEGAL_GENERATION
            raise CommitFailedError(code, f"group {self.group_id!r} is rebalancing: poll, then commit again")
        body = rq.commit_body(self, offsets)
        started = self._clock.monotonic_ms()
        await self._with_retries(timeout_ms, lambda: self._commit_once(body))
        metrics_of(self.cluster).sensor("commit-latency").record(self._clock.monotonic_ms() - started)

    async def _commit_once(self, body: dict[str, Any]) -> None:
        resp = await self.link.request(rq.OFFSET_COMMIT, body)
        code = rq.first_commit_error(resp)
        if code == ErrorCode.NONE:
            return
        self.link.on_error(code)
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS):
            if code != ErrorCode.REBALANCE_IN_PROGRESS and self.membership.state is not MemberState.UNJOINED:
                self.membership.reset()
                self._lost = True
            self.request_rejoin(f"offset commit failed: {ErrorCode.of(code).name}")
            raise CommitFailedError(code, f"group {self.group_id!r}: the generation of this commit is over")
        if code == ErrorCode.FENCED_INSTANCE_ID:
            self._fatal = error_for(code, context=f"group.instance.id {self.instance_id!r} was fenced")
        raise error_for(code, context=f"commit offsets of group {self.group_id!r}")
