"""The chaos transactions and metadata checkers (tests/chaos/txn.py, metadata.py) on hand-made
histories: each anomaly found when present, none on a clean history."""

from __future__ import annotations

from tests.chaos.checker import Op, Read
from tests.chaos.metadata import check_metadata
from tests.chaos.txn import check_txn


def _txn(process: str, n: int, outcome: str) -> list[Op]:
    value = f"{process}-{n}"
    return [Op(process, "invoke", value, -1, float(n), n), Op(process, outcome, value, -1, n + 0.5, n)]


def _found(anomalies) -> dict[str, int]:
    return {k: len(v) for k, v in anomalies.items() if v}


HISTORY = _txn("tx", 0, "ok") + _txn("tx", 1, "fail") + _txn("tx", 2, "info") + _txn("tx", 3, "ok")
CLEAN = {0: [(0, "tx-0/0"), (5, "tx-3/0")], 1: [(0, "tx-0/1"), (4, "tx-3/1")]}


def test_txn_clean() -> None:
    reads = [Read("rc", 0, 0, "tx-0/0", 1.0)]
    assert _found(check_txn(HISTORY, CLEAN, reads, 2, {"tx": 4})) == {}
    # the indeterminate transaction 2 committed after all: also valid
    final = {0: [(0, "tx-0/0"), (3, "tx-2/0"), (5, "tx-3/0")], 1: [(0, "tx-0/1"), (2, "tx-2/1"), (4, "tx-3/1")]}
    assert _found(check_txn(HISTORY, final, [], 2, {"tx": 4})) == {}


def test_txn_partial_aborted_lost_order() -> None:
    final = {0: [(0, "tx-0/0"), (1, "tx-1/0"), (2, "tx-1/1")], 1: [(0, "tx-0/1")]}
    found = _found(check_txn(HISTORY, final, [], 2, {"tx": 2}))
    # tx-1 aborted yet visible (and in one partition twice, not the other); tx-3 committed but lost
    assert found == {"aborted_visible": 1, "duplicated": 1, "partial": 1, "lost": 1}
    reordered = {0: [(0, "tx-3/0"), (5, "tx-0/0")], 1: [(0, "tx-0/1"), (4, "tx-3/1")]}
    assert _found(check_txn(HISTORY, reordered, [], 2, {"tx": 4})) == {"order": 1}


def test_txn_uncommitted_read_and_offsets() -> None:
    reads = [Read("rc", 0, 3, "tx-2/0", 1.0), Read("rc", 0, 1, "tx-1/0", 1.0)]
    found = _found(check_txn(HISTORY, CLEAN, reads, 2, {"tx": 4}))
    assert found == {"uncommitted_read": 2, "aborted_visible": 1}
    # offsets committed past what is visible, or short of it
    assert _found(check_txn(HISTORY, CLEAN, [], 2, {"tx": 3})) == {"offsets": 1}
    assert _found(check_txn(HISTORY, CLEAN, [], 2, {"tx": 2})) == {"offsets": 1}


def _meta(kind: str, name: str, outcome: str, n: int) -> list[Op]:
    value = f"{kind}:{name}"
    return [Op("m", "invoke", value, -1, float(n), n), Op("m", outcome, value, -1, n + 0.5, n)]


def test_metadata_checker() -> None:
    history = [
        *_meta("create", "t0", "ok", 0), *_meta("create-invalid", "t1", "fail", 1), *_meta("create", "t2", "ok", 2),
        *_meta("grow", "t2", "ok", 3), *_meta("acl", "a4", "ok", 4), *_meta("create", "t5", "ok", 5),
        *_meta("delete", "t5", "ok", 6), *_meta("create", "t7", "info", 7),
    ]  # fmt: skip
    good = {"topics": {"t0": 1, "t2": 2}, "acls": ["a4"]}
    assert _found(check_metadata(history, {4: good, 5: {**good, "topics": {**good["topics"], "t7": 1}}})) == {}
    bad = {"topics": {"t1": 1, "t2": 1, "t5": 1}, "acls": []}
    # t0 missing, t2 not grown, t5 not deleted, a4 missing; t1 (failed) visible
    assert _found(check_metadata(history, {4: good, 6: bad})) == {"missing": 4, "failed_visible": 1}
