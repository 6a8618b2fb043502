"""KIP-226 dynamic broker configs on Apache Kafka 4.1.1 and pylog: IncrementalAlterConfigs and
AlterConfigs of BROKER resources (the node's id and the cluster default ``""``), raw protocol;
the errors with their messages, and what DescribeConfigs then reports (value, source, read-only,
synonyms' sources).

Each case answers a short string; where the two brokers answer differently the case must be a row
of the table "Dynamic broker configs" in docs/compatibility.md (a row whose answers agree again is
stale). Every value a case sets is deleted again. ``log.cleaner.backoff.ms`` is given statically
to both (tests/differential/conftest.py), so the three levels are seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import create_ready_topic, error_name, produce, small_batch, unique
from tests.waiting import Deadline

HEADING = "Dynamic broker configs"
BROKER = 4
SET, DELETE, APPEND = 0, 1, 2
KEY = "log.cleaner.backoff.ms"
SOURCES = {1: "TOPIC", 2: "DYNAMIC_BROKER", 3: "DYNAMIC_DEFAULT_BROKER", 4: "STATIC_BROKER", 5: "DEFAULT"}


def node_id(address: str) -> str:
    answer = request(address, ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    return str(answer.brokers[0].node_id)


def alter(address: str, name: str, ops: list[tuple[str, int, str | None]], *, validate_only: bool = False) -> str:
    body = {
        "resources": [{"resource_type": BROKER, "resource_name": name,
                       "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only,
    }  # fmt: skip
    answer = request(address, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]
    return f"{error_name(answer.error_code)} {answer.error_message or ''}".strip()


def legacy_alter(address: str, name: str, configs: dict[str, str]) -> str:
    body = {
        "resources": [{"resource_type": BROKER, "resource_name": name,
                       "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": False,
    }  # fmt: skip
    answer = request(address, ApiKey.ALTER_CONFIGS, 2, body).responses[0]
    return f"{error_name(answer.error_code)} {answer.error_message or ''}".strip()


def described(address: str, name: str, key: str) -> str:
    """``value source read_only [synonym sources]`` of ``key``, or the error."""
    body = {
        "resources": [{"resource_type": BROKER, "resource_name": name, "configuration_keys": [key]}],
        "include_synonyms": True,
    }
    result = request(address, ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]
    if result.error_code:
        return f"{error_name(result.error_code)} {result.error_message}"
    entry = next((c for c in result.configs if c.name == key), None)
    if entry is None:
        return "absent "
    synonyms = ",".join(SOURCES.get(s.source, str(s.source)) for s in entry.synonyms)
    flags = f"ro={entry.read_only} sensitive={entry.is_sensitive}"
    return f"{entry.value} {SOURCES.get(entry.config_source)} {flags} [{synonyms}]"


def settled(address: str, name: str, key: str, shown: str) -> str:
    """``described`` once it starts with ``shown`` (value and source): a broker applies a
    committed ConfigRecord asynchronously (Kafka's broker too, and its value after its source),
    so the answer to the alter may come first. Polls with a deadline only a failure waits out;
    after it, the last description (the difference shows)."""
    deadline = Deadline(30)
    while True:
        text = described(address, name, key)
        if text.startswith(shown) or deadline.expired():
            return text
        time.sleep(0.1)


def levels(address: str) -> str:
    """Default 1500, then the broker's own 1200 over it; each step's description; then deleted."""
    me = node_id(address)
    steps = [described(address, me, KEY)]
    steps.append(alter(address, "", [(KEY, SET, "1500")]))
    steps += [settled(address, me, KEY, "1500 DYNAMIC_DEFAULT_BROKER"), described(address, "", KEY)]
    steps.append(alter(address, me, [(KEY, SET, "1200")]))
    steps += [settled(address, me, KEY, "1200 DYNAMIC_BROKER"), described(address, "", KEY)]
    steps.append(alter(address, me, [(KEY, DELETE, None)]))
    steps.append(settled(address, me, KEY, "1500 DYNAMIC_DEFAULT_BROKER"))
    steps.append(alter(address, "", [(KEY, DELETE, None)]))
    steps.append(settled(address, me, KEY, "1000 STATIC_BROKER"))
    return " ; ".join(steps)


def validate_only(address: str) -> str:
    me = node_id(address)
    return alter(address, me, [(KEY, SET, "1300")], validate_only=True) + " ; " + described(address, me, KEY)


def read_only_key(address: str) -> str:
    return alter(address, node_id(address), [("num.partitions", SET, "3")])


def two_keys_one_read_only(address: str) -> str:
    me = node_id(address)
    answer = alter(address, me, [("log.dirs", SET, "/x"), (KEY, SET, "1300")])
    return answer + " ; " + described(address, me, KEY)


def listener_at_default(address: str) -> str:
    return alter(address, "", [("listeners", SET, "PLAINTEXT://127.0.0.1:1")])


def security_keys(address: str) -> str:
    """Listener security keys: key material only with a listener prefix, the rest per broker."""
    me, ssl_suites, jaas = (
        node_id(address),
        ("ssl.cipher.suites", SET, "TLS_AES_128_GCM_SHA256"),
        ("sasl.jaas.config", SET, "x"),
    )
    steps = [
        alter(
            address, me, [("ssl.keystore.location", SET, "/x"), ("ssl.truststore.type", SET, "JKS")], validate_only=True
        ),
        alter(address, "", [("ssl.keystore.location", SET, "/x"), jaas], validate_only=True),
        alter(address, me, [("listener.name.plaintext.ssl.keystore.location", SET, "/x")], validate_only=True),
        alter(address, me, [ssl_suites], validate_only=True),
        alter(address, "", [ssl_suites, jaas], validate_only=True),
        alter(address, "", [("num.network.threads", SET, "3")], validate_only=True),
    ]
    return " ; ".join(steps)


def not_a_number(address: str) -> str:
    return alter(address, node_id(address), [("message.max.bytes", SET, "abc")])


def negative(address: str) -> str:
    return alter(address, node_id(address), [("message.max.bytes", SET, "-5")])


def other_broker(address: str) -> str:
    return alter(address, str(int(node_id(address)) + 100), [(KEY, SET, "1300")])


def not_an_id(address: str) -> str:
    return alter(address, "x", [(KEY, SET, "1300")])


def describe_other_broker(address: str) -> str:
    return described(address, str(int(node_id(address)) + 100), KEY)


def legacy_read_only(address: str) -> str:
    return legacy_alter(address, node_id(address), {"node.id": "3"})


def unknown_key(address: str) -> str:
    me = node_id(address)
    steps = [
        alter(address, me, [("no.such.key", SET, "1")]),
        settled(address, me, "no.such.key", "None DYNAMIC_BROKER"),
    ]
    steps.append(alter(address, me, [("no.such.key", DELETE, None)]))
    steps.append(settled(address, me, "no.such.key", "absent"))
    return " ; ".join(steps)


def append_list(address: str) -> str:
    me = node_id(address)
    steps = [alter(address, me, [("log.cleanup.policy", APPEND, "compact")])]
    steps.append(settled(address, me, "log.cleanup.policy", "delete,compact DYNAMIC_BROKER"))
    steps.append(alter(address, me, [("log.cleanup.policy", DELETE, None)]))
    steps.append(settled(address, me, "log.cleanup.policy", "delete DEFAULT"))
    return " ; ".join(steps)


def topic_config(address: str, topic: str, key: str) -> str:
    body = {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": [key]}]}
    result = request(address, ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]
    entry = next(c for c in result.configs if c.name == key)
    return f"{entry.value} {SOURCES.get(entry.config_source)}"


def settled_topic(address: str, topic: str, key: str, shown: str) -> str:
    deadline = Deadline(30)
    while True:
        text = topic_config(address, topic, key)
        if text == shown or deadline.expired():
            return text
        time.sleep(0.1)


def topic_inherits(address: str) -> str:
    """A topic's retention.ms from the broker's log.retention.ms at each level."""
    me, topic = node_id(address), unique("dynamic-inherit")
    create_ready_topic(address, topic)
    steps = [topic_config(address, topic, "retention.ms")]
    steps.append(alter(address, "", [("log.retention.ms", SET, "86400000")]))
    steps.append(settled_topic(address, topic, "retention.ms", "86400000 DYNAMIC_DEFAULT_BROKER"))
    steps.append(alter(address, me, [("log.retention.ms", SET, "43200000")]))
    steps.append(settled_topic(address, topic, "retention.ms", "43200000 DYNAMIC_BROKER"))
    steps.append(alter(address, me, [("log.retention.ms", DELETE, None)]))
    steps.append(alter(address, "", [("log.retention.ms", DELETE, None)]))
    steps.append(settled_topic(address, topic, "retention.ms", "604800000 DEFAULT"))
    return " ; ".join(steps)


def produce_error(address: str, topic: str) -> str:
    return error_name(produce(address, topic, small_batch(value_bytes=5000)).error_code)


def settled_produce(address: str, topic: str, shown: str) -> str:
    deadline = Deadline(30)
    while True:
        text = produce_error(address, topic)
        if text == shown or deadline.expired():
            return text
        time.sleep(0.1)


def message_max_bytes_live(address: str) -> str:
    """A 5000-byte record against a cluster-wide message.max.bytes of 2000, then deleted."""
    topic = unique("dynamic-mmb")
    create_ready_topic(address, topic)
    steps = [produce_error(address, topic), alter(address, "", [("message.max.bytes", SET, "2000")])]
    steps.append(settled_produce(address, topic, "MESSAGE_TOO_LARGE"))
    steps.append(alter(address, "", [("message.max.bytes", DELETE, None)]))
    steps.append(settled_produce(address, topic, "NONE"))
    return " ; ".join(steps)


def throttles(address: str) -> str:
    """The replication throttles (dynamic-only keys): bad values, one per level, described, deleted."""
    me = node_id(address)
    leader, follower = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
    steps = [alter(address, me, [(leader, SET, "-1")]), alter(address, me, [(leader, SET, "x")])]
    steps += [alter(address, me, [(leader, SET, "1000")]), alter(address, "", [(follower, SET, "2000")])]
    steps += [
        settled(address, me, leader, "1000 DYNAMIC_BROKER"),
        settled(address, me, follower, "2000 DYNAMIC_DEFAULT"),
    ]
    steps.append(described(address, "", follower))
    steps += [alter(address, me, [(leader, DELETE, None)]), alter(address, "", [(follower, DELETE, None)])]
    steps.append(settled(address, me, leader, "absent"))
    return " ; ".join(steps)


def read_only_flags(address: str) -> str:
    me = node_id(address)
    return " ; ".join(
        described(address, me, key) for key in ("message.max.bytes", "num.partitions", "log.cleaner.threads")
    )


CASES: dict[str, Callable[[str], str]] = {
    "levels: default, per broker, deleted": levels,
    "validate_only": validate_only,
    "SET read-only key": read_only_key,
    "SET read-only and dynamic key": two_keys_one_read_only,
    "SET listeners at the default": listener_at_default,
    "SET listener security keys": security_keys,
    "SET not a number": not_a_number,
    "SET negative": negative,
    "SET on another broker's id": other_broker,
    "SET on a name not a number": not_an_id,
    "describe another broker's id": describe_other_broker,
    "AlterConfigs read-only key": legacy_read_only,
    "SET unknown key": unknown_key,
    "APPEND to a list key": append_list,
    "read-only flags": read_only_flags,
    "a topic inherits each level": topic_inherits,
    "replication throttles": throttles,
    "message.max.bytes at the default, live": message_max_bytes_live,
}


@pytest.fixture(scope="module")
def answers(brokers: Brokers) -> dict[str, dict[str, str]]:
    return {case: {name: run(address) for name, address in brokers.items()} for case, run in CASES.items()}


def test_dynamic_broker_configs_differ_only_where_documented(answers: dict[str, dict[str, str]]) -> None:
    observed = {(case, a["kafka"], a["pylog"]) for case, a in answers.items() if a["kafka"] != a["pylog"]}
    documented = {tuple(row) for row in table(HEADING, 3)}
    message = compare(HEADING, observed, documented)
    assert not message, message
