"""Connection limits (KIP-306 max.connections.per.ip, KIP-402 max.connections, KIP-612 rates)."""

from __future__ import annotations

import pytest

from broker.quota.connections import (
    ConnectionConfigError,
    ConnectionLimitsConfig,
    ConnectionQuotas,
    descriptor_caps,
    parse_overrides,
)


def test_per_ip_limit_refuses_only_that_address():
    q = ConnectionQuotas(ConnectionLimitsConfig(max_connections_per_ip=2))
    assert q.admit("127.0.0.2", 0).accepted
    assert q.admit("127.0.0.2", 0).accepted
    refused = q.admit("127.0.0.2", 0)
    assert not refused.accepted
    assert "max.connections.per.ip" in refused.reason
    assert q.admit("127.0.0.1", 0).accepted
    q.release("127.0.0.2")
    assert q.admit("127.0.0.2", 0).accepted
    assert q.total == 3


def test_overrides_replace_the_per_ip_limit():
    q = ConnectionQuotas(ConnectionLimitsConfig(max_connections_per_ip=1, per_ip_overrides={"10.0.0.1": 3}))
    assert all(q.admit("10.0.0.1", 0).accepted for _ in range(3))
    assert not q.admit("10.0.0.1", 0).accepted
    assert q.admit("10.0.0.2", 0).accepted
    assert not q.admit("10.0.0.2", 0).accepted


def test_max_connections_is_a_slot_count():
    q = ConnectionQuotas(ConnectionLimitsConfig(max_connections=1))
    assert q.slot_available()
    q.admit("127.0.0.1", 0)
    assert not q.slot_available()
    q.release("127.0.0.1")
    assert q.slot_available()


def test_creation_rate_delays_the_next_accept():
    q = ConnectionQuotas(ConnectionLimitsConfig(max_connection_creation_rate=1))
    delays = [q.accept_delay_ms(0) for _ in range(20)]
    assert delays[0] == 0
    assert delays[-1] == 1000  # bounded at one quota window


def test_ip_entity_connection_creation_rate():
    q = ConnectionQuotas(ConnectionLimitsConfig(), ip_rate=lambda ip: 1.0 if ip == "10.0.0.9" else None)
    results = [q.admit("10.0.0.9", 0).accepted for _ in range(15)]
    assert results[:10] == [True] * 10  # 10 in the padded 10 s window is 1/s
    assert not results[-1]
    assert q.count("10.0.0.9") == 10


def test_parse_overrides():
    assert parse_overrides("127.0.0.1:200, [::1]:5") == {"127.0.0.1": 200, "::1": 5}
    assert parse_overrides("") == {}
    with pytest.raises(ConnectionConfigError, match=r"max\.connections\.per\.ip\.overrides"):
        parse_overrides("localhost:5")
    with pytest.raises(ConnectionConfigError, match="ip:count"):
        parse_overrides("127.0.0.1")


def test_caps_derived_from_the_descriptor_limit():
    """Issue 16: connections run out before descriptors, and one address gets at most half."""
    assert descriptor_caps(1024) == (768, 384)
    assert descriptor_caps(100) == (1, 1)  # tiny limits still serve someone
    total, per_ip = descriptor_caps(1_048_576)
    assert total == 786_432
    assert per_ip == 393_216
    assert descriptor_caps(-1) == (2**31 - 1, 2**31 - 1)
