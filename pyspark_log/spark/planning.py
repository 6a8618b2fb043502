"""Micro-batch planning, pure: previous end offsets + what the broker holds -> next end offsets and ranges.

No I/O and no clock: the stream reader gathers a ``BrokerSnapshot`` and the time, calls
``plan_trigger`` and then ``plan_ranges``. Rules (Spark Kafka connector facts, plus pylog's fixes):

* **Never backwards.** The latest offset used for a partition is the highest the broker has
  reported during this run (``PlannerState.seen_latest``), so a broker that briefly reports a
  lower latest (a lagging new leader) never shrinks a range or fails the query.
* **Data loss** is judged by ``judge_read`` (the one decision, also used by the executors' reads)
  against the snapshot, per partition, and returned as ``DataLoss`` values; ``report_data_loss``
  raises ``PylogDataLossError`` (failOnDataLoss=true) or logs a warning. The plan is always the
  skipping one, so with failOnDataLoss=false it is used as is:

  - ``DELETED``: a partition with a committed offset no longer exists -> dropped from the end.
  - ``RETENTION``: the committed offset is below the earliest available -> range starts at earliest.
  - ``RESET``: the committed offset is beyond anything the broker holds or reported in this run
    (log truncated, broker reset) -> the next batch starts at the earliest available offset.
  - ``NEW_NOT_AT_ZERO``: a partition that appeared since the last trigger starts above 0.

  Offsets that are merely not consecutive (compaction, transaction markers) are not data loss:
  a range ``[start, end)`` may yield fewer than ``end - start`` records.
* **New partitions** (added partitions, new topics matching a pattern) start at their earliest
  offset, in the same trigger that discovers them.
* **maxOffsetsPerTrigger** is spread over partitions in proportion to their backlog: each gets
  ``floor(limit * backlog / total)``, but at least 1 so small partitions are not starved
  (so a trigger may exceed the limit by up to one offset per partition, as in the connector).
* **minOffsetsPerTrigger / maxTriggerDelay**: a trigger is skipped (end = start) while the total
  backlog is below the minimum, unless ``maxTriggerDelay`` has passed since the last batch that
  ran. The first trigger of a run always runs (the last-batch time starts at 0, as in the connector).
* **Splitting** (the connector's ``KafkaOffsetRangeCalculator``): ranges above
  ``maxRecordsPerPartition`` are cut into ``ceil(size / max)`` equal parts; then, if there are
  still fewer ranges than ``minPartitions``, large ranges are cut in proportion to their share
  of the total (``round(size / total * minPartitions)`` parts), small ones stay whole.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark_log.spark.access import TopicPartition

log = logging.getLogger(__name__)


class PylogDataLossError(RuntimeError):
    """Records the query should have read are gone and failOnDataLoss is true."""


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition; ``size`` is an upper bound on the record count."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    """What the broker said at one trigger: current partitions and their earliest/latest offsets."""

    partitions: frozenset[TopicPartition]
    earliest: Mapping[TopicPartition, int]
    latest: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class TriggerLimits:
    """Admission limits for one trigger; all ``None`` means read everything available."""

    max_offsets: int | None = None
    min_offsets: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000


@dataclass(frozen=True, slots=True)
class PlannerState:
    """What planning remembers between triggers of one run."""

    last_trigger_ms: int = 0
    seen_latest: Mapping[TopicPartition, int] = field(default_factory=dict)


class LossKind(enum.Enum):
    DELETED = "deleted"
    RETENTION = "retention"
    RESET = "reset"
    NEW_NOT_AT_ZERO = "new_not_at_zero"


@dataclass(frozen=True, slots=True)
class DataLoss:
    """Records of ``tp`` from ``expected`` on that can no longer be read (see ``LossKind``)."""

    tp: TopicPartition
    kind: LossKind
    expected: int
    earliest: int | None = None
    log_end: int | None = None

    def describe(self) -> str:
        if self.kind is LossKind.DELETED:
            return (
                f"{self.tp} no longer exists (topic or partition deleted); the query had read up to offset "
                f"{self.expected}"
            )
        if self.kind is LossKind.RETENTION:
            return (
                f"{self.tp}: offsets {self.expected} to {(self.earliest or 0) - 1} were deleted (retention or "
                f"DeleteRecords) before the query read them; the earliest available offset is {self.earliest}"
            )
        if self.kind is LossKind.RESET:
            return (
                f"{self.tp}: the query's next offset is {self.expected} but the broker's log ends at {self.log_end} "
                f"(earliest {self.earliest}); the log was truncated or the broker was reset"
            )
        return (
            f"{self.tp} is a new partition but starts at offset {self.expected} instead of 0; earlier records "
            "were deleted before the query saw them"
        )


def judge_read(
    tp: TopicPartition,
    position: int,
    *,
    earliest: int,
    latest: int,
    end: int | None = None,
    short_for_s: float = math.inf,
    grace_s: float = 0.0,
) -> DataLoss | None:
    """The one answer to "is this data loss?" when reading ``tp`` from ``position`` (up to ``end``,
    exclusive, when a range is being read) while the broker reports its log as ``[earliest, latest)``.

    ====================================================  =========================================
    case                                                  verdict
    ====================================================  =========================================
    ``position < earliest``                               ``RETENTION`` at once: records were
                                                          deleted (retention, DeleteRecords) before
                                                          they were read; a log start never moves back
    ``position > latest``, or ``end > latest``: the log   ``RESET`` once the log has been short for
    is shorter than what is to be read                    ``short_for_s >= grace_s``; ``None`` before
                                                          (a restarting broker or a lagging new leader
                                                          reports a shorter log for a while)
    otherwise, ``earliest <= position <= latest``         ``None``: offsets missing inside the log
                                                          (compaction, transaction markers, aborted
                                                          data) are not loss, a range may hold fewer
                                                          records than ``end - start``
    ====================================================  =========================================

    The defaults decide now (no grace). Callers: ``plan_trigger`` (with ``latest`` the highest seen
    in this run, so a broker that reports less for a while is not loss), ``decode.read_range`` (on an
    out-of-range fetch) and ``client_access.ClientAccess.fetch`` (the grace while the log is short).
    """
    if position < earliest:
        return DataLoss(tp, LossKind.RETENTION, position, earliest)
    needed = position if end is None else max(position, end)
    if needed > latest and short_for_s >= grace_s:
        return DataLoss(tp, LossKind.RESET, position, earliest, latest)
    return None


def report_data_loss(losses: Sequence[DataLoss], fail_on_data_loss: bool) -> None:
    """Raise ``PylogDataLossError`` listing every loss, or log one warning per loss."""
    if not losses:
        return
    if fail_on_data_loss:
        details = "; ".join(loss.describe() for loss in losses)
        raise PylogDataLossError(
            f"data loss: {details}. Set the option failOnDataLoss=false to skip to the earliest available "
            "offsets (the lost records are not read), or start the query with a new checkpoint"
        )
    for loss in losses:
        log.warning(
            "data loss, skipping (failOnDataLoss=false): %s. Set failOnDataLoss=true to stop the query instead",
            loss.describe(),
        )


@dataclass(frozen=True, slots=True)
class TriggerPlan:
    """Result of ``plan_trigger``.

    ``end`` is the batch's end offset (what ``latestOffset`` returns); ``begins`` is where each
    partition's range in this batch starts (``start`` unless skipped over lost data, earliest
    for new partitions); ``latest`` is the never-backwards latest offset used; ``delayed`` says
    minOffsetsPerTrigger held the trigger back (then ``end`` equals the start).
    """

    end: dict[TopicPartition, int]
    begins: dict[TopicPartition, int]
    latest: dict[TopicPartition, int]
    losses: tuple[DataLoss, ...]
    delayed: bool
    state: PlannerState


def merge_latest(
    seen: Mapping[TopicPartition, int], reported: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Per partition the higher of what was seen before and what is reported now."""
    merged = dict(seen)
    for tp, offset in reported.items():
        merged[tp] = max(merged.get(tp, offset), offset)
    return merged


