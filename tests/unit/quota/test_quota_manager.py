"""Quota managers (Kafka documentation §4.9 "Quotas" Enforcement): usage per group, throttle decisions, no restart."""

from __future__ import annotations

from broker.quota.entity import CLIENT_ID
from broker.quota.manager import ClientQuotaManager, ClientQuotas, QuotaConfig, QuotaType

SLOW = ((CLIENT_ID, "slow"),)


def test_kafka_doc_4_9_a_violator_is_throttled_and_others_are_not():
    """each client group may produce/fetch up to X bytes/sec per broker before it is throttled."""
    m = ClientQuotaManager(QuotaType.PRODUCE, QuotaConfig(11, 1000))
    table = {SLOW: {"producer_byte_rate": 1000.0}}
    slow, fast = m.match(table, "ANONYMOUS", "slow"), m.match(table, "ANONYMOUS", "fast")
    assert m.record(slow, 5_000, 0) == 0  # 500 B/s over the padded 10 s window
    assert m.record(slow, 10_000, 1) > 0  # 1500 B/s: over
    assert m.record(fast, 10_000_000, 1) == 0  # no quota: never throttled
    metrics = {g.group.client_id: g for g in m.metrics(2)}
    assert metrics["slow"].throttle_time_avg_ms > 0
    assert metrics["fast"].usage_rate > 0


def test_a_changed_quota_applies_at_once():
    """quotas change without a rolling restart of the cluster."""
    m = ClientQuotaManager(QuotaType.PRODUCE)
    table = {SLOW: {"producer_byte_rate": 1000.0}}
    assert m.record(m.match(table, "ANONYMOUS", "slow"), 50_000, 0) > 0
    table = {SLOW: {"producer_byte_rate": 1_000_000.0}}
    assert m.throttle_time_ms(m.match(table, "ANONYMOUS", "slow"), 1) == 0


def test_fetch_max_value_in_window_and_unrecord():
    """Kafka's getMaxValueInQuotaWindow: "Returns maximum value that could be recorded without
    guaranteed throttling" — quota × (quota.window.num - 1) windows."""
    m = ClientQuotaManager(QuotaType.FETCH, QuotaConfig(11, 1000))
    match = m.match({SLOW: {"consumer_byte_rate": 1000.0}}, "ANONYMOUS", "slow")
    assert m.max_value_in_window(match) == 10_000
    assert m.record(match, 10_000, 0) == 0  # a whole capped response after a quiet period passes
    m.unrecord(match, 10_000, 0)
    assert m.record(match, 10_001, 0) > 0  # one byte more is always throttled
    m.unrecord(match, 10_001, 0)
    assert m.record(match, 20_000, 0) > 0
    m.unrecord(match, 20_000, 0)
    assert m.throttle_time_ms(match, 0) == 0


def test_request_percentage_throttle_is_bounded_at_one_window():
    m = ClientQuotaManager(QuotaType.REQUEST, QuotaConfig(11, 1000))
    match = m.match({SLOW: {"request_percentage": 1.0}}, "ANONYMOUS", "slow")
    assert m.record(match, 500.0, 0) == 1000


def test_idle_groups_are_forgotten():
    m = ClientQuotaManager(QuotaType.PRODUCE)
    m.record(m.match({}, "ANONYMOUS", "once"), 10, 0)
    assert len(m.metrics(1)) == 1
    assert m.metrics(3_600_001) == []


def test_client_quotas_keeps_the_three_kafka_quota_types():
    quotas = ClientQuotas(dict)
    assert [m.quota_type.key for m in quotas.managers()] == [
        "producer_byte_rate",
        "consumer_byte_rate",
        "request_percentage",
    ]
    assert [m.quota_type.usage_metric for m in quotas.managers()] == ["byte-rate", "byte-rate", "request-time"]
