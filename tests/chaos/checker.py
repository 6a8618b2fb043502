"""The queue workload's checker: a pure function from a history and a final read to a verdict.

A **history** is the list of operations the writers recorded, in the Jepsen shape: every attempt to
append a value is an ``invoke`` followed by at most one completion, ``ok`` (acknowledged, with the
partition and offset the broker gave), ``fail`` (definitely not written: the client knows the
broker never took it) or ``info`` (indeterminate: a timeout, a connection lost after the send). A
**final read** is, per partition, the ``(offset, value)`` pairs a consumer read from the log start
to the high watermark after every fault was healed.

Anomalies (seed 000 §4.7: "a committed message will not be lost, as long as there is at least one
in sync replica alive"; an idempotent producer writes each record once and in order, KIP-98):

- ``lost``: acknowledged (``ok``) but not in the final read;
- ``duplicated``: read at more than one position;
- ``phantom``: read but never attempted (no ``invoke``);
- ``failed_present``: completed with a definite ``fail`` yet read;
- ``wrong_position``: acknowledged at a partition/offset other than where it was read;
- ``offset_order``: a partition's read offsets not strictly increasing, or one writer's values to
  one partition read in an order other than the order it sent them (idempotence keeps it).

No timing, no I/O: ``tests/unit/chaos/test_checker.py`` feeds it hand-made histories.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

ANOMALIES = ("lost", "duplicated", "phantom", "failed_present", "wrong_position", "offset_order")


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
        elif (done.partition, done.offset) not in where:
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