def plan_trigger(
    start: Mapping[TopicPartition, int],
    snapshot: BrokerSnapshot,
    limits: TriggerLimits,
    state: PlannerState,
    now_ms: int,
) -> TriggerPlan:
    """Choose the next end offsets from ``start`` (the previous end) and ``snapshot``."""
    seen = merge_latest(state.seen_latest, snapshot.latest)
    losses: list[DataLoss] = []
    begins: dict[TopicPartition, int] = {}
    upper: dict[TopicPartition, int] = {}
    fixed_end: dict[TopicPartition, int] = {}  # partitions whose end is set, not planned

    for tp in sorted(set(start) - snapshot.partitions):
        losses.append(DataLoss(tp, LossKind.DELETED, start[tp]))
        seen.pop(tp, None)
    for tp in sorted(snapshot.partitions):
        if tp not in snapshot.earliest or tp not in snapshot.latest:
            # Vanished while the snapshot was taken: keep its offset, the next trigger will see clearly.
            if tp in start:
                fixed_end[tp] = start[tp]
            continue
        earliest, latest = snapshot.earliest[tp], seen[tp]
        if tp in start:
            begin = start[tp]
            loss = judge_read(tp, begin, earliest=earliest, latest=latest)
            if loss is not None and loss.kind is LossKind.RESET:
                # judged against the highest latest seen; reported with what the broker says now
                losses.append(dataclasses.replace(loss, log_end=snapshot.latest[tp]))
                seen[tp] = snapshot.latest[tp]
                fixed_end[tp] = earliest
                continue
            if loss is not None:
                losses.append(loss)
                begin = earliest
        else:
            begin = earliest
            if earliest > 0:
                losses.append(DataLoss(tp, LossKind.NEW_NOT_AT_ZERO, earliest, earliest))
        begins[tp] = begin
        upper[tp] = max(latest, begin)

    new_state = PlannerState(state.last_trigger_ms, seen)
    if limits.min_offsets is not None and not losses:
        delayed, last_ms = _delay(
            begins,
            upper=upper,
            min_offsets=limits.min_offsets,
            max_delay_ms=limits.max_trigger_delay_ms,
            last_trigger_ms=state.last_trigger_ms,
            now_ms=now_ms,
        )
        new_state = PlannerState(last_ms, seen)
        if delayed:
            return TriggerPlan(dict(start), dict(start), upper, (), True, new_state)

    end = rate_limit(begins, upper, limits.max_offsets) if limits.max_offsets is not None else dict(upper)
    for tp, offset in fixed_end.items():
        end[tp] = offset
        begins[tp] = offset
    return TriggerPlan(end, begins, upper, tuple(losses), False, new_state)


