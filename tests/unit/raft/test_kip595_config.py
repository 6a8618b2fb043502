"""KIP-595 "Configurations": names, defaults and ``quorum.voters`` parsing."""

from __future__ import annotations

import pytest

from broker.raft.config import RaftConfig, RaftConfigError, VoterEndpoint, parse_quorum_voters


def test_quorum_voters_is_id_at_host_colon_port() -> None:
    """ "quorum.voters=1@kafka-1:9092, 2@kafka-2:9092, 3@kafka-3:9092\""""
    voters = parse_quorum_voters("1@kafka-1:9092, 2@kafka-2:9092, 3@kafka-3:9092")
    assert voters == {
        1: VoterEndpoint(1, "kafka-1", 9092),
        2: VoterEndpoint(2, "kafka-2", 9092),
        3: VoterEndpoint(3, "kafka-3", 9092),
    }
    assert parse_quorum_voters("4@[::1]:9093")[4].host == "::1"


@pytest.mark.parametrize("bad", ["1kafka:9092", "1@kafka", "x@kafka:1", "1@kafka:0", "1@a:1,1@b:2", "-1@a:1"])
def test_malformed_quorum_voters_are_rejected(bad: str) -> None:
    with pytest.raises(RaftConfigError, match=r"quorum\.voters"):
        parse_quorum_voters(bad)


def test_defaults_are_kafkas() -> None:
    config = RaftConfig(node_id=1, voters=frozenset({1, 2, 3}))
    assert config.election_timeout_ms == 1000
    assert config.fetch_timeout_ms == 2000
    assert config.election_backoff_max_ms == 1000
    assert config.request_timeout_ms == 2000
    assert config.retry_backoff_ms == 20
    assert config.retry_backoff_max_ms == 1000
    assert config.majority == 2
    assert config.is_voter


def test_from_properties_reads_the_kafka_names() -> None:
    config = RaftConfig.from_properties(
        5,
        {
            "quorum.voters": "1@a:1,2@b:2,3@c:3",
            "quorum.election.timeout.ms": "1500",
            "quorum.fetch.timeout.ms": "3000",
            "quorum.election.backoff.max.ms": "700",
            "quorum.request.timeout.ms": "2500",
            "quorum.retry.backoff.ms": "50",
            "quorum.retry.backoff.max.ms": "800",
            "unrelated": "x",
        },
    )
    assert config.voters == frozenset({1, 2, 3})
    assert not config.is_voter
    assert (config.election_timeout_ms, config.fetch_timeout_ms, config.election_backoff_max_ms) == (1500, 3000, 700)
    assert (config.request_timeout_ms, config.retry_backoff_ms, config.retry_backoff_max_ms) == (2500, 50, 800)
    assert config.voter_endpoints[2].host == "b"


def test_invalid_values_name_the_key() -> None:
    with pytest.raises(RaftConfigError, match=r"quorum\.fetch\.timeout\.ms"):
        RaftConfig.from_properties(1, {"quorum.voters": "1@a:1", "quorum.fetch.timeout.ms": "0"})
    with pytest.raises(RaftConfigError, match="not an integer"):
        RaftConfig.from_properties(1, {"quorum.voters": "1@a:1", "quorum.retry.backoff.ms": "fast"})
    with pytest.raises(RaftConfigError, match="at least one voter"):
        RaftConfig.from_properties(1, {})
