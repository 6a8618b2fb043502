"""The batch and streaming readers of ``format("pylog")`` (PySpark Python Data Source API).

Driver side, the readers resolve offsets and plan ranges with a ``BrokerAccess`` (opened lazily,
never pickled); executor side, ``read`` opens its own access and turns each ``OffsetRange`` into
pyarrow RecordBatches (``decode.read_range``). Planning rules live in ``planning.py``. With
``readPath=files|auto`` the readers also plan, per partition, where its segment files are
(``direct_read.plan_direct``), and the tasks read those files instead (``direct_read.read_direct``).

``PylogStreamReader`` keeps, for one run of a query, the planner state (highest latest offset
seen per partition, time of the last batch that ran), the plans of recent batches (so
``partitions(start, end)`` reuses where each range begins), the Trigger.AvailableNow target and,
for PySpark < 4.2 whose ``latestOffset()`` gets no start, the last end offset it returned or
was shown by ``partitions``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from pyspark_log.spark import compat
from pyspark_log.spark.access import BrokerAccess, BrokerAccessError, TopicPartition
from pyspark_log.spark.client_access import open_access
from pyspark_log.spark.decode import read_through_broker
from pyspark_log.spark.direct_read import DirectPlan, plan_direct, read_direct
from pyspark_log.spark.offsets import (
    check_assigned_exist,
    check_batch_bounds,
    discover_partitions,
    from_checkpoint,
    resolve_offsets,
    to_checkpoint,
)
from pyspark_log.spark.options import SourceOptions
from pyspark_log.spark.planning import (
    BrokerSnapshot,
    DataLoss,
    LossKind,
    OffsetRange,
    PlannerState,
    TriggerLimits,
    plan_ranges,
    plan_trigger,
    report_data_loss,
)

log = logging.getLogger(__name__)

AccessFactory = Callable[[SourceOptions], BrokerAccess]
Offsets = dict[TopicPartition, int]
_PLAN_CACHE_SIZE = 16


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PylogInputPartition(InputPartition):
    """One Spark task: the records of one ``OffsetRange`` (``value``); ``direct`` says how to read
    it from segment files (``readPath=auto|files``), None to fetch it through the broker."""

    def __init__(self, offset_range: OffsetRange, direct: DirectPlan | None = None) -> None:
        super().__init__(offset_range)
        self.direct = direct

    def __repr__(self) -> str:
        r = self.value
        return f"PylogInputPartition({r.tp}, [{r.start}, {r.end}))"


def _to_partitions(
    ranges: list[OffsetRange], direct: Mapping[TopicPartition, DirectPlan] | None = None
) -> list[InputPartition]:
    plans = direct or {}
    return [PylogInputPartition(r, plans.get(r.tp)) for r in ranges]


def _read(options: SourceOptions, factory: AccessFactory, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    # Spark's placeholder when there was nothing to plan: a partition without a range, or
    # (PySpark 4.0) None itself
    r = getattr(partition, "value", None)
    if not isinstance(r, OffsetRange):
        return
    direct = getattr(partition, "direct", None)
    if direct is not None:
        yield from read_direct(options, factory, r, direct)
        return
    yield from read_through_broker(factory, options, r)


class PylogBatchReader(DataSourceReader):
    """``spark.read.format("pylog")``: one pass over [starting, ending) offsets."""

    def __init__(self, options: SourceOptions, access_factory: AccessFactory = open_access) -> None:
        assert options.ending is not None, "batch reads need ending offsets"
        self.options = options
        self._factory = access_factory

    def partitions(self) -> list[InputPartition]:
        opts = self.options
        assert opts.ending is not None
        access = self._factory(opts)
        try:
            tps = discover_partitions(opts.subscription, access)
            check_assigned_exist(opts.subscription, tps)
            start = resolve_offsets(opts.starting, tps, access, opts.isolation_level, is_starting=True)
            end = resolve_offsets(opts.ending, tps, access, opts.isolation_level, is_starting=False)
            latest = access.latest_offsets(list(end), opts.isolation_level)
            check_batch_bounds(start, end, latest, opts.ending.option)
            earliest = access.earliest_offsets(list(start))
            direct = plan_direct(opts, access, latest)
        finally:
            access.close()
        losses = [
            DataLoss(tp, LossKind.RETENTION, off, earliest[tp])
            for tp, off in sorted(start.items())
            if tp in earliest and off < earliest[tp] and off < end.get(tp, 0)
        ]
        report_data_loss(losses, opts.fail_on_data_loss)
        begins = {tp: max(off, earliest.get(tp, off)) for tp, off in start.items()}
        ranges = plan_ranges(
            begins, end, min_partitions=opts.min_partitions, max_records_per_partition=opts.max_records_per_partition
        )
        return _to_partitions(ranges, direct)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self._factory, partition)


class PylogStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("pylog")``: micro-batches over offset ranges (see module docstring)."""

    def __init__(
        self,
        options: SourceOptions,
        access_factory: AccessFactory = open_access,
        clock_ms: Callable[[], int] = wall_clock_ms,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options
        self._factory = access_factory
        self._clock_ms = clock_ms
        self._sleep = sleep
        self._access: BrokerAccess | None = None
        self._state = PlannerState()
        self._latest: Offsets | None = None
        self._last_end: Offsets | None = None
        self._available_now: Offsets | None = None
        self._initial: Offsets | None = None
        self._plans: dict[tuple[str, str], Offsets] = {}
        self._group_committed: Offsets | None = None
        if not compat.HAS_READ_LIMITS and (
            options.max_offsets_per_trigger is not None or options.min_offsets_per_trigger is not None
        ):
            log.warning(compat.LEGACY_NOTE)

    # Executors get a copy without the driver's connection or planning state.
    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_factory": self._factory}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"], state["_factory"])  # type: ignore[misc]

    def _broker(self) -> BrokerAccess:
        if self._access is None:
            self._access = self._factory(self.options)
        return self._access

    # -- offsets -------------------------------------------------------------------------------

    def initialOffset(self) -> dict:  # noqa: N802 - PySpark API name
        start = self._initial_offsets()
        self._last_end = start
        return to_checkpoint(start)

    def _initial_offsets(self) -> Offsets:
        """startingOffsets resolved once per run: PySpark < 4.2 asks ``latestOffset()`` of a new
        query before ``initialOffset()``, and both must see the same start (``latest`` moves)."""
        if self._initial is None:
            opts, access = self.options, self._broker()
            tps = discover_partitions(opts.subscription, access)
            check_assigned_exist(opts.subscription, tps)
            self._initial = resolve_offsets(opts.starting, tps, access, opts.isolation_level, is_starting=True)
            log.info("pylog initial offsets: %s", self._initial)
        return dict(self._initial)

    def getDefaultReadLimit(self) -> Any:  # noqa: N802 - PySpark API name
        return compat.read_limit(self.options.max_offsets_per_trigger, self.options.min_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - PySpark API name
        """Fix the target: the latest offsets now. Later batches never read past them."""
        access = self._broker()
        tps = discover_partitions(self.options.subscription, access)
        self._available_now = access.latest_offsets(tps, self.options.isolation_level)
        log.info("pylog Trigger.AvailableNow target: %s", self._available_now)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802 - PySpark API name
        """The next batch's end offset. ``start``/``limit`` come from PySpark 4.2+; without them
        the start is the last end offset this reader returned or was shown."""
        if start is not None:
            start_offsets = from_checkpoint(start)
            self._commit_to_group(start_offsets)
        elif self._last_end is not None:
            start_offsets = self._last_end
        else:
            # PySpark < 4.2: a restarted query shows its checkpoint's offsets first (Spark's
            # setLatestSeenOffset calls partitions(end, end)), so nothing shown means a new query,
            # which starts at startingOffsets (Spark asks initialOffset() only after this call).
            start_offsets = self._initial_offsets()
        limits = self._limits(limit)
        plan = plan_trigger(start_offsets, self._snapshot(start_offsets), limits, self._state, self._clock_ms())
        report_data_loss(plan.losses, self.options.fail_on_data_loss)
        self._state = plan.state
        self._latest = plan.latest
        self._last_end = plan.end
        end = to_checkpoint(plan.end)
        self._remember(start_offsets, plan.end, plan.begins)
        return end

    def reportLatestOffset(self) -> dict | None:  # noqa: N802 - PySpark API name
        return to_checkpoint(self._latest) if self._latest else None

    def _limits(self, limit: Any) -> TriggerLimits:
        opts = self.options
        max_rows, min_rows = opts.max_offsets_per_trigger, opts.min_offsets_per_trigger
        kind = type(limit).__name__ if limit is not None else None
        if kind == "ReadAllAvailable":
            max_rows = min_rows = None
        elif kind == "ReadMaxRows":
            max_rows = int(limit.max_rows)
        elif kind == "ReadMinRows":
            min_rows = int(limit.min_rows)
        elif kind is not None:
            log.info("pylog ignores read limit %r; using maxOffsetsPerTrigger/minOffsetsPerTrigger", limit)
        if self._available_now is not None:
            min_rows = None  # waiting for more data would never end an AvailableNow run
        return TriggerLimits(max_rows, min_rows, opts.max_trigger_delay_ms)

    def _snapshot(self, start: Mapping[TopicPartition, int]) -> BrokerSnapshot:
        """Partitions, earliest and latest offsets. Latest is asked again (fetchOffset.numRetries)
        while it is below a start offset not seen reached in this run (a lagging leader, or a
        broker reset). Under Trigger.AvailableNow latest is the target, except where the target
        is below the start (taken from a lagging broker): there the fresh answer is used."""
        opts, access = self.options, self._broker()
        tps = discover_partitions(opts.subscription, access)
        seen = self._state.seen_latest
        latest = access.latest_offsets(tps, opts.isolation_level)
        for _ in range(opts.fetch_offset_retries - 1):
            behind = sorted(tp for tp, off in latest.items() if off < start.get(tp, 0) and seen.get(tp, -1) < start[tp])
            if not behind:
                break
            log.warning("pylog: latest offsets of %s are below the query's offsets; asking again", behind)
            self._sleep(opts.fetch_offset_retry_interval_ms / 1000)
            latest = access.latest_offsets(tps, opts.isolation_level)
        if self._available_now is not None:
            target = self._available_now
            tps = frozenset(tp for tp in tps if tp in target)
            for tp in tps:
                if target[tp] < start.get(tp, 0) and tp in latest:
                    target[tp] = max(target[tp], latest[tp])
            latest = {tp: target[tp] for tp in tps}
        earliest = access.earliest_offsets(tps)
        return BrokerSnapshot(tps, earliest, latest)

    # -- planning ------------------------------------------------------------------------------

    def _remember(self, start: Mapping[TopicPartition, int], end: Offsets, begins: Offsets) -> None:
        key = (json.dumps(to_checkpoint(start)), json.dumps(to_checkpoint(end)))
        self._plans[key] = begins
        while len(self._plans) > _PLAN_CACHE_SIZE:
            del self._plans[next(iter(self._plans))]

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        start_offsets, end_offsets = from_checkpoint(start), from_checkpoint(end)
        self._last_end = end_offsets
        if start_offsets == end_offsets:
            return []
        key = (json.dumps(to_checkpoint(start_offsets)), json.dumps(to_checkpoint(end_offsets)))
        begins = self._plans.get(key)
        if begins is None:  # replaying a batch planned before a restart
            begins = dict(start_offsets)
            new = [tp for tp in end_offsets if tp not in start_offsets]
            if new:
                begins.update(self._broker().earliest_offsets(new))
        ranges = plan_ranges(
            begins,
            end_offsets,
            min_partitions=self.options.min_partitions,
            max_records_per_partition=self.options.max_records_per_partition,
        )
        direct = {}
        if ranges and self.options.read_path != "broker":
            # files are read up to what the broker says is committed now (a replayed batch's end
            # may be beyond a log that was truncated since: that part goes through the broker)
            latest = self._broker().latest_offsets([r.tp for r in ranges], self.options.isolation_level)
            bounds = {r.tp: min(end_offsets[r.tp], latest[r.tp]) for r in ranges if r.tp in latest}
            direct = plan_direct(self.options, self._broker(), bounds)
        return _to_partitions(ranges, direct)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self._factory, partition)

    def commit(self, end: dict) -> None:
        """Spark finished the batch ending at ``end``; with groupId set, store it in that group."""
        self._commit_to_group(from_checkpoint(end))

    def _commit_to_group(self, offsets: Offsets) -> None:
        """Store ``offsets`` in the groupId group unless they were the last stored.

        Spark calls ``commit`` for a batch only when it starts the next one, so a query that
        waits for data would show a lag of one batch forever; ``latestOffset(start, ...)`` (called
        once the previous batch is in the checkpoint's commit log) stores ``start`` too."""
        group_id = self.options.group_id
        if group_id is None or not offsets or offsets == self._group_committed:
            return
        try:
            self._broker().commit_offsets(group_id, offsets)
            self._group_committed = dict(offsets)
        except (BrokerAccessError, OSError) as exc:
            log.warning("pylog: could not commit offsets to group %s (the query is unaffected): %s", group_id, exc)

    def stop(self) -> None:
        if self._access is not None:
            self._access.close()
            self._access = None


compat.mark_supports_available_now(PylogStreamReader)
