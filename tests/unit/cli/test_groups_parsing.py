"""``pylog groups``: the pure parts — option values, the lag rows of ``describe``, the offsets
``reset-offsets`` plans (Kafka's ``GroupOffsetsResetter`` rules), text columns — and the usage
errors of its command line."""

from __future__ import annotations

import pytest

from pyspark_log.cli import main
from pyspark_log.cli.app import build_parser
from pyspark_log.cli.errors import CliError, UsageError
from pyspark_log.cli.groups import (
    PartitionRow,
    ResetSpec,
    assignment_text,
    columns,
    offset_rows,
    parse_duration_ms,
    parse_states,
    parse_topic_partitions,
    plan_reset,
)
from pyspark_log.client import TopicPartition
from pyspark_log.client.group_admin import ConsumerGroupDescription, MemberDescription

T0, T1, T2, U0 = (TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2), TopicPartition("u", 0))


def group(*members: MemberDescription, state: str = "Stable") -> ConsumerGroupDescription:
    return ConsumerGroupDescription("g", "consumer", state, "range", members, None)


def member(name: str, *tps: TopicPartition) -> MemberDescription:
    return MemberDescription(f"{name}-id", None, name, "/10.0.0.1", tps)


# -- option values ---------------------------------------------------------------------------------


def test_states_are_kafkas_names_case_insensitively() -> None:
    assert parse_states("stable, EMPTY,stable") == ["Stable", "Empty"]
    assert parse_states("preparingrebalance,CompletingRebalance,dead") == [
        "PreparingRebalance",
        "CompletingRebalance",
        "Dead",
    ]
    assert parse_states("") == []
    with pytest.raises(UsageError, match="invalid state 'running'; valid states are: Stable, "):
        parse_states("stable,running")


def test_topic_with_or_without_partitions() -> None:
    assert parse_topic_partitions("events") == ("events", None)
    assert parse_topic_partitions("events:0,2,2, 5") == ("events", (0, 2, 5))
    assert parse_topic_partitions("a.b-c:7") == ("a.b-c", (7,))
    for bad in ("events:", "events:x", "events:-1", ":1", "events:1,,2"):
        with pytest.raises(UsageError, match="must look like TOPIC or TOPIC:P"):
            parse_topic_partitions(bad)


def test_iso_durations_as_kafkas_by_duration_takes_them() -> None:
    assert parse_duration_ms("PT30M") == 30 * 60_000
    assert parse_duration_ms("P1DT2H") == 26 * 3_600_000
    assert parse_duration_ms("pt1.5s") == 1500
    assert parse_duration_ms("P2D") == 2 * 86_400_000
    for bad in ("P", "PT", "30m", "P1DT", "P1H", "-PT1S"):
        with pytest.raises(UsageError, match="must look like PnDTnHnMnS"):
            parse_duration_ms(bad)


def test_assignment_text_groups_partitions_by_topic() -> None:
    assert assignment_text([T2, U0, T0]) == "t:0,2;u:0"
    assert assignment_text([]) == "-"


def test_columns_align_and_show_none_as_dash() -> None:
    assert columns(["GROUP", "LAG"], [("g", 5), ("longer-group", None)]) == [
        "GROUP         LAG",
        "g             5",
        "longer-group  -",
    ]


# -- describe rows ---------------------------------------------------------------------------------


def test_rows_of_members_then_of_committed_partitions_nobody_owns() -> None:
    desc = group(member("small", U0), member("big", T1, T0))
    committed = {T0: 3, T1: 10, T2: 4}
    log_end = {T0: 5, T1: 10, T2: 9, U0: 7}
    rows = offset_rows(desc, committed, log_end)
    assert [(r.topic, r.partition, r.consumer_id) for r in rows] == [
        ("t", 0, "big-id"),
        ("t", 1, "big-id"),
        ("u", 0, "small-id"),
        ("t", 2, None),
    ]
    assert [(r.current_offset, r.log_end_offset, r.lag) for r in rows] == [
        (3, 5, 2),
        (10, 10, 0),
        (None, 7, None),  # assigned, nothing committed yet: no lag
        (4, 9, 5),
    ]
    assert (rows[0].host, rows[0].client_id) == ("/10.0.0.1", "big")
    assert (rows[3].host, rows[3].client_id) == (None, None)


def test_a_group_with_only_commits_has_rows_without_consumers() -> None:
    rows = offset_rows(group(state="Empty"), {T1: 2, T0: 1}, {T0: 1})
    assert rows == [PartitionRow("g", "t", 0, 1, 1), PartitionRow("g", "t", 1, 2, None)]
    assert [r.lag for r in rows] == [0, None]
    assert offset_rows(group(member("idle")), {}, {}) == []


def test_lag_is_unclamped_like_kafkas() -> None:
    assert PartitionRow("g", "t", 0, 12, 10).lag == -2


# -- reset plans -----------------------------------------------------------------------------------

