"""KIP-599 controller mutation quota: the token bucket and the strict/permissive request quotas.

KIP-599: "K = min(K + (now - T) * R), B)"; "A partition mutation with N partitions is admitted iff
K >= 0, and updates K = K - N"; "The throttle time is defined with: -K / R"; "R = Q, B = Q * S * W".
"""

from __future__ import annotations

import pytest

from broker.quota.entity import CLIENT_ID, CONTROLLER_MUTATION_RATE, USER
from broker.quota.manager import QuotaConfig
from broker.quota.mutation import ControllerMutationQuotas, MutationQuota, TokenBucket


def test_kip599_bucket_is_q_per_second_up_to_q_times_s_times_w_and_starts_full():
    bucket = TokenBucket.full(5, QuotaConfig(num_samples=100, window_ms=1000), now_ms=0)
    assert (bucket.rate, bucket.burst, bucket.tokens) == (5, 500, 500)


def test_kip599_example_560_mutations_against_q5_s100_w1_owe_12_seconds():
    """KIP-599's example: "R = 5, B = 500. The burst of 560 mutations brings the number of tokens
    to -60. The throttle time is -(-60) / 5 = 12s." """
    bucket = TokenBucket.full(5, QuotaConfig(num_samples=100, window_ms=1000), now_ms=0)
    assert bucket.admits(0)
    bucket.record(560, 0)
    assert bucket.tokens == -60
    assert bucket.throttle_time_ms(0) == 12_000
    assert not bucket.admits(11_999)  # still in debt just before the 12 s
    assert bucket.admits(12_000)
    assert bucket.throttle_time_ms(12_000) == 0


def test_kip599_tokens_accumulate_at_the_rate_and_never_beyond_the_burst():
    bucket = TokenBucket.full(2, QuotaConfig(num_samples=3, window_ms=1000), now_ms=0)
    bucket.record(6, 0)
    assert bucket.tokens == 0
    bucket.refill(1500)
    assert bucket.tokens == pytest.approx(3)
    bucket.refill(60_000)
    assert bucket.tokens == 6


def test_kip599_a_topic_of_any_size_is_admitted_while_the_bucket_is_not_in_debt():
    """ "we allow the number of tokens to become negative to accommodate any number of partitions
    for a topic" """
    bucket = TokenBucket.full(1, QuotaConfig(num_samples=2, window_ms=1000), now_ms=0)
    assert bucket.admits(0)
    bucket.record(1000, 0)
    assert bucket.tokens == -998
    assert bucket.throttle_time_ms(0) == 998_000


def _quotas(table_value: float = 2.0) -> tuple[ControllerMutationQuotas, dict]:
    table = {((CLIENT_ID, "admin"),): {CONTROLLER_MUTATION_RATE: table_value}}
    return ControllerMutationQuotas(QuotaConfig(num_samples=2, window_ms=1000)), table


def test_kip599_strict_quota_rejects_once_in_debt_and_reports_that_throttle_time():
    """New request versions: "the new QUOTA_VIOLATED error code will be used to inform client that
    a topic has been rejected" with the throttle time; a request that only went into debt is not
    throttled itself."""
    quotas, table = _quotas()
    first = quotas.quota_for(table, "ANONYMOUS", "admin", strict=True, now_ms=0)
    assert first.admits(0)
    first.record(10, 0)  # bucket 4 -> -6
    assert first.throttle_time_ms(0) == 0
    second = quotas.quota_for(table, "ANONYMOUS", "admin", strict=True, now_ms=1000)
    assert not second.admits(1000)  # -6 + 2 = -4: still in debt
    assert second.throttle_time_ms(1000) == 2000


def test_kip599_permissive_quota_accepts_everything_and_throttles_by_the_debt():
    """Old request versions: "we propose to always accept them and to throttle the client by muting
    its channel"."""
    quotas, table = _quotas()
    quota = quotas.quota_for(table, "ANONYMOUS", "admin", strict=False, now_ms=0)
    for _ in range(3):
        assert quota.admits(0)
        quota.record(4, 0)
    assert quota.throttle_time_ms(0) == 4000  # 4 - 12 = -8 tokens at 2/s


def test_kip599_groups_follow_the_precedence_list_and_share_one_bucket():
    quotas = ControllerMutationQuotas(QuotaConfig(num_samples=2, window_ms=1000))
    table = {((USER, "alice"),): {CONTROLLER_MUTATION_RATE: 1.0}}
    a = quotas.quota_for(table, "alice", "tool-a", strict=True, now_ms=0)
    a.record(5, 0)
    b = quotas.quota_for(table, "alice", "tool-b", strict=True, now_ms=0)  # same user: same bucket
    assert not b.admits(0)
    other = quotas.quota_for(table, "bob", "tool-a", strict=True, now_ms=0)
    assert other.bucket is None
    assert other.admits(0)


def test_kip599_a_changed_quota_applies_at_once():
    """The time since the bucket's last update is refilled at the quota of the moment (Kafka's
    TokenBucket reads the quota when it refills), and the burst follows the new quota."""
    quotas, table = _quotas(1.0)
    quotas.quota_for(table, "ANONYMOUS", "admin", strict=True, now_ms=0).record(4, 0)  # 2 - 4 = -2
    raised = {((CLIENT_ID, "admin"),): {CONTROLLER_MUTATION_RATE: 100.0}}
    quota = quotas.quota_for(raised, "ANONYMOUS", "admin", strict=True, now_ms=100)
    assert quota.bucket is not None
    assert (quota.bucket.rate, quota.bucket.burst) == (100, 200)
    assert quota.admits(100)  # -2 + 0.1 s x 100/s = 8
    assert quota.bucket.tokens == pytest.approx(8)


def test_no_quota_never_throttles():
    quota = MutationQuota(None, strict=True)
    quota.record(10**6, 0)
    assert quota.admits(0)
    assert quota.throttle_time_ms(0) == 0
