"""Kafka documentation §4.9 "Quotas" Client groups / Quota Configuration: entities, the 8-level precedence list, and
how groups share a quota."""

from __future__ import annotations

import pytest

from broker.quota.entity import (
    CLIENT_ID,
    USER,
    InvalidQuotaError,
    QuotaGroup,
    filter_entities,
    make_entity,
    precedence,
    resolve,
    validate_quota,
)

K = "producer_byte_rate"


def e(user: object = "-", client: object = "-"):
    pairs = []
    if user != "-":
        pairs.append((USER, user))
    if client != "-":
        pairs.append((CLIENT_ID, client))
    return make_entity(pairs)


ALL_LEVELS = [
    e("u", "c"),  # 1. /config/users/<user>/clients/<client-id>
    e("u", None),  # 2. /config/users/<user>/clients/<default>
    e("u"),  # 3. /config/users/<user>
    e(None, "c"),  # 4. /config/users/<default>/clients/<client-id>
    e(None, None),  # 5. /config/users/<default>/clients/<default>
    e(None),  # 6. /config/users/<default>
    e(client="c"),  # 7. /config/clients/<client-id>
    e(client=None),  # 8. /config/clients/<default>
]


def test_precedence_is_the_seeds_eight_line_list():
    assert precedence("u", "c") == ALL_LEVELS


@pytest.mark.parametrize("level", range(8))
def test_kafka_doc_4_9_most_specific_quota_wins(level: int):
    """the most specific matching quota applies: with quotas at this level and every
    less specific one, this level's applies."""
    table = {entity: {K: float(i + 1)} for i, entity in enumerate(ALL_LEVELS) if i >= level}
    match = resolve(table, K, "u", "c")
    assert match.bound == level + 1
    assert match.entity == ALL_LEVELS[level]


def test_precedence_is_per_quota_key():
    table = {e(client="c"): {K: 1.0}, e(client=None): {"consumer_byte_rate": 2.0}}
    assert resolve(table, K, "ANONYMOUS", "c").bound == 1.0
    assert resolve(table, "consumer_byte_rate", "ANONYMOUS", "c").bound == 2.0


def test_kafka_doc_4_9_default_quota_is_per_client_not_shared():
    """by default each distinct client group gets a fixed bytes/sec quota: a default
    quota gives each client id its own group."""
    table = {e(client=None): {K: 10.0}}
    a, b = resolve(table, K, "ANONYMOUS", "a"), resolve(table, K, "ANONYMOUS", "b")
    assert a.group == QuotaGroup("", "a")
    assert b.group == QuotaGroup("", "b")


def test_kafka_doc_4_9_connections_of_a_group_share_its_quota():
    """all connections of a quota group share its quota: a user quota groups every
    client id of the user."""
    table = {e("test-user"): {K: 10.0}}
    assert (
        resolve(table, K, "test-user", "x").group
        == resolve(table, K, "test-user", "y").group
        == QuotaGroup("test-user", "")
    )
    table = {e("test-user", "test-client"): {K: 10.0}}
    assert resolve(table, K, "test-user", "test-client").group == QuotaGroup("test-user", "test-client")


def test_no_quota_means_no_bound_and_the_client_id_group():
    match = resolve({}, K, "ANONYMOUS", "c")
    assert match.bound is None
    assert match.group == QuotaGroup("", "c")


def test_entities_are_validated():
    with pytest.raises(InvalidQuotaError, match="unknown quota entity type"):
        make_entity([("group", "g")])
    with pytest.raises(InvalidQuotaError, match="repeated"):
        make_entity([(USER, "a"), (USER, "b")])
    with pytest.raises(InvalidQuotaError, match="cannot be combined"):
        make_entity([("ip", "1.2.3.4"), (USER, "a")])
    with pytest.raises(InvalidQuotaError, match="at least one"):
        make_entity([])
    assert make_entity([(USER, "u"), (CLIENT_ID, "c")]) == ((CLIENT_ID, "c"), (USER, "u"))


def test_quota_values_are_validated():
    validate_quota(e(client="c"), K, 1024.0)
    validate_quota(e(client="c"), "request_percentage", 12.5)
    validate_quota(make_entity([("ip", None)]), "connection_creation_rate", 10.0)
    with pytest.raises(InvalidQuotaError, match="invalid configuration key"):
        validate_quota(e(client="c"), "connection_creation_rate", 1.0)
    with pytest.raises(InvalidQuotaError, match="positive"):
        validate_quota(e(client="c"), K, -1.0)
    with pytest.raises(InvalidQuotaError, match="whole number"):
        validate_quota(e(client="c"), K, 1.5)


def test_describe_filters_exact_default_any_and_strict():
    table = {entity: {K: 1.0} for entity in ALL_LEVELS}
    exact = filter_entities(table, [(CLIENT_ID, 0, "c")], strict=False)
    assert {x for x, _ in exact} == {e("u", "c"), e(None, "c"), e(client="c")}
    strict = filter_entities(table, [(CLIENT_ID, 0, "c")], strict=True)
    assert [x for x, _ in strict] == [e(client="c")]
    default = filter_entities(table, [(CLIENT_ID, 1, None)], strict=True)
    assert [x for x, _ in default] == [e(client=None)]
    any_user = filter_entities(table, [(USER, 2, None)], strict=True)
    assert {x for x, _ in any_user} == {e("u"), e(None)}
    with pytest.raises(InvalidQuotaError, match="twice"):
        filter_entities(table, [(USER, 2, None), (USER, 1, None)], strict=False)
    with pytest.raises(InvalidQuotaError, match="needs a name"):
        filter_entities(table, [(USER, 0, None)], strict=False)
