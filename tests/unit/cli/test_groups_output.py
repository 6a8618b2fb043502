"""``pylog groups`` handlers in-process against a fake admin client: what each verb prints in
text, table and JSON, which calls it makes, and its one-line failures (exit 1)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from pyspark_log.cli import groups as groups_cli
from pyspark_log.cli import main
from pyspark_log.cli.parsing import EARLIEST, LATEST
from pyspark_log.client import TopicPartition
from pyspark_log.client.cluster import BrokerNode, PartitionMetadata, TopicMetadata
from pyspark_log.client.errors import UnknownTopicOrPartitionError, error_for
from pyspark_log.client.group_admin import ConsumerGroupDescription, ConsumerGroupListing, MemberDescription
from pyspark_log.client.groups import OffsetAndMetadata
from pyspark_log.client.types import OffsetAndTimestamp
from pyspark_log.wire import ErrorCode, KafkaError

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
NODE = BrokerNode(1, "127.0.0.1", 9092)


class FakeAdmin:
    """The AdminClient calls ``pylog groups`` makes, over in-memory groups and logs."""

    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroupDescription] = {}
        self.committed: dict[str, dict[TopicPartition, int]] = {}
        self.log: dict[TopicPartition, tuple[int, int]] = {T0: (0, 10), T1: (2, 6)}  # (earliest, latest)
        self.calls: list[tuple[str, Any]] = []

    def add(
        self, group_id: str, state: str, *members: MemberDescription, committed: Mapping[TopicPartition, int] = {}
    ) -> None:
        protocol = "consumer" if members or state == "Stable" else ""
        self.groups[group_id] = ConsumerGroupDescription(
            group_id, protocol, state, "range" if state == "Stable" else "", members, NODE
        )
        self.committed[group_id] = dict(committed)

    def list_consumer_groups(self, states: Iterable[str] | None = None) -> list[ConsumerGroupListing]:
        wanted = set(states or ())
        return [
            ConsumerGroupListing(g, d.protocol_type, d.state)
            for g, d in sorted(self.groups.items())
            if not wanted or d.state in wanted
        ]

    def describe_consumer_groups(self, ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        return {g: self.groups.get(g) or ConsumerGroupDescription(g, "", "Dead", "", (), NODE) for g in ids}

    def list_consumer_group_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(o) for tp, o in self.committed.get(group_id, {}).items()}

    def list_offsets(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        errors = {tp: UnknownTopicOrPartitionError(str(tp)) for tp in specs if tp not in self.log}
        if errors:
            first = next(iter(errors.values()))
            first.errors = errors  # type: ignore[attr-defined]
            raise first
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, spec in specs.items():
            lo, hi = self.log[tp]
            out[tp] = OffsetAndTimestamp(lo if spec == EARLIEST else hi if spec == LATEST else lo + 1, -1)
        return out

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicMetadata]:
        out = {}
        for name in names:
            parts = {tp.partition: PartitionMetadata(name, tp.partition, 1, 0, (1,), (1,)) for tp in self.log}
            if name != "t":
                exc = UnknownTopicOrPartitionError(f"topic {name!r}")
                exc.errors = {name: exc}  # type: ignore[attr-defined]
                raise exc
            out[name] = TopicMetadata(name, None, False, 0, parts)
        return out

    def delete_consumer_groups(self, ids: Iterable[str]) -> None:
        errors: dict[str, KafkaError] = {}
        for g in ids:
            desc = self.groups.get(g)
            if desc is None:
                errors[g] = error_for(ErrorCode.GROUP_ID_NOT_FOUND)
            elif desc.state != "Empty":
                errors[g] = error_for(ErrorCode.NON_EMPTY_GROUP)
            else:
                del self.groups[g]
        self.calls.append(("delete", list(ids)))
        if errors:
            first = next(iter(errors.values()))
            first.errors = errors  # type: ignore[attr-defined]
            raise first

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.calls.append(("alter", (group_id, dict(offsets))))
        self.committed.setdefault(group_id, {}).update(offsets)

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        self.calls.append(("delete-offsets", (group_id, parts)))
        errors: dict[Any, KafkaError] = {tp: error_for(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for tp in parts[1:]}
        if errors:
            first = next(iter(errors.values()))
            first.errors = errors  # type: ignore[attr-defined]
            raise first


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr(groups_cli, "_admin", lambda args, ctx: contextlib.nullcontext(fake))
    return fake


def run(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> tuple[str, str]:
    assert main(["--bootstrap-server", "fake:9092", "groups", *argv]) == code
    out, err = capsys.readouterr()
    if code:  # notes may precede it; the failure is the last line
        assert err.splitlines()[-1].startswith("pylog: ")
        assert err.endswith("\n")
        assert "Traceback" not in err
    return out, err


def two_members() -> tuple[MemberDescription, MemberDescription]:
    return (
        MemberDescription("c1-aaa", None, "c1", "/10.0.0.1", (T0,)),
        MemberDescription("c2-bbb", "static-2", "c2", "/10.0.0.2", (T1,)),
    )


def test_list_text_json_table(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("live", "Stable", *two_members())
    admin.add("spark", "Empty", committed={T0: 4})
    assert run(capsys, "list") == ("live\nspark\n", "")
    out, _ = run(capsys, "list", "--state")
    assert out.splitlines() == ["GROUP  STATE   PROTOCOL-TYPE", "live   Stable  consumer", "spark  Empty   -"]
    out, _ = run(capsys, "list", "--state", "empty")
    assert out.splitlines()[1:] == ["spark  Empty  -"]
    out, _ = run(capsys, "list", "--output", "json")
    assert json.loads(out) == [
        {"groupId": "live", "state": "Stable", "protocolType": "consumer", "type": "classic"},
        {"groupId": "spark", "state": "Empty", "protocolType": "", "type": "classic"},
    ]
    out, _ = run(capsys, "list", "--type")
    assert out.splitlines() == ["GROUP  TYPE", "live   classic", "spark  classic"]
    out, _ = run(capsys, "list", "--type", "consumer")
    assert out.splitlines() == ["GROUP  TYPE"]
    out, _ = run(capsys, "list", "--output", "table")
    assert "Protocol type" in out
    assert "(simple)" in out


def test_describe_offsets_like_kafka_consumer_groups(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("live", "Stable", *two_members(), committed={T0: 7})
    out, err = run(capsys, "describe", "--group", "live")
    assert err == ""
    lines = out.splitlines()
    assert lines[0] == ""
    assert lines[1].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert [line.split() for line in lines[2:]] == [
        ["live", "t", "0", "7", "10", "3", "c1-aaa", "/10.0.0.1", "c1"],
        ["live", "t", "1", "-", "6", "-", "c2-bbb", "/10.0.0.2", "c2"],
    ]
    [group] = json.loads(run(capsys, "describe", "--group", "live", "--output", "json")[0])
    assert group["state"] == "Stable"
    assert group["assignor"] == "range"
    assert group["coordinator"] == {"id": 1, "host": "127.0.0.1", "port": 9092}
    assert group["members"][1] == {
        "memberId": "c2-bbb",
        "groupInstanceId": "static-2",
        "clientId": "c2",
        "host": "/10.0.0.2",
        "assignment": [{"topic": "t", "partition": 1}],
    }
    assert group["offsets"][0] == {
        "topic": "t",
        "partition": 0,
        "currentOffset": 7,
        "logEndOffset": 10,
        "lag": 3,
        "consumerId": "c1-aaa",
        "host": "/10.0.0.1",
        "clientId": "c1",
    }
    table, _ = run(capsys, "describe", "--group", "live", "--output", "table")
    assert "total lag 3" in table


def test_describe_a_group_with_only_commits(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("spark", "Empty", committed={T0: 10, T1: 2, TopicPartition("gone", 0): 5})
    out, err = run(capsys, "describe", "--group", "spark")
    assert err == "Consumer group 'spark' has no active members.\n"
    assert [line.split() for line in out.splitlines()[2:]] == [
        ["spark", "gone", "0", "5", "-", "-", "-", "-", "-"],  # a deleted topic: no end offset, no lag
        ["spark", "t", "0", "10", "10", "0", "-", "-", "-"],
        ["spark", "t", "1", "2", "6", "4", "-", "-", "-"],
    ]


def test_describe_members_and_state(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("live", "Stable", *two_members())
    out, _ = run(capsys, "describe", "--group", "live", "--members", "--verbose")
    assert [line.split() for line in out.splitlines()[1:]] == [
        ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
        ["live", "c1-aaa", "-", "/10.0.0.1", "c1", "1", "t:0"],
        ["live", "c2-bbb", "static-2", "/10.0.0.2", "c2", "1", "t:1"],
    ]
    out, _ = run(capsys, "describe", "--group", "live", "--state")
    assert out.splitlines()[1:] == [
        "GROUP  COORDINATOR (ID)     ASSIGNMENT-STRATEGY  STATE   #MEMBERS",
        "live   127.0.0.1:9092  (1)  range                Stable  2",
    ]


def test_describe_a_missing_group_fails_after_the_others(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("spark", "Empty", committed={T0: 1})
    out, err = run(capsys, "describe", "--group", "nope", "--group", "spark", code=1)
    assert "spark  t" in out
    assert err.splitlines()[-1] == "pylog: consumer group 'nope' does not exist (GROUP_ID_NOT_FOUND)"
    out, _ = run(capsys, "describe", "--all-groups", "--output", "json")
    assert [g["groupId"] for g in json.loads(out)] == ["spark"]


def test_delete_reports_successes_and_one_line_for_failures(
    admin: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    admin.add("live", "Stable", *two_members())
    admin.add("old", "Empty")
    out, err = run(capsys, "delete", "--group", "old", "--group", "live", "--group", "nope", code=1)
    assert out == "Deletion of requested consumer groups ('old') was successful.\n"
    assert err == (
        "pylog: consumer group 'live' is not empty: it has active members (NON_EMPTY_GROUP); "
        "and 1 more group(s) failed\n"
    )
    assert "old" not in admin.groups


def test_reset_is_a_dry_run_unless_executed(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("idle", "Empty", committed={T0: 5})
    out, err = run(capsys, "reset-offsets", "--group", "idle", "--topic", "t", "--to-earliest")
    assert out.splitlines() == [
        "GROUP  TOPIC  PARTITION  NEW-OFFSET",
        "idle   t      0          0",
        "idle   t      1          2",
    ]
    assert err == "Dry run: nothing changed (add --execute to commit these offsets).\n"
    assert run(capsys, "reset-offsets", "--group", "idle", "--topic", "t:1", "--to-latest", "--dry-run")[1] == ""
    assert admin.calls == []
    out, err = run(capsys, "reset-offsets", "--group", "idle", "--all-topics", "--shift-by", "-2", "--execute")
    assert (out.splitlines()[1], err) == ("idle   t      0          3", "")
    assert admin.calls == [("alter", ("idle", {T0: 3}))]
    [row] = json.loads(
        run(capsys, "reset-offsets", "--group", "idle", "--topic", "t:0", "--to-offset", "99", "--output", "json")[0]
    )
    assert row == {"group": "idle", "topic": "t", "partition": 0, "offset": 10}
    [row] = json.loads(
        run(
            capsys,
            "reset-offsets",
            "--group",
            "idle",
            "--topic",
            "t:0",
            "--to-datetime",
            "2024-01-01",
            "--output",
            "json",
        )[0]
    )
    assert row["offset"] == 1


def test_reset_refuses_an_active_group(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("live", "Stable", *two_members(), committed={T0: 7})
    out, err = run(capsys, "reset-offsets", "--group", "live", "--topic", "t", "--to-earliest", "--execute", code=1)
    assert out == ""
    assert err == (
        "pylog: assignments can only be reset if the group 'live' is inactive, but the current state is Stable\n"
    )
    assert admin.calls == []


def test_reset_checks_the_topics_and_partitions(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("idle", "Empty")
    _, err = run(capsys, "reset-offsets", "--group", "idle", "--topic", "t:9", "--to-latest", code=1)
    assert err == "pylog: topic 't' has no partition 9 (it has 2) (UNKNOWN_TOPIC_OR_PARTITION)\n"
    _, err = run(capsys, "reset-offsets", "--group", "idle", "--topic", "nope", "--to-latest", code=1)
    assert err == "pylog: topic 'nope' does not exist (UNKNOWN_TOPIC_OR_PARTITION)\n"
    out, _ = run(capsys, "reset-offsets", "--group", "new", "--topic", "t", "--to-latest", "--execute")
    assert out.splitlines()[1:] == ["new    t      0          10", "new    t      1          6"]


def test_delete_offsets_prints_each_partition(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.add("idle", "Empty", committed={T0: 5, T1: 1})
    out, err = run(capsys, "delete-offsets", "--group", "idle", "--topic", "t", code=1)
    assert out.splitlines() == [
        "TOPIC  PARTITION  STATUS",
        "t      0          Successful",
        "t      1          Error: GROUP_SUBSCRIBED_TO_TOPIC",
    ]
    assert err == "pylog: cannot delete the offset of t:1 for 'idle' (GROUP_SUBSCRIBED_TO_TOPIC)\n"
