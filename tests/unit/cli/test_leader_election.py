"""``pylog leader-election``: kafka-leader-election's flags, its output wording, and exit codes
(the admin call is replaced; the cluster tests run it against real brokers)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.cli import main
from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import UsageError
from pyspark_log.cli.leader_election import Report, parse_json_partitions
from pyspark_log.client import ElectionType, TopicPartition
from pyspark_log.client.errors import ErrorCode, error_for

TP0, TP1, TP2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 2)


class FakeAdmin:
    def __init__(self, results: dict[TopicPartition, Any]) -> None:
        self.results = results
        self.calls: list[tuple[ElectionType, list[TopicPartition] | None]] = []

    def elect_leaders(self, kind: ElectionType, partitions: list[TopicPartition] | None) -> dict[TopicPartition, Any]:
        self.calls.append((kind, partitions))
        return self.results


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin({})

    @contextlib.contextmanager
    def opened(self: Context, overrides: Any = None) -> Iterator[FakeAdmin]:
        yield fake

    monkeypatch.setattr(Context, "admin", opened)
    return fake


def test_topic_and_partition_elect_one_preferred_leader(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]):
    admin.results = {TP0: None}
    argv = ["leader-election", "--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t"]
    assert main([*argv, "--partition", "0"]) == 0
    assert admin.calls == [(ElectionType.PREFERRED, [TP0])]
    assert capsys.readouterr().out == "Successfully completed leader election (PREFERRED) for partitions t-0\n"


def test_all_partitions_sends_null_and_failures_exit_1(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]):
    admin.results = {
        TP1: error_for(ErrorCode.ELECTION_NOT_NEEDED, "broker 1 leads", context="elect leader of t-1"),
        TP0: None,
        TP2: error_for(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica of [4, 5] is live",
                       context="elect leader of u-2"),
    }  # fmt: skip
    assert main(["leader-election", "--election-type", "UNCLEAN", "--all-topic-partitions"]) == 1
    assert admin.calls == [(ElectionType.UNCLEAN, None)]
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "Successfully completed leader election (UNCLEAN) for partitions t-0",
        "Valid replica already elected for partitions t-1",
        "Error completing leader election (UNCLEAN) for partition: u-2: no replica of [4, 5] is live"
        " (ELIGIBLE_LEADERS_NOT_AVAILABLE)",
    ]
    assert err == "pylog: 1 replica(s) could not be elected\n"


def test_json_file_of_partitions(admin: FakeAdmin, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "p.json"
    path.write_text('{"partitions": [{"topic": "t", "partition": 1}, {"topic": "u", "partition": 2}]}')
    admin.results = {TP1: None, TP2: None}
    assert main(["leader-election", "--election-type", "PREFERRED", "--path-to-json-file", str(path)]) == 0
    assert admin.calls == [(ElectionType.PREFERRED, [TP1, TP2])]
    assert capsys.readouterr().out == "Successfully completed leader election (PREFERRED) for partitions t-1, u-2\n"


def test_json_output(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]):
    admin.results = {TP0: error_for(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica 1 is not live")}
    assert main(["leader-election", "--output", "json", "--election-type", "preferred", "--all-topic-partitions"]) == 1
    out, _ = capsys.readouterr()
    assert '"error": "PREFERRED_LEADER_NOT_AVAILABLE"' in out
    assert '"message": "the preferred replica 1 is not live"' in out


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--election-type", "dirty", "--all-topic-partitions"], "must be PREFERRED or UNCLEAN, not 'dirty'"),
        (["--all-topic-partitions"], "the following arguments are required: --election-type"),
        (["--election-type", "preferred"], "give exactly one of --topic (with --partition), --all-topic-partitions"),
        (["--election-type", "preferred", "--topic", "t"], "--topic needs --partition"),
        (["--election-type", "preferred", "--partition", "0", "--all-topic-partitions"], "--partition needs --topic"),
        (["--election-type", "preferred", "--topic", "t", "--partition", "0", "--all-topic-partitions"],
         "give exactly one of"),
        (["--election-type", "preferred", "--path-to-json-file", "/no/such.json"], "cannot read '/no/such.json'"),
    ],
)  # fmt: skip
def test_usage_errors(admin: FakeAdmin, capsys: pytest.CaptureFixture[str], flags: list[str], expected: str):
    assert main(["leader-election", *flags]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert expected in err
    assert err.count("\n") == 1
    assert admin.calls == []


def test_json_file_shape_is_checked():
    assert parse_json_partitions('{"partitions": [{"topic": "t", "partition": 0}]}', "f") == [TP0]
    for bad, words in (
        ('{"partition": []}', "not a partitions file"),
        ('{"partitions": [{"topic": "t"}]}', "not a partitions file"),
        ('{"partitions": []}', "empty"),
        ('{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}', "duplicate .* t-0"),
    ):
        with pytest.raises(UsageError, match=words):
            parse_json_partitions(bad, "f")


def test_report_groups_outcomes_in_partition_order():
    report = Report.of(ElectionType.PREFERRED, {TP2: None, TP0: None})
    assert report.lines() == ["Successfully completed leader election (PREFERRED) for partitions t-0, u-2"]
    assert Report.of(ElectionType.PREFERRED, {}).lines() == []
