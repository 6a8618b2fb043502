"""Client quotas in the metadata (Kafka documentation §4.9 "Quotas" Quota Configuration): every broker reads
quota overrides and applies them at once, so quotas change without a rolling restart
— ClientQuotaRecords in the KRaft metadata log (forwarded to the active controller, applied by
every node) and in the single-node metadata file."""

from __future__ import annotations

import asyncio

import pytest

from broker.controller.errors import MetadataError
from broker.controller.local import LocalController
from broker.metadata.cluster_state import ClusterState, build_image
from broker.metadata.image import BrokerInfo
from broker.metadata.records import ClientQuotaRecord, decode_records, encode_records
from broker.metadata.replay import apply_record
from pyspark_log.wire.errors import ErrorCode
from tests.unit.controller.fake_quorum import FakeQuorum, controller, route_forwarding

CLIENT = (("client-id", "loader"),)
DEFAULT_USER_CLIENT = (("client-id", None), ("user", "alice"))


def test_client_quota_record_round_trips_with_default_names():
    records = [
        ClientQuotaRecord(DEFAULT_USER_CLIENT, "producer_byte_rate", 1024.0),
        ClientQuotaRecord(CLIENT, "x", 0.0, remove=True),
    ]
    assert decode_records(encode_records(records)) == records


def test_apply_sets_and_removes_and_drops_empty_entities():
    state = apply_record(ClusterState(), 0, ClientQuotaRecord(CLIENT, "producer_byte_rate", 10.0))
    state = apply_record(state, 1, ClientQuotaRecord(CLIENT, "consumer_byte_rate", 20.0))
    image = build_image(state, cluster_id="c", local_broker_id=None)
    assert image.client_quotas == {CLIENT: {"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0}}
    state = apply_record(state, 2, ClientQuotaRecord(CLIENT, "producer_byte_rate", remove=True))
    state = apply_record(state, 3, ClientQuotaRecord(CLIENT, "consumer_byte_rate", remove=True))
    assert build_image(state, cluster_id="c", local_broker_id=None).client_quotas == {}


def test_local_controller_persists_quotas_and_publishes_them(tmp_path):
    async def run():
        local = LocalController(tmp_path, "cid", BrokerInfo(1, "127.0.0.1", 9001))
        seen = []
        local.add_listener(lambda old, new: seen.append(new.client_quotas))
        await local.alter_client_quotas([("user", "alice"), ("client-id", None)], {"producer_byte_rate": 1024.0})
        await local.alter_client_quotas([("client-id", "loader")], {"consumer_byte_rate": 5.0}, validate_only=True)
        assert seen == [{DEFAULT_USER_CLIENT: {"producer_byte_rate": 1024.0}}]
        reopened = LocalController(tmp_path, "cid", BrokerInfo(1, "127.0.0.1", 9001))
        assert reopened.image().client_quotas == {DEFAULT_USER_CLIENT: {"producer_byte_rate": 1024.0}}
        await reopened.alter_client_quotas([("user", "alice"), ("client-id", None)], {"producer_byte_rate": None})
        assert reopened.image().client_quotas == {}
        with pytest.raises(MetadataError) as info:
            await reopened.alter_client_quotas([("client-id", "x")], {"producer_byte_rate": -1.0})
        assert info.value.code == ErrorCode.INVALID_REQUEST
        with pytest.raises(MetadataError) as info:
            await reopened.alter_client_quotas([("group", "x")], {"producer_byte_rate": 1.0})
        assert info.value.code == ErrorCode.INVALID_REQUEST

    asyncio.run(run())


def test_quorum_follower_forwards_and_every_node_applies(monkeypatch):
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        nodes = {1: controller(quorum, 1, broker=False), 2: controller(quorum, 2), 3: controller(quorum, 3)}
        calls = route_forwarding(monkeypatch, nodes)
        for node in nodes.values():
            await node.start()
        await nodes[2].alter_client_quotas([("client-id", "loader")], {"producer_byte_rate": 2048.0})
        assert "alter_client_quotas->1" in calls
        assert nodes[2].image().client_quotas == {CLIENT: {"producer_byte_rate": 2048.0}}
        await quorum_applied(nodes[3], {CLIENT: {"producer_byte_rate": 2048.0}})
        with pytest.raises(MetadataError) as info:
            await nodes[3].alter_client_quotas([("client-id", "loader")], {"nonsense": 1.0})
        assert info.value.code == ErrorCode.INVALID_REQUEST
        for node in nodes.values():
            await node.shutdown()

    asyncio.run(run())


async def quorum_applied(node, expected) -> None:
    assert await node.wait_until(lambda: node.image().client_quotas == expected, 5000)
