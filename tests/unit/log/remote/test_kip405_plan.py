"""KIP-405 copy and local-deletion decisions: -2 resolves to retention.*, only rolled segments
below the LSO are copied, and only tiered segments are deleted locally."""

from __future__ import annotations

import pytest

from broker.log.remote.plan import (
    InvalidLocalRetention,
    LocalSegment,
    effective_local_retention,
    local_segments_to_delete,
    segments_to_copy,
)

SEGS = [LocalSegment(i * 10, i * 10 + 10, 100, i * 1000) for i in range(4)]  # last is active


def test_local_retention_defaults_and_checks() -> None:
    assert effective_local_retention(-2, -2, 604800000, -1) == (604800000, -1)
    assert effective_local_retention(1000, 50, -1, -1) == (1000, 50)
    assert effective_local_retention(-1, -1, -1, -1) == (-1, -1)
    with pytest.raises(InvalidLocalRetention, match=r"local.retention.bytes \(200\)"):
        effective_local_retention(-2, 200, -1, 100)
    with pytest.raises(InvalidLocalRetention, match=r"local\.retention\.ms"):
        effective_local_retention(-1, -2, 1000, -1)


def test_copy_only_rolled_segments_below_lso() -> None:
    bases = lambda segs: [s.base_offset for s in segs]  # noqa: E731
    assert bases(segments_to_copy(SEGS, highest_copied_offset=-1, last_stable_offset=40)) == [0, 10, 20]
    assert bases(segments_to_copy(SEGS, highest_copied_offset=9, last_stable_offset=40)) == [10, 20]
    assert bases(segments_to_copy(SEGS, highest_copied_offset=-1, last_stable_offset=25)) == [0, 10]
    assert segments_to_copy(SEGS, highest_copied_offset=29, last_stable_offset=40) == []


def test_local_delete_only_tiered() -> None:
    def bases(**kw: int) -> list[int]:
        args = {"now_ms": 10_000, "local_retention_ms": -1, "local_retention_bytes": -1} | kw
        return [s.base_offset for s in local_segments_to_delete(SEGS, **args)]

    assert bases(highest_copied_offset=29) == []
    assert bases(highest_copied_offset=29, local_retention_bytes=100) == [0, 10, 20]
    assert bases(highest_copied_offset=19, local_retention_bytes=100) == [0, 10]  # 20 not tiered
    assert bases(highest_copied_offset=-1, local_retention_bytes=0) == []
    assert bases(highest_copied_offset=29, local_retention_ms=8500) == [0, 10]  # ages 10000, 9000
