"""Source offsets: the checkpoint JSON form, and resolving starting/ending options to offsets.

Spark stores each micro-batch's end offset in the checkpoint as the JSON of what
``latestOffset`` returned. Ours is ``{"topic": {"partition": next_offset}}``: the offset of the
next record to read per partition, partition numbers as string keys (JSON objects only have
string keys). Topics and partitions are sorted so equal offsets always serialise identically
(Spark compares offsets by their JSON text).

Resolution turns an ``OffsetSpec`` (earliest, latest, JSON with -2/-1 sentinels, timestamps)
into concrete offsets with a ``BrokerAccess``. It raises ``PylogOptionError`` when the options
cannot be honoured (a named partition does not exist, no record is as late as a timestamp and
the strategy is ``error``). Data loss (offsets below the earliest available) is not judged
here: the planner does that for every batch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pyspark_log.spark.access import BrokerAccess, IsolationLevel, TopicPartition
from pyspark_log.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetSpec,
    PylogOptionError,
    SpecificOffsets,
    SpecificTimestamps,
    Subscription,
)

PartitionOffsets = dict[TopicPartition, int]


class CheckpointOffsetError(ValueError):
    """An offset from Spark's checkpoint is not in the ``{"topic": {"partition": offset}}`` form."""


def to_checkpoint(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition: offset}`` -> ``{"topic": {"partition": offset}}``, sorted, JSON-ready."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_checkpoint(data: object) -> PartitionOffsets:
    """The inverse of ``to_checkpoint``; raises ``CheckpointOffsetError`` on anything else."""
    if not isinstance(data, Mapping):
        raise CheckpointOffsetError(f"checkpoint offset {data!r} is not a JSON object of topics")
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(topic, str) or not isinstance(parts, Mapping):
            raise CheckpointOffsetError(f"checkpoint offset for topic {topic!r} is not an object: {parts!r}")
        for part, offset in parts.items():
            if not str(part).isdigit() or isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise CheckpointOffsetError(
                    f"checkpoint offset {topic!r}/{part!r} = {offset!r} is not a partition number and offset >= 0"
                )
            out[TopicPartition(topic, int(part))] = offset
    return out


def discover_partitions(subscription: Subscription, access: BrokerAccess) -> frozenset[TopicPartition]:
    """The partitions the subscription reads right now (existing ones only)."""
    return subscription.select(access.list_topics())


def check_assigned_exist(subscription: Subscription, partitions: Collection[TopicPartition]) -> None:
    """At query start every assigned partition must exist: a typo would otherwise read nothing."""
    if not isinstance(subscription, Assign):
        return
    missing = sorted(str(tp) for tp in set(subscription.partitions) - set(partitions))
    if missing:
        raise PylogOptionError(
            f"assign names partitions that do not exist on the broker ({', '.join(missing)}): "
            "create them first, or fix the topic names and partition numbers"
        )


def _check_named_partitions(
    spec_option: str, named: Collection[TopicPartition], partitions: frozenset[TopicPartition]
) -> None:
    unknown = sorted(str(tp) for tp in set(named) - partitions)
    if unknown:
        raise PylogOptionError(
            f"{spec_option} names partitions that do not exist on the broker ({', '.join(unknown)}): "
            "remove them or fix the partition numbers"
        )
    missing = sorted(str(tp) for tp in partitions - set(named))
    if missing:
        raise PylogOptionError(
            f"{spec_option} does not name every partition the query reads (missing: {', '.join(missing)}): "
            "add them, using -2 for earliest or -1 for latest if you do not care"
        )


def resolve_offsets(
    spec: OffsetSpec,
    partitions: frozenset[TopicPartition],
    access: BrokerAccess,
    isolation_level: IsolationLevel,
    *,
    is_starting: bool,
) -> PartitionOffsets:
    """Concrete offsets for ``partitions`` from ``spec``.

    Partitions that vanish while resolving are left out. A timestamp with no record as late
    resolves to the latest offset for ending offsets and for ``strategy="latest"``; otherwise it
    raises ``PylogOptionError``.
    """
    if isinstance(spec, EarliestOffsets):
        return access.earliest_offsets(partitions)
    if isinstance(spec, LatestOffsets):
        return access.latest_offsets(partitions, isolation_level)
    if isinstance(spec, SpecificOffsets):
        _check_named_partitions(spec.option, spec.offsets.keys(), partitions)
        earliest_tps = [tp for tp, off in spec.offsets.items() if off == EARLIEST]
        latest_tps = [tp for tp, off in spec.offsets.items() if off == LATEST]
        earliest = access.earliest_offsets(earliest_tps) if earliest_tps else {}
        latest = access.latest_offsets(latest_tps, isolation_level) if latest_tps else {}
        out: PartitionOffsets = {}
        for tp, off in spec.offsets.items():
            resolved = earliest.get(tp) if off == EARLIEST else latest.get(tp) if off == LATEST else off
            if resolved is not None:
                out[tp] = resolved
        return out
    if isinstance(spec, SpecificTimestamps):
        _check_named_partitions(spec.option, spec.timestamps.keys(), partitions)
        stamps = dict(spec.timestamps)
    else:
        assert isinstance(spec, GlobalTimestamp)
        stamps = dict.fromkeys(partitions, spec.timestamp)
    found = access.offsets_for_timestamps(stamps, isolation_level)
    unmatched = sorted(tp for tp, off in found.items() if off is None)
    if unmatched and is_starting and spec.strategy == "error":
        first = unmatched[0]
        raise PylogOptionError(
            f"{spec.option}: no record in {', '.join(map(str, unmatched))} has a timestamp at or after "
            f"{stamps[first]}: set startingOffsetsByTimestampStrategy=latest to start those partitions at "
            "their latest offset, or use an earlier timestamp"
        )
    fallback = access.latest_offsets(unmatched, isolation_level) if unmatched else {}
    resolved_ts: PartitionOffsets = {}
    for tp, found_offset in found.items():
        value = fallback.get(tp) if found_offset is None else found_offset
        if value is not None:
            resolved_ts[tp] = value
    return resolved_ts


def check_batch_bounds(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    ending_option: str,
) -> None:
    """A batch query's ending offset may lie neither before its start nor beyond the log end."""
    for tp in sorted(end):
        if tp in latest and end[tp] > latest[tp]:
            raise PylogOptionError(
                f"{ending_option} resolves to {end[tp]} for {tp}, beyond its latest offset {latest[tp]}: "
                "use -1 (latest) or an offset the partition already has"
            )
        if tp in start and end[tp] < start[tp]:
            raise PylogOptionError(
                f"{ending_option} resolves to {end[tp]} for {tp}, before the starting offset {start[tp]}: "
                "move the ending offset or timestamp later, or the starting one earlier"
            )
