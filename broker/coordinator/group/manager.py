"""The group cache and its persistence (Kafka ``GroupMetadataManager``).

Owns: the groups this broker coordinates, which ``__consumer_offsets`` partitions it leads and
whether each is loaded, the timers, the offsets records it writes, offset expiry, and the one
background task (``run``) that loads partitions and fires timers. Kafka documentation §5.5 "Distribution":
requests for a
group whose partition is still loading get COORDINATOR_LOAD_IN_PROGRESS; the cache answers
offset fetches; a commit is appended to the partition before the cache changes and the client
hears back ("persist before you reply"). Transactional commits (TxnOffsetCommit) are appended as
the producer's transactional batch and staged until the marker of their transaction lands on the
partition (``complete_txn``; ``txn_offsets``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.coordinator.group.group import (
    Group,
    GroupState,
    JoinResult,
    SyncResult,
    TopicPartition,
    UnreplicatedOffset,
)
from broker.coordinator.group.records import (
    CommittedOffset,
    group_key,
    group_value,
    offset_entries,
    offset_key,
    partition_for,
)
from broker.coordinator.group.store import (
    OffsetsLog,
    PartitionLoad,
    StoreError,
    encode_records,
    encode_txn_records,
)
from broker.coordinator.group.timers import Timers
from broker.coordinator.group.txn_offsets import StagedOffset
from broker.coordinator.task import CoordinatorTask, PartitionStatus
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

MINUTE_MS = 60_000


@dataclass(frozen=True)
class GroupConfig:
    """The broker settings of the group coordinator (Kafka's names in ``from_properties``)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000
    offsets_retention_ms: int = 7 * 24 * 60 * MINUTE_MS
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_properties(cls, get: Callable[[str, object], object]) -> GroupConfig:
        def num(key: str, default: int) -> int:
            return int(str(get(key, default)))

        return cls(
            min_session_timeout_ms=num("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=num("group.max.session.timeout.ms", 1_800_000),
            max_size=num("group.max.size", 2**31 - 1),
            initial_rebalance_delay_ms=num("group.initial.rebalance.delay.ms", 3000),
            offsets_retention_ms=num("offsets.retention.minutes", 10080) * MINUTE_MS,
            offsets_retention_check_interval_ms=num("offsets.retention.check.interval.ms", 600_000),
            offset_metadata_max_bytes=num("offset.metadata.max.bytes", 4096),
        )


class GroupManager(CoordinatorTask):
    """See the module docstring. Lives on the broker's event loop; no locks."""

    task_name = "group coordinator"
    state_topic = "__consumer_offsets"

    def __init__(
        self, config: GroupConfig, store: OffsetsLog, clock_ms: Callable[[], int], *, node_id: int = 0
    ) -> None:
        self.config = config
        self.store = store
        self.clock_ms = clock_ms
        self.node_id = node_id
        self.groups: dict[str, Group] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self.num_partitions: int | None = None
        self.timers = Timers()
        self.active = False
        self._loads: deque[PartitionLoad] = deque()
        self._wake: asyncio.Event | None = None
        self._sleep_until: int | None = None  # the deadline the task sleeps towards (None: none)
        self.on_group_loaded: Callable[[Group], None] = lambda group: None
        # a loaded partition's records of other types, in log order (KIP-848 consumer groups)
        self.on_records_loaded: Callable[[int, list[tuple[bytes, bytes | None]]], None] = lambda p, records: None
        # the topics a KIP-848 group with members subscribes to (None: not such a group)
        self.live_subscriptions: Callable[[str], frozenset[str] | None] = lambda group_id: None
        # producer id -> ids of the groups it has staged transactional offsets in (may be stale;
        # ``complete_txn`` prunes): a marker visits those groups, not every cached one
        self._producer_groups: dict[int, set[str]] = {}

    # -- ownership and status ------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int | None:
        return None if self.num_partitions is None else partition_for(group_id, self.num_partitions)

    def status(self, group_id: str | None, *, allow_empty_id: bool = False) -> int | None:
        """None if this coordinator serves ``group_id`` now, else the error code to answer."""
        if group_id is None or (not group_id and not allow_empty_id):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_of(group_id)
        state = None if partition is None else self.partitions.get(partition)
        if state is PartitionStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if state is None:
            return ErrorCode.NOT_COORDINATOR
        return None

    @property
    def loading(self) -> bool:
        return any(s is PartitionStatus.LOADING for s in self.partitions.values())

    def set_partitions(self, num_partitions: int | None, led: Iterable[int]) -> None:
        """The offsets topic has ``num_partitions`` (None: no topic) and this broker leads ``led``:
        load the new ones (at once when empty), unload the ones it lost."""
        self.num_partitions = num_partitions
        wanted = set(led) if num_partitions else set()
        for partition in [p for p in self.partitions if p not in wanted]:
            self._unload_partition(partition)
        for partition in sorted(wanted - set(self.partitions)):
            if self.store.log_end_offset(partition) <= self.store.log_start_offset(partition):
                self.partitions[partition] = PartitionStatus.ACTIVE
                continue
            self.partitions[partition] = PartitionStatus.LOADING
            self._loads.append(PartitionLoad(self.store, partition))
            self.wake()

    def _unload_partition(self, partition: int) -> None:
        self.partitions.pop(partition, None)
        self._loads = deque(load for load in self._loads if load.partition != partition)
        for group in [g for g in self.groups.values() if self.partition_of(g.group_id) in (partition, None)]:
            self.unload_group(group)
        for producer_id, group_ids in list(self._producer_groups.items()):
            group_ids.intersection_update(self.groups)
            if not group_ids:
                del self._producer_groups[producer_id]

    def unload_group(self, group: Group) -> None:
        """Forget a group this broker no longer coordinates; waiting members hear NOT_COORDINATOR."""
        previous = group.state
        group.transition_to(GroupState.DEAD)
        for member in list(group.members.values()):
            if previous is GroupState.PREPARING_REBALANCE:
                group.invoke_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
            group.invoke_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            self.timers.cancel(("heartbeat", group.group_id, member.member_id))
        self.cancel_group_timers(group.group_id)
        self.groups.pop(group.group_id, None)

    def cancel_group_timers(self, group_id: str) -> None:
        for kind in ("join", "sync"):
            self.timers.cancel((kind, group_id))

    # -- loading -------------------------------------------------------------------------------

    def _finish_load(self, load: PartitionLoad) -> None:
        if self.partitions.get(load.partition) is not PartitionStatus.LOADING:
            return
        loaded = load.result
        staged: dict[str, dict[int, dict[TopicPartition, StagedOffset]]] = {}  # group -> producer -> ...
        for producer_id, by_group in loaded.pending.items():
            for group_id, entries in by_group.items():
                if entries:
                    staged.setdefault(group_id, {})[producer_id] = entries
        for group_id in sorted(set(loaded.groups) | set(loaded.offsets) | set(staged)):
            stored = loaded.groups.get(group_id)
            offsets = loaded.offsets.get(group_id, {})
            if stored is None and not offsets and group_id not in staged:
                continue
            group = Group.from_stored(group_id, stored) if stored is not None else Group(group_id)
            group.offsets.update(offsets)
            group.offset_positions.update(loaded.positions.get(group_id, {}))
            group.pending_txn_offsets.by_producer.update(staged.get(group_id, {}))
            for producer_id in staged.get(group_id, {}):
                self._producer_groups.setdefault(producer_id, set()).add(group_id)
            self.groups[group_id] = group
            self.on_group_loaded(group)
        if loaded.other:
            self.on_records_loaded(load.partition, loaded.other)
        self.partitions[load.partition] = PartitionStatus.ACTIVE
        log.info("loaded __consumer_offsets-%s: %d group(s)", load.partition, len(loaded.groups))

    # -- persistence ---------------------------------------------------------------------------

    def _append(
        self, group_id: str, entries: list[tuple[bytes, bytes | None]], records: bytes | None = None
    ) -> int | None:
        partition = self.partition_of(group_id)
        if partition is None:
            raise StoreError(ErrorCode.NOT_COORDINATOR, "the offsets topic does not exist")
        return self.store.append(partition, records or encode_records(entries, self.clock_ms()))

    def store_group(self, group: Group, assignment: dict[str, bytes]) -> None:
        """Persist the group's metadata with ``assignment``; raises StoreError."""
        self._append(group.group_id, [(group_key(group.group_id), group_value(group.to_stored(assignment)))])

    def _check_metadata_size(
        self, offsets: dict[TopicPartition, CommittedOffset]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, CommittedOffset]]:
        """Split a commit (OffsetCommit or TxnOffsetCommit) by ``offset.metadata.max.bytes``:
        the partitions whose metadata is longer answer OFFSET_METADATA_TOO_LARGE and are not
        stored (Kafka documentation, broker config ``offset.metadata.max.bytes``: "the maximum size
        for a metadata entry associated with an offset commit"); returns (those errors, the rest)."""
        limit = self.config.offset_metadata_max_bytes
        results: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, CommittedOffset] = {}
        for tp, value in offsets.items():
            if len(value.metadata) > limit:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = value
        return results, valid

    def store_offsets(self, group: Group, offsets: dict[TopicPartition, CommittedOffset]) -> dict[TopicPartition, int]:
        """Append the commits; per partition the error code (0: appended). OffsetFetch sees them
        only once the offsets partition's high watermark passed them (``cache_replicated``): a
        commit that never reaches the ISR is not on the next coordinator either, and an
        OffsetFetch that saw it would then see the committed offset move back (Kafka's
        coordinator, too, caches a commit only once its append completed)."""
        self.cache_replicated(group)  # what waits stays bounded for groups that never fetch
        results, valid = self._check_metadata_size(offsets)
        if valid:
            entries = offset_entries(group.group_id, valid)
            try:
                position = self._append(group.group_id, entries)
            except StoreError as exc:
                code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE if exc.too_large else exc.code
                log.warning("offset commit of group %s failed: %s", group.group_id, exc)
                results.update(dict.fromkeys(valid, code))
            else:
                if position is None:
                    self._cache_offsets(group, valid, None)
                else:
                    for tp, value in valid.items():
                        group.unreplicated_offsets.setdefault(tp, []).append(
                            UnreplicatedOffset(position, position, value)
                        )
                    self.cache_replicated(group)  # at once where the ISR is the leader alone
                results.update(dict.fromkeys(valid, ErrorCode.NONE))
        return results

    def replicated_offsets(self, group: Group) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets as OffsetFetch would answer them now, without changing
        anything (for readers off the event loop: the metrics collector)."""
        offsets = dict(group.offsets)
        for tp, (latest, _waiting) in self._split_replicated(group).items():
            if latest is not None and group.offset_positions.get(tp, -1) <= latest.position:
                offsets[tp] = latest.value
        return offsets

    def cache_replicated(self, group: Group) -> None:
        """Move the group's commits below its offsets partition's high watermark into the cache
        OffsetFetch answers from (``store_offsets``)."""
        for tp, (latest, waiting) in self._split_replicated(group).items():
            if latest is None:
                continue
            if group.offset_positions.get(tp, -1) <= latest.position:
                self._cache_offsets(group, {tp: latest.value}, latest.position)
            if waiting:
                group.unreplicated_offsets[tp] = waiting
            else:
                del group.unreplicated_offsets[tp]

    def _split_replicated(
        self, group: Group
    ) -> dict[TopicPartition, tuple[UnreplicatedOffset | None, list[UnreplicatedOffset]]]:
        """Per partition with unreplicated commits: the latest one the ISR has (None: none yet)
        and those still waiting."""
        partition = self.partition_of(group.group_id)
        if not group.unreplicated_offsets or partition is None:
            return {}
        high_watermark = self.store.high_watermark(partition)
        split: dict[TopicPartition, tuple[UnreplicatedOffset | None, list[UnreplicatedOffset]]] = {}
        for tp, entries in list(group.unreplicated_offsets.items()):
            done = [entry for entry in entries if entry.needs < high_watermark]
            waiting = [entry for entry in entries if entry.needs >= high_watermark]
            split[tp] = (max(done, key=lambda entry: entry.position) if done else None, waiting)
        return split

    @staticmethod
    def _cache_offsets(group: Group, offsets: dict[TopicPartition, CommittedOffset], position: int | None) -> None:
        group.offsets.update(offsets)
        for tp in offsets:
            if position is None:
                group.offset_positions.pop(tp, None)
            else:
                group.offset_positions[tp] = position

    def store_txn_offsets(
        self,
        group: Group,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, int]:
        """Append a TxnOffsetCommit as the producer's transactional batch and stage it until the
        transaction's marker (``complete_txn``); per partition the error code."""
        results, valid = self._check_metadata_size(offsets)
        if not valid:
            return results
        entries = offset_entries(group.group_id, valid)
        pending = group.pending_txn_offsets
        previous = pending.stage(producer_id, valid)
        self._producer_groups.setdefault(producer_id, set()).add(group.group_id)
        try:
            records = encode_txn_records(entries, self.clock_ms(), producer_id, producer_epoch)
            position = self._append(group.group_id, entries, records)
        except StoreError as exc:
            code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE if exc.too_large else exc.code
            log.warning("transactional offset commit of group %s failed: %s", group.group_id, exc)
            pending.restore(producer_id, previous)
            results.update(dict.fromkeys(valid, code))
        except Exception:
            log.exception("transactional offset commit of group %s failed", group.group_id)
            pending.restore(producer_id, previous)
            results.update(dict.fromkeys(valid, ErrorCode.UNKNOWN_SERVER_ERROR))
        else:
            pending.appended(producer_id, valid, position)
            results.update(dict.fromkeys(valid, ErrorCode.NONE))
        return results

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> int:
        """A COMMIT/ABORT marker of ``producer_id`` landed on offsets ``partition``: materialize or
        drop the offsets it staged in this partition's groups; returns how many were applied.
        Committed ones are fetched once the marker is on the ISR (``cache_replicated``).
        Only the groups the producer staged offsets in are visited (Kafka's open groups per
        producer); a partition still loading replays the marker from the log instead."""
        group_ids = self._producer_groups.get(producer_id)
        if not group_ids:
            return 0
        applied = 0
        for group_id in list(group_ids):
            group = self.groups.get(group_id)
            if group is None or not group.pending_txn_offsets.has_producer(producer_id):
                group_ids.discard(group_id)  # completed, restored or unloaded meanwhile
                continue
            if self.partition_of(group_id) != partition:
                continue
            committed: dict[TopicPartition, CommittedOffset] = {}
            positions: dict[TopicPartition, int] = {}
            applied += group.pending_txn_offsets.complete(producer_id, commit, committed, positions)
            marker = self.store.log_end_offset(partition) - 1  # the marker, just appended
            for tp, value in committed.items():
                entry = UnreplicatedOffset(marker, positions.get(tp, marker), value)
                group.unreplicated_offsets.setdefault(tp, []).append(entry)
            self.cache_replicated(group)
            group_ids.discard(group_id)
        if not group_ids:
            del self._producer_groups[producer_id]
        return applied

    def write_tombstones(self, group_id: str, partitions: Iterable[TopicPartition], *, group: bool) -> None:
        """Tombstones for offsets (and the group record); a failure is logged, as Kafka does."""
        partitions = list(partitions)
        entries: list[tuple[bytes, bytes | None]] = [(offset_key(group_id, t, p), None) for t, p in partitions]
        if group:
            entries.append((group_key(group_id), None))
        if not entries:
            return
        cached = self.groups.get(group_id)
        if cached is not None:
            cached.pending_txn_offsets.remove(partitions)
        try:
            self._append(group_id, entries)
        except StoreError as exc:
            log.warning("writing tombstones for group %s failed: %s", group_id, exc)

    def remove_group(self, group: Group) -> None:
        """Delete an Empty group: Dead, tombstones for its offsets and metadata, out of the cache."""
        group.transition_to(GroupState.DEAD)
        self.cancel_group_timers(group.group_id)
        stored = group.offsets.keys() | group.unreplicated_offsets.keys()
        self.write_tombstones(group.group_id, list(stored), group=True)
        group.offsets.clear()
        group.unreplicated_offsets.clear()
        self.groups.pop(group.group_id, None)

    def remove_offsets_of_topics(self, topics: set[str]) -> int:
        """Forget the offsets of deleted topics in every group (Kafka ``handleDeletedPartitions``)."""
        removed = 0
        for group in list(self.groups.values()):
            gone = [tp for tp in group.offsets.keys() | group.unreplicated_offsets.keys() if tp[0] in topics]
            if gone:
                for tp in gone:
                    group.offsets.pop(tp, None)
                    group.unreplicated_offsets.pop(tp, None)
                self.write_tombstones(group.group_id, gone, group=False)
                removed += len(gone)
        return removed

    # -- offset expiry -------------------------------------------------------------------------

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Remove offsets past ``offsets.retention.minutes`` (Kafka's rules: an Empty group's
        from the time it became empty, a standalone committer's from each commit, a Stable
        consumer group's for topics it no longer subscribes to); Empty groups left without
        offsets die. Returns how many offsets expired."""
        now = self.clock_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        expired_total = 0
        for group in list(self.groups.values()):
            if self.status(group.group_id, allow_empty_id=True) is not None:
                continue
            self.cache_replicated(group)
            live = self.live_subscriptions(group.group_id)
            if live is None:
                expired = self._expired(group, now, retention)
            else:  # a KIP-848 group with members: only offsets of topics it does not subscribe to
                expired = [
                    tp
                    for tp, v in group.offsets.items()
                    if tp[0] not in live
                    and (v.expire_timestamp_ms if v.expire_timestamp_ms >= 0 else v.commit_timestamp_ms + retention)
                    <= now
                ]
            for tp in expired:
                del group.offsets[tp]
            expired_total += len(expired)
            dies = (
                group.is_(GroupState.EMPTY)
                and not group.offsets
                and not group.unreplicated_offsets
                and not group.pending_txn_offsets
            )
            if dies:
                group.transition_to(GroupState.DEAD)
                self.cancel_group_timers(group.group_id)
                self.groups.pop(group.group_id, None)
            if expired or dies:
                self.write_tombstones(group.group_id, expired, group=dies)
        if expired_total:
            log.info("expired %d offset(s)", expired_total)
        return expired_total

    @staticmethod
    def _expired(group: Group, now: int, retention: int) -> list[TopicPartition]:
        def old(tp: TopicPartition, base: int) -> bool:
            value = group.offsets[tp]
            deadline = value.expire_timestamp_ms if value.expire_timestamp_ms >= 0 else base + retention
            return deadline <= now

        if group.protocol_type is not None and group.is_(GroupState.EMPTY):
            state_ts = group.current_state_timestamp_ms
            return [
                tp for tp, v in group.offsets.items() if old(tp, state_ts if state_ts >= 0 else v.commit_timestamp_ms)
            ]
        if group.protocol_type == "consumer" and group.subscribed_topics is not None and group.is_(GroupState.STABLE):
            return [
                tp
                for tp, v in group.offsets.items()
                if tp[0] not in group.subscribed_topics and old(tp, v.commit_timestamp_ms)
            ]
        if group.protocol_type is None:
            return [tp for tp, v in group.offsets.items() if old(tp, v.commit_timestamp_ms)]
        return []

    def start(self) -> None:
        """Serve requests; offset expiry runs every ``offsets.retention.check.interval.ms``."""
        self.active = True
        self._schedule_expiry()

    def _schedule_expiry(self) -> None:
        def expire() -> None:
            try:
                self.expire_offsets()
            finally:
                self._schedule_expiry()

        interval = max(self.config.offsets_retention_check_interval_ms, 1)
        self.timers.schedule(("expire-offsets",), self.clock_ms() + interval, expire)

    def shutdown(self) -> None:
        """Stop serving: every waiting member hears NOT_COORDINATOR."""
        self.active = False
        for group in list(self.groups.values()):
            self.unload_group(group)
        self.partitions.clear()
        self._loads.clear()
        self.timers.clear()
        self._producer_groups.clear()