EARLIEST = {T0: 2, T1: 0, T2: 5}
LATEST = {T0: 10, T1: 4, T2: 5}


def plan(spec: ResetSpec, committed: dict[TopicPartition, int] | None = None, **kw: object) -> dict:
    return plan_reset(spec, [T0, T1, T2], earliest=EARLIEST, latest=LATEST, committed=committed or {}, **kw)  # type: ignore[arg-type]


def test_reset_to_earliest_latest() -> None:
    assert plan(ResetSpec("earliest")) == EARLIEST
    assert plan(ResetSpec("latest")) == LATEST


def test_reset_to_offset_is_clamped_into_the_log() -> None:
    assert plan(ResetSpec("offset", 3)) == {T0: 3, T1: 3, T2: 5}
    assert plan(ResetSpec("offset", 0)) == {T0: 2, T1: 0, T2: 5}


def test_shift_by_moves_the_committed_offset_within_the_log() -> None:
    committed = {T0: 4, T1: 3, T2: 5}
    assert plan(ResetSpec("shift", -3), committed) == {T0: 2, T1: 0, T2: 5}
    assert plan(ResetSpec("shift", 2), committed) == {T0: 6, T1: 4, T2: 5}
    with pytest.raises(CliError, match="cannot shift the offset of t:2: the group has none committed"):
        plan(ResetSpec("shift", 1), {T0: 4, T1: 3})


def test_to_current_keeps_commits_and_takes_the_end_elsewhere() -> None:
    assert plan(ResetSpec("current"), {T0: 7}) == {T0: 7, T1: 4, T2: 5}


def test_to_datetime_takes_the_found_offset_or_the_end() -> None:
    assert plan(ResetSpec("time", 1), at_time={T0: 6, T1: None, T2: 5}) == {T0: 6, T1: 4, T2: 5}


# -- the command line ------------------------------------------------------------------------------


def test_reset_options_parse_into_one_spec() -> None:
    parser = build_parser()
    base = ["groups", "reset-offsets", "--group", "g", "--topic", "t"]
    assert parser.parse_args([*base, "--shift-by", "-2"]).spec == ResetSpec("shift", -2)
    assert parser.parse_args([*base, "--to-offset", "7"]).spec == ResetSpec("offset", 7)
    assert parser.parse_args([*base, "--to-earliest"]).spec == ResetSpec("earliest")
    args = parser.parse_args([*base, "--to-datetime", "2023-11-14T22:13:20Z", "--execute"])
    assert args.spec == ResetSpec("time", 1_700_000_000_000)
    assert (args.execute, args.dry_run) == (True, False)
    args = parser.parse_args([*base, "--by-duration", "PT1M"])
    assert (args.spec, args.by_duration) == (None, 60_000)


def test_list_state_is_a_flag_or_a_filter() -> None:
    parser = build_parser()
    assert parser.parse_args(["groups", "list"]).state is None
    assert parser.parse_args(["groups", "list", "--state"]).state == []
    assert parser.parse_args(["groups", "list", "--state", "empty,stable"]).state == ["Empty", "Stable"]


GROUP_USAGE_ERRORS = [
    (["groups"], "the following arguments are required: VERB (see 'pylog groups --help')"),
    (["groups", "describe"], "one of the arguments --group --all-groups is required"),
    (
        ["groups", "describe", "--group", "g", "--all-groups"],
        "argument --all-groups: not allowed with argument --group",
    ),
    (["groups", "describe", "--group", "g", "--members", "--state"], "argument --state: not allowed with argument"),
    (["groups", "delete"], "one of the arguments --group --all-groups is required"),
    (["groups", "reset-offsets", "--group", "g", "--to-earliest"], "one of the arguments --topic --all-topics is"),
    (["groups", "reset-offsets", "--group", "g", "--topic", "t"], "one of the arguments --to-earliest --to-latest"),
    (
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--to-earliest"],
        "argument --to-earliest: not allowed with argument --to-latest",
    ),
    (
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--dry-run", "--execute"],
        "argument --execute: not allowed with argument --dry-run",
    ),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-offset", "-1"], "argument --to-offset: must be"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--shift-by", "x"], "argument --shift-by: 'x' is not"),
    (
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "soon"],
        "timestamp 'soon' is neither",
    ),
    (
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--by-duration", "1h"],
        "duration '1h' must look like",
    ),
    (["groups", "list", "--state", "busy"], "invalid state 'busy'; valid states are"),
    (["groups", "delete-offsets", "--topic", "t"], "the following arguments are required: --group"),
    (["groups", "delete-offsets", "--group", "g"], "the following arguments are required: --topic"),
    (["groups", "describe", "--group", "g", "--timeout", "0"], "argument --timeout: must be >= 1, not 0"),
]


@pytest.mark.parametrize(("argv", "expected"), GROUP_USAGE_ERRORS)
def test_usage_errors_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("pylog: " + expected), err
