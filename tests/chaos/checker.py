"""The queue workload's checker: a pure function from a history and a final read to a verdict.

A **history** is the list of operations the writers recorded, in the Jepsen shape: every attempt to
append a value is an ``invoke`` followed by at most one completion, ``ok`` (acknowledged, with the
partition and offset the broker gave), ``fail`` (definitely not written: the client knows the
broker never took it) or ``info`` (indeterminate: a timeout, a connection lost after the send). A
**final read** is, per partition, the ``(offset, value)`` pairs a consumer read from the log start
to the high watermark after every fault was healed.

Anomalies (Kafka documentation §4.7 "Replication": "a committed message will not be lost, as long as there is
at least one
in sync replica alive"; an idempotent producer writes each record once and in order, KIP-98):

- ``lost``: acknowledged (``ok``) but not in the final read;
- ``duplicated``: read at more than one position;
- ``phantom``: read but never attempted (no ``invoke``);
- ``failed_present``: completed with a definite ``fail`` yet read;
- ``wrong_position``: acknowledged at a partition/offset other than where it was read (an ``ok``
  without an offset only has to be present: librdkafka acknowledges a batch whose request failed
  with an uncertain outcome (timeout, transport error) "implicitly" once a later batch of the same
  partition succeeds, and then reports no offset — ``rd_kafka_dr_implicit_ack`` in its
  ``rdkafka_broker.c``; the broker never answered it. pylog's producer likewise completes a batch
  answered ``OUT_OF_ORDER_SEQUENCE_NUMBER`` whose sequences a later acknowledged batch has passed
  with offset -1, as Kafka's Java producer does for ``DUPLICATE_SEQUENCE_NUMBER``; the writers
  record a negative offset as none);
- ``offset_order``: a partition's read offsets not strictly increasing, or one writer's values to
  one partition read in an order other than the order it sent them (idempotence keeps it).

``check_group`` checks what consumers in a group saw while the faults ran (``Read``: a record a
consumer was handed; ``Commit``: an OffsetCommit and its outcome; ``Observation``: the group's
committed offsets as fetched from the coordinator, with the fetch's start and end):

- ``divergence``: two consumers (or a consumer and the final read) saw different values at one
  offset, or a consumer saw a record the final read does not hold there (a consumer only reads
  below the high watermark, so what it saw was committed and must survive);
- ``phantom_read``: a consumer saw a value no writer attempted;
- ``commit_backwards``: an observation of a partition's committed offset lower than one that
  completed before it started (real-time order), or the final committed offset lower than an
  acknowledged commit.

No timing, no I/O: ``tests/unit/chaos/test_checker.py`` feeds it hand-made histories.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

ANOMALIES = ("lost", "duplicated", "phantom", "failed_present", "wrong_position", "offset_order")
GROUP_ANOMALIES = ("divergence", "phantom_read", "commit_backwards")


@dataclass(frozen=True)
class Op:
    """One history event. ``process`` names the writer; ``index`` orders one writer's invokes."""

    process: str
    type: str  # invoke | ok | fail | info
    value: str
    partition: int
    time: float
    index: int = 0
    offset: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Verdict:
    """Counts and examples per anomaly type; ``valid`` when there are none."""

    attempted: int = 0
    acknowledged: int = 0
    failed: int = 0
    indeterminate: int = 0
    read: int = 0
    anomalies: dict[str, list[Any]] = field(default_factory=lambda: {a: [] for a in ANOMALIES})

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def summary(self, examples: int = 20) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "attempted": self.attempted,
            "acknowledged": self.acknowledged,
            "failed": self.failed,
            "indeterminate": self.indeterminate,
            "read": self.read,
            "anomaly_counts": {a: len(v) for a, v in self.anomalies.items()},
            "anomaly_examples": {a: v[:examples] for a, v in self.anomalies.items() if v},
        }


