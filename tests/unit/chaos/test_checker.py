"""The chaos queue checker (tests/chaos/checker.py) on hand-made histories: each anomaly type
found when present, none reported on a clean history."""

from __future__ import annotations

from tests.chaos.checker import Commit, Observation, Op, Read, check, check_group


def _send(process: str, index: int, value: str, partition: int, outcome: str, offset: int | None = None) -> list[Op]:
    return [
        Op(process, "invoke", value, partition, float(index), index),
        Op(process, outcome, value, partition, index + 0.5, index, offset),
    ]


def _counts(verdict) -> dict[str, int]:
    return {k: v for k, v in verdict.summary()["anomaly_counts"].items() if v}


def test_clean_history_is_valid() -> None:
    history = _send("a", 0, "a0", 0, "ok", 0) + _send("a", 1, "a1", 0, "ok", 1) + _send("b", 0, "b0", 1, "ok", 0)
    # an indeterminate send may or may not be there; a failed one is absent
    history += _send("b", 1, "b1", 1, "info") + _send("b", 2, "b2", 1, "fail")
    verdict = check(history, {0: [(0, "a0"), (1, "a1")], 1: [(0, "b0"), (1, "b1")]})
    assert verdict.valid, verdict.summary()
    assert (verdict.attempted, verdict.acknowledged, verdict.failed, verdict.indeterminate, verdict.read) == (
        5, 3, 1, 1, 4,
    )  # fmt: skip
    assert check(history, {0: [(0, "a0"), (1, "a1")], 1: [(0, "b0")]}).valid


def test_lost_acknowledged_write() -> None:
    history = _send("a", 0, "a0", 0, "ok", 0) + _send("a", 1, "a1", 0, "ok", 1)
    verdict = check(history, {0: [(0, "a0")]})
    assert _counts(verdict) == {"lost": 1}
    assert verdict.anomalies["lost"][0]["value"] == "a1"


def test_duplicate_phantom_and_failed_present() -> None:
    history = _send("a", 0, "a0", 0, "ok", 0) + _send("a", 1, "a1", 0, "fail")
    verdict = check(history, {0: [(0, "a0"), (1, "a0"), (2, "a1"), (3, "zz")]})
    counts = _counts(verdict)
    # a0 read twice: duplicated; its acknowledged position is one of them, so not wrong_position
    assert counts == {"duplicated": 1, "phantom": 1, "failed_present": 1}, verdict.summary()


def test_wrong_position() -> None:
    history = _send("a", 0, "a0", 0, "ok", 5)
    assert _counts(check(history, {0: [(0, "a0")]})) == {"wrong_position": 1}
    assert _counts(check(history, {1: [(5, "a0")]})) == {"wrong_position": 1}


def test_offset_order_violations() -> None:
    history = _send("a", 0, "a0", 0, "info") + _send("a", 1, "a1", 0, "info") + _send("b", 0, "b0", 0, "info")
    # offsets going backwards in the read
    assert _counts(check(history, {0: [(3, "a0"), (2, "b0")]})) == {"offset_order": 1}
    # one writer's values reordered (another writer's in between is fine)
    verdict = check(history, {0: [(0, "a1"), (1, "b0"), (2, "a0")]})
    assert _counts(verdict) == {"offset_order": 1}
    assert verdict.anomalies["offset_order"][0]["value"] == "a0"


def test_invoke_without_completion_is_indeterminate() -> None:
    history = [Op("a", "invoke", "a0", 0, 0.0, 0)]
    verdict = check(history, {0: [(0, "a0")]})
    assert verdict.valid
    assert verdict.indeterminate == 1
    assert check(history, {0: []}).valid


def test_acknowledged_without_an_offset_only_has_to_be_present() -> None:
    """librdkafka acknowledges a batch "implicitly" (no offset) when its request's outcome was
    uncertain and a later batch of the partition succeeded (``rd_kafka_dr_implicit_ack``): seen in
    a 100-fault run (seed 3); present once is valid, missing is lost."""
    history = _send("ck", 0, "ck0", 1, "ok", None) + _send("ck", 1, "ck1", 1, "ok", 1)
    assert check(history, {1: [(0, "ck0"), (1, "ck1")]}).valid
    assert _counts(check(history, {1: [(1, "ck1")]})) == {"lost": 1}


def _group(reads=(), commits=(), observations=(), final=None, committed=None):
    history = _send("a", 0, "a0", 0, "ok", 0) + _send("a", 1, "a1", 0, "ok", 1)
    final = {0: [(0, "a0"), (1, "a1")]} if final is None else final
    found = check_group(reads, commits, observations, history, final, committed or {0: 2})
    return {k: len(v) for k, v in found.items() if v}


def test_group_clean() -> None:
    reads = [Read("c1", 0, 0, "a0", 1.0), Read("c2", 0, 0, "a0", 2.0), Read("c2", 0, 1, "a1", 2.1)]
    commits = [Commit("c1", 0, 1, 1.1, True), Commit("c2", 0, 2, 2.2, True), Commit("c1", 0, 5, 3.0, False)]
    # overlapping observations may see either value; ordered ones must not go back
    observations = [Observation(0, 1, 1.0, 2.0), Observation(0, 2, 1.5, 1.9), Observation(0, 2, 2.5, 2.6)]
    assert _group(reads, commits, observations) == {}


def test_group_divergence_and_phantom_read() -> None:
    assert _group([Read("c1", 0, 0, "a0", 1.0), Read("c2", 0, 0, "a1", 1.0)]) == {"divergence": 2}
    assert _group([Read("c1", 0, 5, "a0", 1.0)]) == {"divergence": 1}  # not at that offset at the end
    assert _group([Read("c1", 0, 2, "zz", 1.0)], final={0: [(0, "a0"), (1, "a1"), (2, "zz")]}) == {"phantom_read": 1}


def test_group_commit_backwards() -> None:
    assert _group(observations=[Observation(0, 2, 1.0, 1.1), Observation(0, 1, 1.2, 1.3)]) == {"commit_backwards": 1}
    # an acknowledged commit above the final committed offset
    assert _group(commits=[Commit("c1", 0, 2, 1.0, True)], committed={0: 1}) == {"commit_backwards": 1}
