"""Issue #15 (listeners): several named listeners (``listeners`` + ``listener.security.protocol.map``),
each client told the endpoints of the listener it came in on (Metadata, FindCoordinator,
DescribeCluster, as Kafka answers), and a one-node KRaft quorum on its own CONTROLLER listener."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.integration.compat import confluent_consume, confluent_produce, numbered_records
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


@pytest.fixture(params=[False, True], ids=["single-process", "kraft"])
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[EmbeddedBroker, dict[str, str]]]:
    kraft = bool(request.param)
    listeners = "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0" + (",CONTROLLER://127.0.0.1:0" if kraft else "")
    overrides = {
        "listeners": listeners,
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    }
    if kraft:
        overrides["controller.listener.names"] = "CONTROLLER"
    with EmbeddedBroker(tmp_path / "node", overrides=overrides, python=sys.executable, kraft=kraft) as broker:
        ready = re.search(r"pylog broker ready: .*listeners=(\S+)", broker.output())
        assert ready is not None
        addresses = dict(uri.split("://") for uri in ready.group(1).split(","))
        yield broker, addresses


def test_each_listener_answers_with_its_own_endpoints(node: tuple[EmbeddedBroker, dict[str, str]]) -> None:
    _, addresses = node
    for name in ("INTERNAL", "EXTERNAL"):
        brokers = request(addresses[name], ApiKey.METADATA, 12, METADATA_ALL).brokers
        assert [f"{b.host}:{b.port}" for b in brokers] == [addresses[name]]
        described = request(
            addresses[name], ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}
        )
        assert [f"{b.host}:{b.port}" for b in described.brokers] == [addresses[name]]


def test_a_client_on_the_external_listener_produces_and_consumes_there(
    node: tuple[EmbeddedBroker, dict[str, str]],
) -> None:
    _, addresses = node
    records = numbered_records("ext", 0, 10)
    assert len(confluent_produce(addresses["EXTERNAL"], "named-listeners", records)) == 10
    got = confluent_consume(addresses["EXTERNAL"], "named-listeners", 10)
    assert [g.value for g in got] == [r.value for r in records]

    def coordinator() -> Any:  # the offsets topic is created by the first lookup: poll
        body = {"key_type": 0, "coordinator_keys": ["g"]}
        found = request(addresses["EXTERNAL"], ApiKey.FIND_COORDINATOR, 4, body).coordinators[0]
        return found if found.error_code == 0 else None

    found = wait_until(coordinator, "a group coordinator")
    assert f"{found.host}:{found.port}" == addresses["EXTERNAL"]
