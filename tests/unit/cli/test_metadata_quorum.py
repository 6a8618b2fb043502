"""``pylog metadata-quorum describe``: the seed's fields computed from a DescribeQuorum answer
(KIP-595 "Tooling Support"), and the command line."""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_log.cli import main
from pyspark_log.cli.errors import CliError
from pyspark_log.cli.metadata_quorum import QuorumInfo, format_replication, format_status


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
    MaxFollowerLagTimeMs: the difference of their last caught-up times."""
    info = QuorumInfo.from_response(response())
    assert format_status(info.status("SomeClusterId")) == [
        "ClusterId:              SomeClusterId",
        "LeaderId:               2",
        "LeaderEpoch:            15",
        "HighWatermark:          234130",
        "MaxFollowerLag:         34",
        "MaxFollowerLagTimeMs:   15",
        "CurrentVoters:          [1,2,3]",
        "CurrentObservers:       [5,4]",
    ]


def test_replication_rows_leader_first_then_voters_then_observers() -> None:
    rows = QuorumInfo.from_response(response()).replication()
    assert [(r["NodeId"], r["Lag"], r["LagTimeMs"], r["Status"]) for r in rows] == [
        (2, 0, 0, "Leader"),
        (1, 34, 15, "Follower"),
        (3, 4, 10, "Follower"),
        (4, 10, 12, "Observer"),
        (5, 4, 4, "Observer"),
    ]
    lines = format_replication(rows)
    assert lines[0].split() == ["NodeId", "LogEndOffset", "Lag", "LagTimeMs", "LastFetchTimestamp",
                                "LastCaughtUpTimestamp", "Status"]  # fmt: skip
    assert lines[1].split() == ["2", "234134", "0", "0", "1000", "1000", "Leader"]


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
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert err.startswith("pylog: ")
    assert expected in err
