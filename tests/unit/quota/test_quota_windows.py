"""Kafka documentation §4.9 "Quotas" Enforcement: byte rates and thread usage are measured over several small
windows so that violations are caught and corrected quickly — rates over several small windows (Kafka's
SampledStat + Rate), and the delay that brings a violator back under its quota (QuotaUtils)."""

from __future__ import annotations

import pytest

from broker.quota.rate import SampledRate, bounded_throttle_time_ms, throttle_time_ms


def test_a_fresh_rate_divides_by_at_least_num_samples_minus_one_windows():
    """The first bytes after a quiet period do not look like an enormous rate: Kafka's
    ``Rate.windowSize`` pads to ``samples - 1`` full windows."""
    rate = SampledRate(11, 1000)
    rate.record(10_000, now_ms=0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.rate(0) == pytest.approx(1000.0)


def test_window_size_grows_with_elapsed_time_past_the_padding():
    rate = SampledRate(3, 1000)
    for t in range(0, 5000, 500):
        rate.record(100, t)
    # 3 samples kept, begun at 2000, 3000 and 4000 (the slots of 0 and 1000 were reused)
    assert rate.window_size_ms(4500) == 2500
    assert rate.total(4500) == pytest.approx(600)


def test_samples_older_than_the_whole_window_no_longer_count():
    """A burst is forgotten once ``quota.window.num × quota.window.size.seconds`` has passed."""
    rate = SampledRate(11, 1000)
    rate.record(1_000_000, 0)
    assert rate.total(10_999) == 1_000_000
    assert rate.total(11_000) == 0


def test_unrecord_takes_back_a_value():
    """A throttled Fetch's bytes do not count (Kafka's unrecordQuotaSensor)."""
    rate = SampledRate(11, 1000)
    rate.record(500, 0)
    rate.record(-500, 10)
    assert rate.total(20) == 0


def test_avg_is_the_mean_of_recorded_values():
    rate = SampledRate(2, 1000)
    rate.record(0, 0)
    rate.record(100, 1)
    assert rate.avg(2) == 50


def test_kafka_doc_4_9_delay_brings_the_client_back_under_its_quota():
    """the broker first computes the delay that brings the client back under its quota: the
    delay after which the rate, measured over a window grown by that delay, equals the bound:
    ``(rate - bound) / bound × window`` (Kafka's test: observed 100, quota 50, 3 samples -> 2000 ms)."""
    assert throttle_time_ms(100.0, 50.0, 2000) == 2000
    rate = SampledRate(11, 1000)
    rate.record(20_000, 0)  # 20 kB in a (padded) 10 s window: 2000 B/s against 1000 B/s
    delay = throttle_time_ms(rate.rate(0), 1000, rate.window_size_ms(0))
    assert delay == 10_000
    assert rate.total(0) / ((rate.window_size_ms(0) + delay) / 1000) == pytest.approx(1000.0)


def test_no_delay_within_the_quota():
    assert throttle_time_ms(49.9, 50.0, 11_000) == 0
    assert throttle_time_ms(50.0, 50.0, 11_000) == 0


def test_request_quota_delay_is_bounded_at_one_window():
    """Kafka's ClientRequestQuotaManager bounds the request-time throttle (boundedThrottleTime)."""
    assert bounded_throttle_time_ms(400.0, 10.0, 11_000, 1000) == 1000


def test_rate_arguments_are_checked():
    with pytest.raises(ValueError, match="at least one sample"):
        SampledRate(0, 1000)
    with pytest.raises(ValueError, match="positive"):
        throttle_time_ms(1.0, 0.0, 1000)
