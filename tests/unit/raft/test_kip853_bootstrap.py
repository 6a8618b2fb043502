"""KIP-853 outside the core: ``--initial-controllers`` strings, the bootstrap checkpoint,
``controller.quorum.bootstrap.servers``, DescribeQuorum v2's directory ids and voter nodes, and the
AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter wire forms (Kafka 4.1.1's v0)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.raft.config import RaftConfig, RaftConfigError
from broker.raft.log import VoterSpec, VotersRecord
from broker.raft.messages import DescribeQuorumResponse, ErrorCode, ReplicaState
from broker.raft.rpc import response_to_wire
from broker.raft.voters import (
    BOOTSTRAP_CHECKPOINT,
    VotersFileError,
    directory_id_bytes,
    directory_id_text,
    encode_bootstrap_checkpoint,
    parse_bootstrap_servers,
    parse_initial_controllers,
    read_bootstrap_checkpoint,
)
from pyspark_log.wire import (
    ApiKey,
    decode_request_body,
    decode_response_body,
    encode_request_body,
    encode_response_body,
)

DIR_1 = "ABEiM0RVZneImaq7zN3u_w"
DIR_2 = "EBEiM0RVZneImaq7zN3u_w"


def test_directory_ids_are_base64url_uuids() -> None:
    raw = directory_id_bytes(DIR_1)
    assert len(raw) == 16
    assert directory_id_text(raw) == DIR_1
    with pytest.raises(VotersFileError):
        directory_id_bytes("not-an-id")


def test_initial_controllers_as_kafka_parses_them() -> None:
    record = parse_initial_controllers(f"1@c1:9093:{DIR_1},2@[::1]:9094:{DIR_2}")
    assert record == VotersRecord(
        (VoterSpec(1, directory_id_bytes(DIR_1), "c1", 9093), VoterSpec(2, directory_id_bytes(DIR_2), "::1", 9094))
    )
    for bad, message in (
        ("1c1:9093", "No @ found in dynamic voter string."),
        (f"1@c1:{DIR_1}", "Invalid dynamic voter string"),
        (f"1@c1:9093:{DIR_1},1@c2:9093:{DIR_2}", "was specified more than once"),
    ):
        with pytest.raises(VotersFileError, match=message):
            parse_initial_controllers(bad)


def test_bootstrap_checkpoint_round_trip(tmp_path: Path) -> None:
    """Offsets 0-3: SnapshotHeader, KRaftVersion 1, the VotersRecord, SnapshotFooter."""
    record = parse_initial_controllers(f"1@c1:9093:{DIR_1},2@c2:9093:{DIR_2}")
    assert read_bootstrap_checkpoint(tmp_path) is None
    (tmp_path / BOOTSTRAP_CHECKPOINT).write_bytes(encode_bootstrap_checkpoint(record, 1_700_000_000_000))
    assert read_bootstrap_checkpoint(tmp_path) == record
    (tmp_path / BOOTSTRAP_CHECKPOINT).write_bytes(encode_bootstrap_checkpoint(record, 1)[:-5])
    with pytest.raises(VotersFileError):
        read_bootstrap_checkpoint(tmp_path)


def test_bootstrap_servers_get_negative_ids_and_allow_an_empty_voter_set() -> None:
    servers = parse_bootstrap_servers("c1:9093, c2:9093")
    assert [(i, e.host, e.port) for i, e in servers.items()] == [(-2, "c1", 9093), (-3, "c2", 9093)]
    with pytest.raises(RaftConfigError, match=r"controller\.quorum\.bootstrap\.servers"):
        parse_bootstrap_servers("c1")
    config = RaftConfig(node_id=4, voters=frozenset(), bootstrap_servers=servers)  # a broker: an observer
    assert not config.is_voter
    with pytest.raises(RaftConfigError):
        RaftConfig(node_id=4, voters=frozenset())


def test_describe_quorum_v2_carries_directory_ids_and_voter_nodes() -> None:
    voters = (VoterSpec(1, directory_id_bytes(DIR_1), "c1", 9093),)
    message = DescribeQuorumResponse(ErrorCode.NONE, 1, 3, 10, (ReplicaState(1, 10, 5, 5),), (ReplicaState(4, 9),))
    body = response_to_wire(message, voters=voters)
    decoded = decode_response_body(ApiKey.DESCRIBE_QUORUM, 2, encode_response_body(ApiKey.DESCRIBE_QUORUM, 2, body))
    partition = decoded.topics[0].partitions[0]
    assert partition.current_voters[0].replica_directory_id == uuid.UUID(bytes=directory_id_bytes(DIR_1))
    assert partition.observers[0].replica_directory_id == uuid.UUID(int=0)
    assert [(n.node_id, [(x.name, x.host, x.port) for x in n.listeners]) for n in decoded.nodes] == [
        (1, [("CONTROLLER", "c1", 9093)])
    ]
    v1 = decode_response_body(ApiKey.DESCRIBE_QUORUM, 1, encode_response_body(ApiKey.DESCRIBE_QUORUM, 1, body))
    assert v1.topics[0].partitions[0].current_voters[0].log_end_offset == 10


def test_voter_change_requests_round_trip_at_v0() -> None:
    listeners = [{"name": "CONTROLLER", "host": "c4", "port": 9093}]
    directory = uuid.UUID(bytes=directory_id_bytes(DIR_2))
    bodies = {
        ApiKey.ADD_RAFT_VOTER: {"cluster_id": None, "timeout_ms": 30000, "voter_id": 4,
                                "voter_directory_id": directory, "listeners": listeners},
        ApiKey.REMOVE_RAFT_VOTER: {"cluster_id": "x", "voter_id": 4, "voter_directory_id": directory},
        ApiKey.UPDATE_RAFT_VOTER: {"cluster_id": "x", "current_leader_epoch": 3, "voter_id": 4,
                                   "voter_directory_id": directory, "listeners": listeners,
                                   "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}},
    }  # fmt: skip
    for api_key, body in bodies.items():
        decoded = decode_request_body(api_key, 0, encode_request_body(api_key, 0, body))
        assert decoded.voter_id == 4
        assert decoded.voter_directory_id == directory
