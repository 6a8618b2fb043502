"""``pylog metadata-quorum``: KIP-595's fields computed from a DescribeQuorum answer (KIP-595
"Tooling Support"; v2 directory ids and voter endpoints, KIP-853, printed as Kafka 4.1's
kafka-metadata-quorum prints them), add-controller's reading of a controller's properties, and the
command line."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.cli import main
from pyspark_log.cli.errors import CliError
from pyspark_log.cli.metadata_quorum import QuorumInfo, controller_to_add, format_replication, format_status


def replica(node_id: int, leo: int, fetch: int = -1, caught_up: int = -1) -> dict[str, int]:
    return {
        "replica_id": node_id,
        "log_end_offset": leo,
        "last_fetch_timestamp": fetch,
        "last_caught_up_timestamp": caught_up,
    }


def response(error: int = 0, **partition: Any) -> dict[str, Any]:
    base = {
        "partition_index": 0,
        "error_code": error,
        "leader_id": 2,
        "leader_epoch": 15,
        "high_watermark": 234130,
        "current_voters": [replica(1, 234100, 990, 985), replica(2, 234134, 1000, 1000), replica(3, 234130, 995, 990)],
        "observers": [replica(5, 234130, 998, 996), replica(4, 234124, 997, 988)],
    }
    base.update(partition)
    return {"error_code": 0, "topics": [{"topic_name": "__cluster_metadata", "partitions": [base]}]}


def test_status_fields_as_kafka_computes_them() -> None:
    """MaxFollowerLag: the leader's log end offset minus the most lagging voter's;
    MaxFollowerLagTimeMs: the difference of their last caught-up times. Voters and observers as
    Kafka 4.1's ``Node.toString`` (a zero directory id and missing endpoints left out)."""
    body = response()
    body["topics"][0]["partitions"][0]["current_voters"][0]["replica_directory_id"] = uuid.UUID(bytes=bytes(range(16)))
    body["nodes"] = [{"node_id": 1, "listeners": [{"name": "CONTROLLER", "host": "h1", "port": 9093}]}]
    info = QuorumInfo.from_response(body)
    assert format_status(info.status("SomeClusterId")) == [
        "ClusterId:              SomeClusterId",
        "LeaderId:               2",
        "LeaderEpoch:            15",
        "HighWatermark:          234130",
        "MaxFollowerLag:         34",
        "MaxFollowerLagTimeMs:   15",
        'CurrentVoters:          [{"id": 1, "directoryId": "AAECAwQFBgcICQoLDA0ODw", '
        '"endpoints": ["CONTROLLER://h1:9093"]}, {"id": 2}, {"id": 3}]',
        'CurrentObservers:       [{"id": 5}, {"id": 4}]',
    ]


def test_replication_rows_leader_first_then_voters_then_observers() -> None:
    """Kafka 4.1's columns (DirectoryId, no LagTimeMs) and order (answer order within a group)."""
    rows = QuorumInfo.from_response(response()).replication()
    assert [(r["NodeId"], r["Lag"], r["Status"]) for r in rows] == [
        (2, 0, "Leader"),
        (1, 34, "Follower"),
        (3, 4, "Follower"),
        (5, 4, "Observer"),
        (4, 10, "Observer"),
    ]
    lines = format_replication(rows)
    assert (
        lines[0]
        == "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t"
    )
    assert lines[1].split() == ["2", "AAAAAAAAAAAAAAAAAAAAAA", "234134", "0", "1000", "1000", "Leader"]


def test_add_controller_reads_the_controllers_properties(tmp_path: Path) -> None:
    """kafka-metadata-quorum add-controller: node.id, the metadata dir's directory.id and the
    advertised endpoint of the controller listener."""
    (tmp_path / "meta.properties").write_text(
        "version=1\ncluster.id=x\nnode.id=4\ndirectory.id=AAECAwQFBgcICQoLDA0ODw\n"
    )
    props = {
        "node.id": "4", "process.roles": "controller", "log.dirs": str(tmp_path),
        "listeners": "CONTROLLER://0.0.0.0:9093", "advertised.listeners": "CONTROLLER://c4:9093",
        "controller.listener.names": "CONTROLLER",
    }  # fmt: skip
    controller = controller_to_add(props)
    assert (controller.node_id, controller.directory_id.bytes, controller.endpoints) == (
        4, bytes(range(16)), (("CONTROLLER", "c4", 9093),)
    )  # fmt: skip
    with pytest.raises(CliError, match=r"process\.roles did not contain 'controller'"):
        controller_to_add({**props, "process.roles": "broker"})
    with pytest.raises(CliError, match=r"Unable to read meta\.properties"):
        controller_to_add({**props, "log.dirs": str(tmp_path / "nowhere")})


def test_max_follower_lag_time_is_that_of_the_smallest_leo_voter() -> None:
    """Kafka's MetadataQuorumCommand takes both fields from the voter with the smallest log end
    offset; a voter with an older LastCaughtUpTimestamp but a longer log does not count (review
    finding 21 proposed the oldest timestamp; Kafka 3.3's Scala and 3.5+'s Java tool both do this)."""
    voters = [replica(1, 90, 1000, 995), replica(2, 100, 1000, 1000), replica(3, 95, 1000, 900)]
    fields = dict(QuorumInfo.from_response(response(current_voters=voters, observers=[])).status(None))
    assert (fields["MaxFollowerLag"], fields["MaxFollowerLagTimeMs"]) == (10, 5)


def test_ties_pick_the_first_voter_in_the_answer_and_the_leader_counts_zero() -> None:
    """Java's ``Stream.min`` keeps the first of equal elements: when every voter has caught up and
    the leader comes first, both fields are 0; when another voter comes first, its lag time."""
    caught_up = [replica(2, 100, 1000, 1000), replica(1, 100, 1000, 990), replica(3, 100, 1000, 980)]
    fields = dict(QuorumInfo.from_response(response(current_voters=caught_up, observers=[])).status(None))
    assert (fields["MaxFollowerLag"], fields["MaxFollowerLagTimeMs"]) == (0, 0)
    fields = dict(QuorumInfo.from_response(response(current_voters=caught_up[1:] + caught_up[:1])).status(None))
    assert (fields["MaxFollowerLag"], fields["MaxFollowerLagTimeMs"]) == (0, 10)


def test_unknown_timestamps_give_minus_one() -> None:
    """DescribeQuorum v0 carries no timestamps: lag times are unknown (-1)."""
    voters = [replica(1, 5), replica(2, 7)]
    info = QuorumInfo.from_response(response(current_voters=voters, observers=[]))
    assert dict(info.status(None))["MaxFollowerLagTimeMs"] == -1
    assert dict(info.status(None))["MaxFollowerLag"] == 2


def test_no_leader_is_one_line_error() -> None:
    with pytest.raises(CliError, match=r"no leader right now.*\(NOT_LEADER_OR_FOLLOWER\)"):
        QuorumInfo.from_response(response(error=6))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["metadata-quorum"], "the following arguments are required: VERB"),
        (["metadata-quorum", "describe"], "one of the arguments --status --replication is required"),
        (["metadata-quorum", "describe", "--status", "--replication"], "not allowed with argument"),
        (["metadata-quorum", "remove-controller", "--controller-id", "1"], "--controller-directory-id"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert err.startswith("pylog: ")
    assert expected in err
