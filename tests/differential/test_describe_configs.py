"""DescribeConfigs v4 of a topic and of the broker on Apache Kafka 4.1.1 and pylog, key by key.

For every config pylog returns, Kafka's entry is compared field by field: the value (both topics
and brokers at their defaults, with the same cluster-level settings from the fixture), the type
(v3+ ``config_type``), the source, ``read_only`` and ``is_sensitive``; a key Kafka does not
return at all is a ``key`` difference. Every difference must be a row of the table
"DescribeConfigs" in docs/compatibility.md; ``*`` in its config column stands for every key with
that field difference (e.g. all broker configs read-only in pylog). Topic keys only Kafka returns
are differences too (broker keys only Kafka returns are not: it lists ~300). Keys whose values
depend on the fixture's ports and directories are compared on type and flags only. Synonyms
(v1+) and documentation (v3+) are compared as there or not.
"""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import create_ready_topic, unique

HEADING = "DescribeConfigs"
TOPIC, BROKER = 2, 4
TYPES = {0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 6: "DOUBLE", 7: "LIST",
         8: "CLASS", 9: "PASSWORD"}  # fmt: skip
SOURCES = {-1: "UNKNOWN", 0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
           6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}  # fmt: skip
# Values that name the fixture's ports, directories and node layout (set differently on each side).
FIXTURE_KEYS = frozenset({
    "listeners", "advertised.listeners", "log.dirs", "controller.quorum.voters", "listener.security.protocol.map",
    "controller.listener.names", "inter.broker.listener.name", "node.id", "process.roles",
})  # fmt: skip


def describe(address: str, resource_type: int, name: str) -> dict[str, dict[str, str]]:
    body = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": True,
    }  # fmt: skip
    result = request(address, ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]
    assert result.error_code == 0, result
    return {
        c.name: {
            "value": "null" if c.value is None else c.value,
            "type": TYPES.get(c.config_type, str(c.config_type)),
            "source": SOURCES.get(c.config_source, str(c.config_source)),
            "read_only": str(c.read_only).lower(),
            "sensitive": str(c.is_sensitive).lower(),
            "synonyms": "listed" if c.synonyms else "none",
            "documentation": "present" if c.documentation else "absent",
        }
        for c in result.configs
    }


def node_id(address: str) -> str:
    answer = request(address, ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    return str(answer.brokers[0].node_id)


def differences(resource: str, kafka: dict[str, dict[str, str]], pylog: dict[str, dict[str, str]]) -> set[Any]:
    out = set()
    for key, ours in pylog.items():
        theirs = kafka.get(key)
        if theirs is None:
            out.add((resource, key, "key", "absent", "present"))
            continue
        for field, value in ours.items():
            if field in ("value", "source") and key in FIXTURE_KEYS:
                continue
            if theirs[field] != value:
                out.add((resource, key, field, theirs[field], value))
    if resource == "topic":  # a broker lists ~300 keys in Kafka; a topic's keys should all be there
        out |= {(resource, key, "key", "present", "absent") for key in set(kafka) - set(pylog)}
    return out


def documented_cover(observed: set[Any]) -> tuple[set[Any], set[Any]]:
    """(the observed rows, the documented rows) with wildcard rows expanded: a ``*`` row covers
    every observed row with its resource, field and values, and is stale if it covers none."""
    rows = {tuple(r) for r in table(HEADING, 5)}
    exact = {r for r in rows if r[1] != "*"}
    wild = {r for r in rows if r[1] == "*"}
    covered_by_wild = set()
    used = set()
    for row in observed:
        for w in wild:
            if (w[0], w[2], w[3], w[4]) == (row[0], row[2], row[3], row[4]):
                covered_by_wild.add(row)
                used.add(w)
    remaining = observed - covered_by_wild
    stale_wild = wild - used
    return remaining, exact | stale_wild


@pytest.fixture(scope="module")
def described(brokers: Brokers) -> dict[str, dict[str, dict[str, dict[str, str]]]]:
    out = {}
    for name, address in brokers.items():
        topic = unique("configs")
        create_ready_topic(address, topic)
        out[name] = {"topic": describe(address, TOPIC, topic), "broker": describe(address, BROKER, node_id(address))}
    return out


@pytest.mark.parametrize("resource", ["topic", "broker"])
def test_configs_differ_only_where_documented(described: Any, resource: str) -> None:
    observed = differences(resource, described["kafka"][resource], described["pylog"][resource])
    remaining, documented = documented_cover(observed)
    documented = {row for row in documented if row[0] == resource}
    message = compare(HEADING, remaining, documented)
    assert not message, message
