"""``planning.judge_read``: the one decision "is this data loss?", every case in one table.

The callers (``plan_trigger``, ``decode.read_range``, ``ClientAccess.fetch``) pass what they know;
the rules are Spark's Kafka connector's: records deleted before they were read are lost at once, a
log shorter than what is to be read is lost only once it stayed short for the grace (a broker
restarting or a lagging new leader reports less for a while), and offsets missing inside the log
(compaction, transaction markers, aborted data) are never loss.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from pyspark_log.spark.access import FetchedChunk, OffsetOutOfRangeError, TopicPartition
from pyspark_log.spark.decode import read_range
from pyspark_log.spark.planning import DataLoss, LossKind, OffsetRange, judge_read

TP = TopicPartition("t", 0)
GRACE_S = 5.0


def retention(position: int, earliest: int) -> DataLoss:
    return DataLoss(TP, LossKind.RETENTION, position, earliest)


def reset(position: int, earliest: int, latest: int) -> DataLoss:
    return DataLoss(TP, LossKind.RESET, position, earliest, latest)


@pytest.mark.parametrize(
    ("position", "end", "earliest", "latest", "short_for_s", "expected"),
    [
        # below the log start: lost at once, however long the grace
        pytest.param(5, None, 12, 40, 0.0, retention(5, 12), id="below-log-start"),
        pytest.param(11, 30, 12, 40, 0.0, retention(11, 12), id="range-starts-below-log-start"),
        pytest.param(0, None, 12, 0, 0.0, retention(0, 12), id="below-log-start-of-an-emptied-log"),
        # inside the log: never loss (a compacted range holds fewer records than end - start)
        pytest.param(12, None, 12, 40, math.inf, None, id="at-log-start"),
        pytest.param(20, 40, 12, 40, math.inf, None, id="compacted-gaps-inside-the-range"),
        pytest.param(40, None, 12, 40, math.inf, None, id="at-log-end-nothing-to-read-yet"),
        # beyond the log end while a broker restarts (or a new leader lags): wait out the grace
        pytest.param(90, None, 0, 20, 0.0, None, id="beyond-log-end-just-seen"),
        pytest.param(90, None, 0, 20, GRACE_S - 0.001, None, id="beyond-log-end-within-grace"),
        pytest.param(90, None, 0, 20, GRACE_S, reset(90, 0, 20), id="beyond-log-end-after-grace"),
        pytest.param(30, 50, 12, 40, 1.0, None, id="range-end-beyond-log-end-within-grace"),
        pytest.param(30, 50, 12, 40, GRACE_S, reset(30, 12, 40), id="range-end-beyond-log-end-after-grace"),
    ],
)
def test_every_case(
    position: int, end: int | None, earliest: int, latest: int, short_for_s: float, expected: DataLoss | None
) -> None:
    verdict = judge_read(
        TP, position, end=end, earliest=earliest, latest=latest, short_for_s=short_for_s, grace_s=GRACE_S
    )
    assert verdict == expected


def test_the_defaults_decide_now() -> None:
    """Without a grace (the planner, and a reader whose access already waited), a short log is lost."""
    assert judge_read(TP, 90, earliest=0, latest=20) == reset(90, 0, 20)
    assert judge_read(TP, 5, earliest=12, latest=40) == retention(5, 12)
    assert judge_read(TP, 20, end=40, earliest=12, latest=40) is None


def test_a_range_ending_at_the_log_end_is_whole() -> None:
    """``end`` is exclusive: a range up to the log end offset needs nothing beyond the log."""
    assert judge_read(TP, 12, end=40, earliest=12, latest=40, short_for_s=math.inf) is None
    assert judge_read(TP, 12, end=41, earliest=12, latest=40, short_for_s=math.inf) == reset(12, 12, 40)


class RefusingAccess:
    """A broker access whose fetch answers out of range although its log holds ``[0, 100)``."""

    def fetch(self, tp: TopicPartition, start_offset: int, end_offset: int, **_: object) -> Iterator[FetchedChunk]:
        raise OffsetOutOfRangeError(tp, start_offset, 0, 100)
        yield  # a generator, as the real fetch


def test_read_range_does_not_call_a_contradicting_broker_data_loss() -> None:
    """The reader asks ``judge_read``: an out-of-range answer for offsets the log holds is an error
    of the broker, raised as it is, never skipped as lost data (even with failOnDataLoss=false)."""
    reading = read_range(
        RefusingAccess(),  # type: ignore[arg-type]
        OffsetRange(TP, 5, 10),
        isolation_level="read_uncommitted",
        max_bytes=1 << 20,
        include_headers=False,
        fail_on_data_loss=False,
    )
    with pytest.raises(OffsetOutOfRangeError):
        list(reading)
