"""KIP-405 remote log segment metadata: the state table of ``RemoteLogSegmentState`` (section
"RemoteLogSegmentMetadata"), the readable remote log, and remote retention candidates."""

from __future__ import annotations

import uuid

import pytest

from broker.log.remote.metadata import (
    IllegalStateTransition,
    RemoteLogMetadataCache,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    is_valid_transition,
    rebuild,
)

S = RemoteLogSegmentState
TIP = TopicIdPartition(uuid.UUID(int=7), "t", 0)


def _md(start: int, end: int, *, ts: int = 0, size: int = 100) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TIP), start, end, ts, 1, 0, size, {0: start})


def _upd(md: RemoteLogSegmentMetadata, state: S) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(md.segment_id, 1, state, 2)


def test_kafka_state_ids() -> None:
    assert [s.value for s in S] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("src", "dst", "ok"),
    [
        (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED, True),
        (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED, True),
        (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED, True),
        (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED, True),
        (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED, False),
        (S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_STARTED, False),
        (S.DELETE_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED, False),
        (S.DELETE_SEGMENT_FINISHED, S.COPY_SEGMENT_STARTED, False),
    ],
)
def test_transition_table(src: S, dst: S, ok: bool) -> None:
    assert is_valid_transition(src, dst) is ok


def test_illegal_update_raises_and_leaves_state() -> None:
    cache = RemoteLogMetadataCache()
    md = _md(0, 9)
    cache.add_copy_in_progress(md)
    with pytest.raises(IllegalStateTransition):
        cache.update(_upd(md, S.DELETE_SEGMENT_FINISHED))
    assert cache.all()[0].state is S.COPY_SEGMENT_STARTED
    with pytest.raises(IllegalStateTransition):
        cache.add_copy_in_progress(md)


def test_only_finished_copies_are_readable() -> None:
    a, b, c = _md(0, 9), _md(10, 19), _md(20, 29)
    cache = rebuild([a, b, c, _upd(a, S.COPY_SEGMENT_FINISHED), _upd(b, S.COPY_SEGMENT_FINISHED)])
    assert cache.log_start_offset() == 0
    assert cache.highest_copied_offset() == 19
    seg = cache.segment_for_offset(15)
    assert seg is not None
    assert seg.segment_id == b.segment_id
    assert cache.segment_for_offset(25) is None  # c still copying
    assert [m.segment_id for m in cache.orphaned_copies()] == [c.segment_id]


def test_delete_finished_forgets_and_moves_log_start() -> None:
    a, b = _md(0, 9), _md(10, 19)
    cache = rebuild([a, b, _upd(a, S.COPY_SEGMENT_FINISHED), _upd(b, S.COPY_SEGMENT_FINISHED)])
    cache.update(_upd(a, S.DELETE_SEGMENT_STARTED))
    assert cache.log_start_offset() == 10
    cache.update(_upd(a, S.DELETE_SEGMENT_FINISHED))
    assert [m.start_offset for m in cache.all()] == [10]
    nxt = cache.next_segment_after(5)
    assert nxt is not None
    assert nxt.start_offset == 10


def test_retention_candidates_by_time_size_and_log_start() -> None:
    segs = [_md(i * 10, i * 10 + 9, ts=i * 1000, size=100) for i in range(4)]
    cache = rebuild(segs + [_upd(m, S.COPY_SEGMENT_FINISHED) for m in segs])

    def starts(**kw: int) -> list[int]:
        args = {"now_ms": 3000, "retention_ms": -1, "retention_bytes": -1}
        args |= {"local_log_bytes": 0, "log_start_offset": 0} | kw
        return [m.start_offset for m in cache.retention_candidates(**args)]

    assert starts() == []
    assert starts(retention_ms=1500) == [0, 10]  # max timestamps 0 and 1000 are older
    assert starts(retention_bytes=250) == [0]  # 400-100 >= 250, then 300-100 < 250
    assert starts(retention_bytes=200) == [0, 10]
    assert starts(retention_bytes=200, local_log_bytes=100) == [0, 10, 20]
    assert starts(log_start_offset=15) == [0]


def test_metadata_validates_offsets() -> None:
    with pytest.raises(ValueError, match="offset range"):
        _md(10, 9)
