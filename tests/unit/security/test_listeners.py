"""Issue #15 (listeners): controller.listener.names keeps the quorum's RPCs on the controller
listener (KIP-631); Kafka's checks of listeners, advertised.listeners and inter.broker.listener.name."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.security.listeners import CONTROLLER_APIS, ListenerPolicy
from pyspark_log.wire.api_keys import ApiKey

pytestmark = pytest.mark.unit

SPLIT = {
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
}


def load(raw: dict[str, str]) -> BrokerConfig:
    return BrokerConfig.from_mapping({"log.dirs": "/nonexistent-unused", **raw}, warn_unknown=False)


def test_single_listener_mode_serves_everything_everywhere() -> None:
    policy = ListenerPolicy(load({}).controller_listeners)
    assert policy.refusal("PLAINTEXT", ApiKey.VOTE, forwarded=True, metadata_fetch=True) is None


@pytest.mark.parametrize("api_key", sorted(CONTROLLER_APIS))
def test_controller_apis_are_refused_on_the_client_listener(api_key: int) -> None:
    policy = ListenerPolicy(load({**SPLIT, "process.roles": "broker,controller"}).controller_listeners)
    why = policy.refusal("PLAINTEXT", api_key, forwarded=False, metadata_fetch=False)
    assert why is not None
    assert "only on the controller listener (CONTROLLER)" in why
    assert policy.refusal("CONTROLLER", api_key, forwarded=False, metadata_fetch=False) is None


def test_metadata_fetch_and_forwarded_requests_are_refused_on_the_client_listener() -> None:
    policy = ListenerPolicy(frozenset({"CONTROLLER"}))
    assert policy.refusal("PLAINTEXT", ApiKey.FETCH, forwarded=False, metadata_fetch=True) is not None
    assert policy.refusal("PLAINTEXT", ApiKey.CREATE_TOPICS, forwarded=True, metadata_fetch=False) is not None
    assert policy.refusal("PLAINTEXT", ApiKey.FETCH, forwarded=False, metadata_fetch=False) is None
    entries = [{"api_key": k, "min_version": 0, "max_version": 0} for k in (ApiKey.FETCH, ApiKey.VOTE)]
    assert [e["api_key"] for e in policy.api_versions("PLAINTEXT", entries)] == [ApiKey.FETCH]
    assert policy.api_versions("CONTROLLER", entries) == entries


def test_inter_broker_listener_defaults_to_the_first_non_controller_listener() -> None:
    raw = {
        "listeners": "CONTROLLER://127.0.0.1:0,INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "process.roles": "broker,controller",
    }
    assert load(raw).inter_broker_listener == "INTERNAL"
    assert load({**raw, "inter.broker.listener.name": "CLIENT"}).inter_broker_listener == "CLIENT"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({**SPLIT, "process.roles": "broker"}, "must not appear in listeners on a node without the controller role"),
        (
            {"process.roles": "controller", "controller.listener.names": "CONTROLLER"},
            "controller.listener.names must name at least one listener",
        ),
        (
            {**SPLIT, "process.roles": "broker,controller", "inter.broker.listener.name": "CONTROLLER"},
            "not a controller",
        ),
        ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name=NOPE must name a listener"),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
            "only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        ({"advertised.listeners": "OTHER://h:1"}, "names a listener that is not in listeners"),
        ({"listeners": "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:1"}, "each listener name may appear once"),
    ],
)
def test_listener_settings_kafka_refuses_are_refused(raw: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(raw)


def test_registered_endpoints_survive_the_metadata_log_and_pick_the_clients_listener() -> None:
    from broker.metadata.image import BrokerInfo
    from broker.metadata.records import RegisterBrokerRecord, decode_records, encode_records

    endpoints = (("INTERNAL", "10.0.0.1", 9092), ("EXTERNAL", "broker.example", 19092))
    record = RegisterBrokerRecord(1, "inc", "10.0.0.1", 9092, None, endpoints)
    assert decode_records(encode_records([record])) == [record]
    old = RegisterBrokerRecord(1, "inc", "10.0.0.1", 9092)  # written before endpoints were recorded
    assert b"endpoints" not in encode_records([old])
    info = BrokerInfo(1, "10.0.0.1", 9092, endpoints=endpoints)
    assert info.endpoint("EXTERNAL") == ("broker.example", 19092)
    assert info.endpoint("CONTROLLER") is None
    assert BrokerInfo(1, "h", 1).endpoint("ANY") == ("h", 1)
