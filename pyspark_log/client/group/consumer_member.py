"""A consumer's membership with the KIP-848 consumer rebalance protocol (``group.protocol=consumer``):
the broker computes the assignment, the member heartbeats with ConsumerGroupHeartbeat (68) and
reconciles what it owns towards what it is assigned (Kafka's ``ConsumerMembershipManager``).

Same surface as the classic ``membership.ConsumerGroup`` (the consumer picks one by
``group.protocol``); ``poll`` drives it on the caller's task, so rebalance callbacks run where
the user polls:

* one background task heartbeats every ``heartbeat_interval_ms`` the broker gives (sooner when
  woken: after a reconciliation step, to report it). Every heartbeat is a full one (subscribed
  topic names, rebalance timeout = ``max.poll.interval.ms``, owned partitions, ``group.instance.id``,
  ``client.rack``, ``group.remote.assignor``), which KIP-848 allows; the first carries epoch 0 and
  a member id this client generated (ConsumerGroupHeartbeat v1, KIP-1082). A pattern
  subscription sends the matching topic names.
* the answer's assignment (topic ids, mapped to names with the metadata) becomes the target;
  ``poll`` reconciles: **revoke first** (commit the revoked partitions' positions with
  auto-commit, ``on_partitions_revoked``, stop fetching them), then assign the new ones (their
  committed offsets, ``on_partitions_assigned``), then heartbeat at once to report what it owns.
* errors: FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID — the partitions are lost
  (``on_partitions_lost``) and the member rejoins with epoch 0; NOT_COORDINATOR and friends —
  find the coordinator again; UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
  UNSUPPORTED_ASSIGNOR, INVALID_REQUEST, authorization errors — fatal (``poll`` raises).
* commits use OffsetCommit v9 with the member id and **member epoch**; a STALE_MEMBER_EPOCH
  (the epoch moved while the commit was on its way) is retried with the new epoch while the
  partitions are still owned.
* ``close``/``unsubscribe`` revoke everything (auto-commit first) and leave with epoch -1 (a
  static member: -2, keeping its assignment for its session timeout); a member that does not
  poll for ``max.poll.interval.ms`` leaves too and loses its partitions.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from pyspark_log.client.errors import CommitFailedError, KafkaTimeoutError, error_for
from pyspark_log.client.group import requests as rq
from pyspark_log.client.group.member import GroupMemberBase
from pyspark_log.client.group.state import MemberState
from pyspark_log.client.groups import ConsumerGroupMetadata, OffsetAndMetadata
from pyspark_log.client.offset_commit import offset_commit_body
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError, Message

log = logging.getLogger(__name__)

HEARTBEAT = ApiKey.CONSUMER_GROUP_HEARTBEAT
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
_LOST = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
_RETRY = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.REQUEST_TIMED_OUT,
})  # fmt: skip


def new_member_id() -> str:
    """A member id as Kafka's client makes one: a random UUID, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerProtocolGroup(GroupMemberBase):
    """The KIP-848 membership of one consumer in ``group.id``; lives on the consumer's loop."""

    heartbeat_task_name = "pylog-consumer-heartbeat"

    def _configure(self, config: Mapping[str, Any]) -> None:
        self.rack_id: str | None = config.get("client.rack") or None
        self.server_assignor: str | None = config.get("group.remote.assignor") or None
        self.heartbeat_interval_ms = 5000  # until the broker says otherwise
        # membership.generation_id: the member epoch (group metadata, commits)
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self._target: dict[str, frozenset[int]] | None = None  # the broker's latest assignment (by name)
        self._pending_ids: list[Any] = []  # an assignment naming topic ids the metadata does not know yet
        self._heartbeat_done = asyncio.Event()  # set after every answered heartbeat
        self._left = False

    @property
    def may_commit(self) -> bool:
        """A KIP-848 member commits with its member epoch, once it has one (> 0)."""
        return self.member_epoch > 0

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The member epoch and id once the coordinator gave an epoch (-1 and no id before)."""
        if self.member_epoch <= 0:
            return ConsumerGroupMetadata(self.group_id, group_instance_id=self.instance_id)
        return ConsumerGroupMetadata(self.group_id, self.member_epoch, self.member_id, self.instance_id)

    # -- subscription --------------------------------------------------------------------------

    def _subscribed(self) -> None:
        self._left = False
        self._heartbeat_wake.set()  # a full heartbeat with the new subscription, now

    def request_rejoin(self, reason: str) -> None:
        """Heartbeat now (a changed subscription is sent with the next full heartbeat)."""
        log.debug("group %s: heartbeat now: %s", self.group_id, reason)
        self._heartbeat_wake.set()

    # -- poll: reconciliation ------------------------------------------------------------------

    async def poll(self, timeout_ms: float) -> None:
        """Reconcile the owned partitions with the broker's assignment; raise a fatal error."""
        self._last_poll_ms = self._clock.monotonic_ms()
        if self._fatal is not None:
            raise self._fatal
        if self.subscription is None:
            return
        if self._left:  # max.poll.interval.ms passed: join again
            self._left = False
            self._heartbeat_wake.set()
        if self._lost:
            await self._lose_all()
        if self._pending_ids:
            self._resolve_pending()
        if self._target is not None:
            await self._reconcile(timeout_ms)
        self._maybe_auto_commit()

    async def _reconcile(self, timeout_ms: float) -> None:
        target = {TopicPartition(t, p) for t, ps in (self._target or {}).items() for p in ps}
        owned = set(self.fetcher.assignment)
        revoked, added = owned - target, target - owned
        if not revoked and not added:
            return
        if revoked:
            if self.auto_commit:
                await self._commit_positions_quietly(revoked)
            await self._callback(self.listener.on_partitions_revoked, revoked)
            self.fetcher.assign(sorted(owned - revoked))
            log.info("group %s epoch %d: revoked %s", self.group_id, self.member_epoch, sorted(revoked))
        if added:
            try:
                committed = await self.fetch_committed(added, max(timeout_ms, self.default_timeout_ms))
            except KafkaError as exc:
                log.info("group %s: committed offsets not available yet: %s", self.group_id, exc)
                self._heartbeat_wake.set()  # report the revocation meanwhile
                return
            self.fetcher.assign(sorted((owned - revoked) | added))
            for tp in added:
                found = committed.get(tp)
                if found is not None:
                    self.fetcher.seek(tp, found.offset)
            self._next_commit_ms = self._clock.monotonic_ms() + self.auto_commit_interval_ms
            log.info("group %s epoch %d: assigned %s", self.group_id, self.member_epoch, sorted(added))
            await self._callback(self.listener.on_partitions_assigned, added)
        self._heartbeat_wake.set()  # acknowledge what it owns now

    async def _lose_all(self) -> None:
        await super()._lose_all()
        self._heartbeat_wake.set()

    # -- heartbeats ----------------------------------------------------------------------------

    def _body(self, epoch: int) -> dict[str, Any]:
        sub = self.subscription
        topics = sorted(sub.matching(self.cluster.metadata, exclude_internal=self.exclude_internal)) if sub else []
        if sub is not None and sub.topics is not None:
            topics = sorted(set(sub.topics))  # named topics are sent whether they exist yet or not
        owned: dict[Any, list[int]] = {}
        for tp in self.fetcher.assignment:
            meta = self.cluster.metadata.topics.get(tp.topic)
            if meta is not None and meta.topic_id is not None:
                owned.setdefault(meta.topic_id, []).append(tp.partition)
        leaving = epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH)
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": epoch,
            "instance_id": self.instance_id,
            "rack_id": None if leaving else self.rack_id,
            "rebalance_timeout_ms": -1 if leaving else self.rebalance_timeout_ms,
            "subscribed_topic_names": None if leaving else topics,
            "subscribed_topic_regex": None,
            "server_assignor": None if leaving else self.server_assignor,
            "topic_partitions": None if leaving else [
                {"topic_id": tid, "partitions": sorted(ps)} for tid, ps in owned.items()
            ],
        }  # fmt: skip

    async def _heartbeat_loop(self) -> None:
        delay_ms = 0.0
        failures = 0
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay_ms / 1000.0):
                    await self._heartbeat_wake.wait()
            self._heartbeat_wake.clear()
            delay_ms = float(self.heartbeat_interval_ms)
            if self.subscription is None or self._left or self._fatal is not None or self._closing:
                continue
            if self._clock.monotonic_ms() - self._last_poll_ms > self.rebalance_timeout_ms:
                log.warning("group %s: poll was not called for max.poll.interval.ms; leaving the group", self.group_id)
                await self._leave("consumer poll timeout has expired")
                self._left = True
                self._lost = True
                self.on_wakeup()
                continue
            try:
                resp = await self.link.request(HEARTBEAT, self._body(self.member_epoch))
            except KafkaError as exc:
                delay_ms = self._backoff.backoff_ms(failures)
                failures += 1
                log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
                continue
            failures = 0
            retry = self._on_heartbeat(resp)
            if retry:
                delay_ms = self._backoff.backoff_ms(0)
            self._heartbeat_done.set()
            self._heartbeat_done = asyncio.Event()

    def _on_heartbeat(self, resp: Message) -> bool:
        """Apply an answer; True if the next heartbeat should come soon (a retriable error)."""
        code = resp.error_code
        if code == ErrorCode.NONE:
            if resp.member_id:
                self.member_id = resp.member_id
            if resp.member_epoch != self.member_epoch:
                log.info("group %s: member epoch %d -> %d", self.group_id, self.member_epoch, resp.member_epoch)
            self.member_epoch = resp.member_epoch
            self._set_generation(resp.member_epoch)
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = resp.heartbeat_interval_ms
            if resp.assignment is not None:
                self._pending_ids = list(resp.assignment.topic_partitions)
                self._resolve_pending()
            return False
        if code in _LOST:
            log.info("group %s: membership lost (%s); rejoining", self.group_id, ErrorCode.of(code).name)
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = new_member_id()
            self.member_epoch = JOIN_EPOCH
            self._set_generation(None)
            self._target, self._pending_ids = None, []
            self._lost = True
            self.on_wakeup()
            return True
        if code in _RETRY:
            self.link.on_error(code)
            return True
        self._fatal = error_for(code, context=f"ConsumerGroupHeartbeat of group {self.group_id!r}: "
                                f"{resp.error_message or ''}")  # fmt: skip
        self.on_wakeup()
        return False

    def _resolve_pending(self) -> None:
        """The pending assignment by topic name, once the metadata knows every topic id."""
        names = {t.topic_id: name for name, t in self.cluster.metadata.topics.items()}
        if any(e.topic_id not in names for e in self._pending_ids):
            for e in self._pending_ids:
                if e.topic_id not in names:
                    self.cluster.request_update()
            return
        target: dict[str, set[int]] = {}
        for e in self._pending_ids:
            target.setdefault(names[e.topic_id], set()).update(e.partitions)
        self._target = {t: frozenset(ps) for t, ps in target.items()}
        self._pending_ids = []
        self.on_wakeup()

    def _set_generation(self, epoch: int | None) -> None:
        m = self.membership
        if epoch is None or epoch <= 0:
            if m.state is not MemberState.UNJOINED:
                m.reset(keep_member_id=True)
            m.member_id = self.member_id
            return
        if m.state is MemberState.UNJOINED:
            m.transition_to(MemberState.PREPARING_REBALANCE)
            m.transition_to(MemberState.COMPLETING_REBALANCE)
            m.transition_to(MemberState.STABLE)
        m.generation_id, m.member_id = epoch, self.member_id

    async def _leave(self, reason: str) -> None:
        """Leave with epoch -1 (-2: a static member, which keeps its assignment for its session
        timeout); ``reason`` is only logged (ConsumerGroupHeartbeat carries none)."""
        log.debug("group %s: leaving: %s", self.group_id, reason)
        epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        if self.member_epoch > 0 or self.fetcher.assignment:
            try:
                await self.link.request(HEARTBEAT, self._body(epoch))
            except KafkaError as exc:
                log.info("group %s: the leaving heartbeat failed: %s", self.group_id, exc)
        self.member_epoch = JOIN_EPOCH
        self._set_generation(None)
        self._target, self._pending_ids = None, []

    # -- offsets -------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], timeout_ms: float) -> None:
        """OffsetCommit v9 with this member's id and epoch (KIP-848 "Offset Commit and Fetch")."""
        if self.member_epoch <= 0:
            raise CommitFailedError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {self.group_id!r}: not a member now")
        deadline = self._clock.monotonic_ms() + timeout_ms
        attempt = 0
        while True:
            body = offset_commit_body(self.group_id, self.member_epoch, self.member_id, self.instance_id, offsets)
            try:
                resp = await self.link.request(rq.OFFSET_COMMIT, body)
                code = rq.first_commit_error(resp)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if code == ErrorCode.NONE:
                return
            self.link.on_error(code)
            if code == ErrorCode.STALE_MEMBER_EPOCH and set(offsets) <= set(self.fetcher.assignment):
                # the epoch moved meanwhile: wait for the next heartbeat's answer, then again
                self._heartbeat_wake.set()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(self.heartbeat_interval_ms, 100) / 1000.0):
                        await self._heartbeat_done.wait()
            elif code in (ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
                raise CommitFailedError(code, f"group {self.group_id!r}: this member no longer owns the partitions")
            elif code not in _RETRY:
                raise error_for(code, context=f"commit offsets of group {self.group_id!r}")
            wait_ms = self._backoff.backoff_ms(attempt)
            attempt += 1
            if self._clock.monotonic_ms() + wait_ms >= deadline:
                raise KafkaTimeoutError(f"group {self.group_id!r}: commit not done in {timeout_ms:.0f} ms")
            await asyncio.sleep(wait_ms / 1000.0)
