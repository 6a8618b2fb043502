"""The BROKER_LOGGER config resource (8; KIP-412, KIP-817) on Apache Kafka 4.1.1 and pylog:
DescribeConfigs of a broker's loggers and IncrementalAlterConfigs of their levels, raw protocol.

Each case answers a short string (error names, or the flags of a described logger); where the
two brokers answer differently the case must be a row of the table "Broker loggers" in
docs/compatibility.md (and a row whose answers agree again is stale). The loggers' levels are not
compared (each side has its own logging config); every level a case changes is put back.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import error_name

HEADING = "Broker loggers"
BROKER_LOGGER = 8
SET, DELETE, APPEND = 0, 1, 2
REQUEST_LOGGER = "kafka.request.logger"


def node_id(address: str) -> str:
    answer = request(address, ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    return str(answer.brokers[0].node_id)


def describe(address: str, name: str, keys: list[str] | None = None) -> object:
    body = {
        "resources": [{"resource_type": BROKER_LOGGER, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": True,
    }  # fmt: skip
    return request(address, ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]


def alter(address: str, name: str, ops: list[tuple[str, int, str | None]], *, validate_only: bool = False) -> str:
    body = {
        "resources": [{"resource_type": BROKER_LOGGER, "resource_name": name,
                       "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only,
    }  # fmt: skip
    return error_name(request(address, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0].error_code)


def level(address: str, logger: str) -> str:
    result = describe(address, node_id(address), [logger])
    return next(c.value for c in result.configs if c.name == logger)  # type: ignore[attr-defined]


def described_flags(address: str) -> str:
    """The fields of the request logger's and the root logger's entries, except the level."""
    result = describe(address, node_id(address))
    entries = {c.name: c for c in result.configs}  # type: ignore[attr-defined]
    parts = [error_name(result.error_code)]  # type: ignore[attr-defined]
    for name in (REQUEST_LOGGER, "root"):
        c = entries.get(name)
        parts.append(
            f"{name}:absent" if c is None else
            f"{name}:source={c.config_source},read_only={c.read_only},sensitive={c.is_sensitive},"
            f"type={c.config_type},synonyms={len(c.synonyms)},doc={c.documentation is not None}"
        )  # fmt: skip
    return " ".join(parts)


def described_only_asked(address: str) -> str:
    result = describe(address, node_id(address), [REQUEST_LOGGER])
    return ",".join(c.name for c in result.configs)  # type: ignore[attr-defined]


def describe_other_broker(address: str) -> str:
    return error_name(describe(address, str(int(node_id(address)) + 100)).error_code)  # type: ignore[attr-defined]


def describe_empty_name(address: str) -> str:
    return error_name(describe(address, "").error_code)  # type: ignore[attr-defined]


def set_debug_and_back(address: str) -> str:
    """SET DEBUG (shown by DescribeConfigs), then DELETE: back to the root logger's level."""
    me = node_id(address)
    before = level(address, REQUEST_LOGGER)
    answers = [alter(address, me, [(REQUEST_LOGGER, SET, "DEBUG")])]
    answers.append(level(address, REQUEST_LOGGER))
    answers.append(alter(address, me, [(REQUEST_LOGGER, DELETE, None)]))
    answers.append(str(level(address, REQUEST_LOGGER) == level(address, "root")))
    alter(address, me, [(REQUEST_LOGGER, SET, before)])
    return " ".join(answers)


def validate_only_changes_nothing(address: str) -> str:
    me = node_id(address)
    before = level(address, REQUEST_LOGGER)
    target = "TRACE" if before != "TRACE" else "ERROR"
    answer = alter(address, me, [(REQUEST_LOGGER, SET, target)], validate_only=True)
    return f"{answer} {level(address, REQUEST_LOGGER) == before}"


def bad_level(address: str) -> str:
    return alter(address, node_id(address), [(REQUEST_LOGGER, SET, "LOUD")])


def lower_case_level(address: str) -> str:
    me = node_id(address)
    before = level(address, REQUEST_LOGGER)
    answer = alter(address, me, [(REQUEST_LOGGER, SET, "debug")])
    alter(address, me, [(REQUEST_LOGGER, SET, before)])
    return answer


def unknown_logger(address: str) -> str:
    return alter(address, node_id(address), [("no.such.logger.anywhere", SET, "DEBUG")])


def delete_root(address: str) -> str:
    return alter(address, node_id(address), [("root", DELETE, None)])


def append_op(address: str) -> str:
    return alter(address, node_id(address), [(REQUEST_LOGGER, APPEND, "DEBUG")])


def alter_other_broker(address: str) -> str:
    return alter(address, str(int(node_id(address)) + 100), [(REQUEST_LOGGER, SET, "DEBUG")])


CASES: dict[str, Callable[[str], str]] = {
    "describe: entry fields": described_flags,
    "describe: only the keys asked": described_only_asked,
    "describe: another broker's id": describe_other_broker,
    "describe: empty name": describe_empty_name,
    "SET DEBUG, DELETE": set_debug_and_back,
    "SET validate_only": validate_only_changes_nothing,
    "SET unknown level": bad_level,
    "SET lower-case level": lower_case_level,
    "SET unknown logger": unknown_logger,
    "DELETE root": delete_root,
    "APPEND": append_op,
    "SET on another broker's id": alter_other_broker,
}


@pytest.fixture(scope="module")
def answers(brokers: Brokers) -> dict[str, dict[str, str]]:
    return {case: {name: run(address) for name, address in brokers.items()} for case, run in CASES.items()}


def test_broker_loggers_differ_only_where_documented(answers: dict[str, dict[str, str]]) -> None:
    observed = {(case, a["kafka"], a["pylog"]) for case, a in answers.items() if a["kafka"] != a["pylog"]}
    documented = {tuple(row) for row in table(HEADING, 3)}
    message = compare(HEADING, observed, documented)
    assert not message, message
