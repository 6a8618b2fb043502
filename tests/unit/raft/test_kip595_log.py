"""KIP-595 "Log Structure": records identified by (offset, epoch), and the leader-epoch cache."""

from __future__ import annotations

import pytest

from broker.raft.log import Entry, OffsetAndEpoch, RaftLog
from tests.unit.raft.helpers import log_of


def test_epoch_cache_maps_each_epoch_to_its_start_offset() -> None:
    """ "After every observed epoch change, write the epoch and its start offset to the
    leader-epoch-checkpoint file and update the cache.\""""
    log = RaftLog(log_of(1, 1, 3, 3, 3, 4))
    assert log.epoch_cache() == [(1, 0), (3, 2), (4, 5)]
    assert log.end_offset_and_epoch() == OffsetAndEpoch(epoch=4, offset=6)


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (0, OffsetAndEpoch(0, 0)),
        (1, OffsetAndEpoch(1, 2)),
        (2, OffsetAndEpoch(1, 2)),
        (3, OffsetAndEpoch(3, 5)),
        (4, OffsetAndEpoch(4, 6)),
        (9, OffsetAndEpoch(4, 6)),
    ],
)
def test_end_offset_for_epoch_is_the_largest_epoch_not_above(epoch: int, expected: OffsetAndEpoch) -> None:
    log = RaftLog(log_of(1, 1, 3, 3, 3, 4))
    assert log.end_offset_for_epoch(epoch) == expected


def test_truncation_drops_the_epochs_that_start_at_or_after_it() -> None:
    log = RaftLog(log_of(1, 1, 3, 3, 3, 4))
    log.truncate_to(3)
    assert log.epoch_cache() == [(1, 0), (3, 2)]
    assert log.end_offset == 3
    log.truncate_to(2)
    assert log.epoch_cache() == [(1, 0)]
    assert log.last_epoch == 1
    log.append([Entry(2, 5, b"new")])
    assert log.epoch_cache() == [(1, 0), (5, 2)]


def test_appends_must_be_contiguous_with_non_decreasing_epochs() -> None:
    log = RaftLog(log_of(2, 2))
    with pytest.raises(ValueError, match="offset"):
        log.append([Entry(3, 2, b"gap")])
    with pytest.raises(ValueError, match="epoch"):
        log.append([Entry(2, 1, b"older epoch")])
    with pytest.raises(ValueError, match="outside"):
        log.truncate_to(3)


def test_read_is_bounded() -> None:
    log = RaftLog(log_of(1, 1, 1, 1))
    assert [e.offset for e in log.read(1, 2)] == [1, 2]
    assert log.read(4, 10) == ()
    with pytest.raises(ValueError, match="outside"):
        log.read(5, 1)
