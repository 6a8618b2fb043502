"""Retry backoff (KIP-580): retry.backoff.ms doubling to retry.backoff.max.ms, jitter +-20%."""

from __future__ import annotations

import random

import pytest

from pyspark_log.client.backoff import ExponentialBackoff


def test_schedule_without_jitter_doubles_then_caps() -> None:
    b = ExponentialBackoff(100, 1000, jitter=0.0)
    assert [b.backoff_ms(n) for n in range(6)] == pytest.approx([100, 200, 400, 800, 1000, 1000])


def test_jitter_stays_within_twenty_percent_and_under_the_cap() -> None:
    b = ExponentialBackoff(100, 1000, rng=random.Random(42))
    for attempts in range(10):
        base = min(100 * 2**attempts, 1000)
        for _ in range(50):
            v = b.backoff_ms(attempts)
            assert base * 0.8 - 1e-9 <= v <= min(base * 1.2, 1000) + 1e-9


def test_same_seed_same_schedule() -> None:
    a = ExponentialBackoff(50, 5000, rng=random.Random(9))
    b = ExponentialBackoff(50, 5000, rng=random.Random(9))
    assert [a.backoff_ms(n) for n in range(12)] == [b.backoff_ms(n) for n in range(12)]


def test_max_below_initial_means_constant_backoff() -> None:
    b = ExponentialBackoff(100, 10, rng=random.Random(1))
    assert {b.backoff_ms(n) for n in range(5)} == {100.0}


def test_negative_attempts_are_treated_as_the_first_retry() -> None:
    b = ExponentialBackoff(100, 1000, jitter=0.0)
    assert b.backoff_ms(-3) == 100


@pytest.mark.parametrize("kwargs", [{"multiplier": 0.5}, {"jitter": 1.0}, {"jitter": -0.1}])
def test_rejects_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        ExponentialBackoff(100, 1000, **kwargs)  # type: ignore[arg-type]