def _delay(
    begins: Mapping[TopicPartition, int],
    *,
    upper: Mapping[TopicPartition, int],
    min_offsets: int,
    max_delay_ms: int,
    last_trigger_ms: int,
    now_ms: int,
) -> tuple[bool, int]:
    """(skip this trigger?, new last-trigger time)."""
    if now_ms - last_trigger_ms >= max_delay_ms:
        return False, now_ms
    backlog = sum(max(0, upper[tp] - begins[tp]) for tp in begins)
    if backlog < min_offsets:
        return True, last_trigger_ms
    return False, now_ms


def rate_limit(
    begins: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """End offsets admitting about ``limit`` offsets, shared in proportion to each backlog."""
    backlog = {tp: latest[tp] - begins[tp] for tp in latest if tp in begins and latest[tp] - begins[tp] > 0}
    total = sum(backlog.values())
    end = dict(latest)
    if total == 0:
        return end
    for tp, size in backlog.items():
        share = max(1, limit * size // total)  # floor, but never starve a partition with data
        end[tp] = min(latest[tp], begins[tp] + share)
    return end


def plan_ranges(
    begins: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Non-empty ranges ``[begins[tp], end[tp])`` for partitions in both maps, split as configured."""
    ranges = [OffsetRange(tp, begins[tp], end[tp]) for tp in sorted(end) if tp in begins and end[tp] > begins[tp]]
    return split_ranges(ranges, min_partitions=min_partitions, max_records_per_partition=max_records_per_partition)


def split_ranges(
    ranges: Iterable[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Split ranges by ``max_records_per_partition``, then toward ``min_partitions``; sorted output."""
    result = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        result = [part for r in result for part in _divide(r, -(-r.size // max_records_per_partition))]
    if min_partitions is not None and min_partitions > len(result):
        total = sum(r.size for r in result)
        whole = [_part_count(r.size, total, min_partitions) == 1 for r in result]
        split_total = total - sum(r.size for r, keep in zip(result, whole, strict=True) if keep)
        split_min = max(min_partitions - sum(whole), 1)
        result = [
            part
            for r, keep in zip(result, whole, strict=True)
            for part in ([r] if keep else _divide(r, _part_count(r.size, split_total, split_min)))
        ]
    return sorted(r for r in result if r.size > 0)


def _part_count(size: int, total: int, min_parts: int) -> int:
    """``max(round_half_up(size / total * min_parts), 1)`` in exact integer arithmetic."""
    return max((2 * size * min_parts + total) // (2 * total), 1)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` consecutive ranges of near-equal size; the last absorbs the remainder."""
    out: list[OffsetRange] = []
    remaining, offset = r.size, r.start
    for i in range(parts):
        this = remaining // (parts - i)
        remaining -= this
        stop = min(offset + this, r.end)
        out.append(OffsetRange(r.tp, offset, stop))
        offset = stop
    return out