def check(history: Iterable[Op], final_read: Mapping[int, Sequence[tuple[int, str]]]) -> Verdict:
    """The verdict of one run (see the module docstring for each anomaly)."""
    verdict = Verdict()
    invoked: dict[str, Op] = {}
    completed: dict[str, Op] = {}
    for op in history:
        if op.type == "invoke":
            invoked[op.value] = op
        elif op.type in ("ok", "fail", "info"):
            completed[op.value] = op
        else:
            raise ValueError(f"unknown op type {op.type!r}")
    verdict.attempted = len(invoked)
    verdict.acknowledged = sum(1 for op in completed.values() if op.type == "ok")
    verdict.failed = sum(1 for op in completed.values() if op.type == "fail")
    # an invoke without a completion (the writer stopped first) is indeterminate too
    verdict.indeterminate = verdict.attempted - verdict.acknowledged - verdict.failed

    positions: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition in sorted(final_read):
        previous = None
        for offset, value in final_read[partition]:
            verdict.read += 1
            positions[value].append((partition, offset))
            if previous is not None and offset <= previous:
                verdict.anomalies["offset_order"].append(
                    {"partition": partition, "offset": offset, "after": previous, "value": value}
                )
            previous = offset

    a = verdict.anomalies
    for value, where in positions.items():
        if len(where) > 1:
            a["duplicated"].append({"value": value, "positions": where})
        if value not in invoked:
            a["phantom"].append({"value": value, "positions": where})
        done = completed.get(value)
        if done is not None and done.type == "fail":
            a["failed_present"].append({"value": value, "positions": where, "error": done.error})
    for value, done in completed.items():
        if done.type != "ok":
            continue
        where = positions.get(value)
        if not where:
            a["lost"].append({"value": value, "partition": done.partition, "offset": done.offset})
        elif done.offset is not None and (done.partition, done.offset) not in where:
            a["wrong_position"].append({"value": value, "acknowledged": (done.partition, done.offset), "read": where})

    # one writer's values to one partition: read in the order it invoked them
    for partition in sorted(final_read):
        last_index: dict[str, tuple[int, int]] = {}
        for offset, value in final_read[partition]:
            op = invoked.get(value)
            if op is None or op.partition != partition:
                continue
            seen = last_index.get(op.process)
            if seen is not None and op.index < seen[0]:
                a["offset_order"].append(
                    {"partition": partition, "offset": offset, "value": value, "process": op.process,
                     "index": op.index, "after_index": seen[0], "after_offset": seen[1]}
                )  # fmt: skip
            if seen is None or op.index > seen[0]:
                last_index[op.process] = (op.index, offset)
    return verdict


@dataclass(frozen=True)
class Read:
    """A record consumer ``consumer`` was handed."""

    consumer: str
    partition: int
    offset: int
    value: str
    time: float


@dataclass(frozen=True)
class Commit:
    """An OffsetCommit of ``offset`` (the next offset to read) and whether it was acknowledged."""

    consumer: str
    partition: int
    offset: int
    time: float
    ok: bool


@dataclass(frozen=True)
class Observation:
    """The group's committed offset of ``partition`` fetched between ``start`` and ``end``."""

    partition: int
    offset: int
    start: float
    end: float


def check_group(
    reads: Iterable[Read], commits: Iterable[Commit], observations: Iterable[Observation],
    history: Iterable[Op], final_read: Mapping[int, Sequence[tuple[int, str]]],
    final_committed: Mapping[int, int],
) -> dict[str, list[Any]]:  # fmt: skip
    """The group anomalies (``GROUP_ANOMALIES``, see the module docstring), each with examples."""
    out: dict[str, list[Any]] = {a: [] for a in GROUP_ANOMALIES}
    invoked = {op.value for op in history if op.type == "invoke"}
    at: dict[tuple[int, int], str] = {(p, o): v for p, rows in final_read.items() for o, v in rows}
    seen: dict[tuple[int, int], tuple[str, str]] = {}
    for r in reads:
        key = (r.partition, r.offset)
        final = at.get(key)
        if final != r.value:
            out["divergence"].append({"consumer": r.consumer, "partition": r.partition, "offset": r.offset,
                                      "value": r.value, "final_read": final})  # fmt: skip
        other = seen.setdefault(key, (r.consumer, r.value))
        if other[1] != r.value:
            out["divergence"].append({"partition": r.partition, "offset": r.offset,
                                      "values": {other[0]: other[1], r.consumer: r.value}})  # fmt: skip
        if r.value not in invoked:
            out["phantom_read"].append({"consumer": r.consumer, "partition": r.partition, "offset": r.offset,
                                        "value": r.value})  # fmt: skip
    by_partition: dict[int, list[Observation]] = defaultdict(list)
    for obs in observations:
        by_partition[obs.partition].append(obs)
    for partition, rows in by_partition.items():
        done = sorted(rows, key=lambda o: o.end)
        ends = [o.end for o in done]
        highest: list[Observation] = list(itertools.accumulate(done, lambda x, y: y if y.offset > x.offset else x))
        for b in rows:
            i = bisect.bisect_left(ends, b.start)  # done[:i] completed before b started
            if i:
                high = highest[i - 1]
                if high.offset > b.offset:
                    out["commit_backwards"].append({"partition": partition, "observed": b.offset, "at": b.start,
                                                    "after": high.offset, "seen_at": high.end})  # fmt: skip
    for c in commits:
        if c.ok and final_committed.get(c.partition, -1) < c.offset:
            final = final_committed.get(c.partition)
            out["commit_backwards"].append({"partition": c.partition, "acknowledged_commit": c.offset,
                                            "by": c.consumer, "final_committed": final})  # fmt: skip
    return out
