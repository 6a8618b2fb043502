"""CreatePartitions and CreateTopics with explicit replica assignments (issue #29), on Apache Kafka
4.1.1 and pylog (the tier's one-node pair, ``conftest.brokers``): the same error code and the same
message (Kafka's ``ReplicationControlManager.validateManualPartitionAssignment``) for a good
assignment (validate_only), an unknown broker, a broker listed twice, an empty replica list, and a
list count that does not match the new partitions. The replication-factor consistency rule needs
two brokers; its message is checked in tests/unit/controller/test_operations.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.scenarios import create_ready_topic, unique

CASES = {
    "ok": [[1]],
    "unknown_broker": [[9]],
    "broker_twice": [[1, 1]],
    "empty_list": [[]],
    "too_many_lists": [[1], [1]],
}


def observe(address: str) -> dict[str, tuple[int, str | None]]:
    topic = unique("assign")
    create_ready_topic(address, topic)
    out: dict[str, tuple[int, str | None]] = {}
    for name, lists in CASES.items():
        body: dict[str, Any] = {
            "topics": [{"name": topic, "count": 2, "assignments": [{"broker_ids": b} for b in lists]}],
            "timeout_ms": 30000, "validate_only": True,
        }  # fmt: skip
        result = request(address, ApiKey.CREATE_PARTITIONS, 3, body).results[0]
        out[f"create_partitions_{name}"] = (result.error_code, result.error_message)
    for name in ("unknown_broker", "broker_twice"):
        body = {
            "topics": [{"name": unique("manual"), "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": CASES[name][0]}], "configs": []}],
            "timeout_ms": 30000, "validate_only": True,
        }  # fmt: skip
        created = request(address, ApiKey.CREATE_TOPICS, 5, body).topics[0]
        out[f"create_topics_{name}"] = (created.error_code, created.error_message)
    return out


@pytest.fixture(scope="module")
def observed(brokers: Brokers) -> dict[str, dict[str, tuple[int, str | None]]]:
    return {name: observe(address) for name, address in brokers.items()}


ASPECTS = [f"create_partitions_{name}" for name in CASES] + [
    "create_topics_unknown_broker",
    "create_topics_broker_twice",
]


@pytest.mark.parametrize("aspect", ASPECTS)
def test_same_error_and_message_as_kafka(observed: dict[str, dict[str, tuple[int, str | None]]], aspect: str) -> None:
    assert observed["pylog"][aspect] == observed["kafka"][aspect]
