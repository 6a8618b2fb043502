"""``pylog groups`` (run as ``python -m pyspark_log.cli``) against a real broker and real groups:
a two-member confluent-kafka group in ``list`` and ``describe`` with its members, assignments and
lag; ``delete`` refused while the group has members and done once it is empty; ``reset-offsets``
refused on an active group, a dry run by default, applied with ``--execute`` (and obeyed by the
next consumer); a group with only committed offsets (as a Spark query's groupId makes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_log.client import AdminClient, TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import wait_until

from .groups_helpers import GROUP_BROKER_OVERRIDES, confluent_member, create_topic, drive, produce, split_evenly, unique

AUTO_COMMIT = {"enable.auto.commit": True, "auto.commit.interval.ms": 100}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("cli-groups"), overrides=GROUP_BROKER_OVERRIDES) as broker:
        yield broker.bootstrap_servers


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[AdminClient]:
    with AdminClient({"bootstrap.servers": bootstrap}) as client:
        yield client


def pylog(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", bootstrap, "groups", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env, check=False)


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def ok_json(bootstrap: str, *args: str) -> Any:
    return json.loads(ok(pylog(bootstrap, *args, "--output", "json")))


def fails(proc: subprocess.CompletedProcess[str]) -> str:
    """The failure line of a run that exited 1 (no traceback)."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    line = proc.stderr.splitlines()[-1]
    assert line.startswith("pylog: ")
    return line


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    return {tp.partition: om.offset for tp, om in admin.list_consumer_group_offsets(group).items()}


def end_offsets(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    found = admin.list_offsets({TopicPartition(topic, p): -1 for p in range(partitions)})
    return {tp.partition: hit.offset for tp, hit in found.items() if hit is not None}


def state_of(admin: AdminClient, group: str) -> str:
    return admin.describe_consumer_groups([group])[group].state


def test_a_two_member_group_in_list_and_describe_with_its_lag(bootstrap: str, admin: AdminClient) -> None:
    topic, group = unique("lag"), unique("g")
    create_topic(bootstrap, topic, 4)
    produce(bootstrap, topic, 20)
    m1, c1 = confluent_member("cli-c1", bootstrap, group, [topic], **AUTO_COMMIT)
    m2, c2 = confluent_member("cli-c2", bootstrap, group, [topic], **AUTO_COMMIT)
    try:
        drive([m1, m2], split_evenly([m1, m2], topic, 4))
        drive([m1, m2], lambda: sum(committed(admin, group).values()) == 20)

        listed = {g["groupId"]: g for g in ok_json(bootstrap, "list")}
        assert listed[group] == {"groupId": group, "state": "Stable", "protocolType": "consumer", "type": "classic"}
        assert group in ok(pylog(bootstrap, "list")).splitlines()
        assert [group, "Stable", "consumer"] in [
            line.split() for line in ok(pylog(bootstrap, "list", "--state")).splitlines()
        ]

        [desc] = ok_json(bootstrap, "describe", "--group", group, "--members")
        assert desc["state"] == "Stable"
        assert desc["protocolType"] == "consumer"
        assert desc["assignor"] in {"range", "roundrobin", "cooperative-sticky"}
        members = {m["clientId"]: m for m in desc["members"]}
        assert set(members) == {"cli-c1", "cli-c2"}
        assert all(m["host"] == "/127.0.0.1" for m in members.values())
        owned = {name: {(a["topic"], a["partition"]) for a in m["assignment"]} for name, m in members.items()}
        assert owned["cli-c1"] == m1.assignment()
        assert owned["cli-c2"] == m2.assignment()
        members_text = ok(pylog(bootstrap, "describe", "--group", group, "--members", "--verbose"))
        assert members_text.splitlines()[1].split() == [
            "GROUP",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "ASSIGNMENT",
        ]
        assert sorted(line.split()[3:5] for line in members_text.splitlines()[2:]) == [["cli-c1", "2"], ["cli-c2", "2"]]

        [desc] = ok_json(bootstrap, "describe", "--group", group)
        rows = {r["partition"]: r for r in desc["offsets"]}
        assert sorted(rows) == [0, 1, 2, 3]
        assert all(r["lag"] == 0 and r["currentOffset"] == r["logEndOffset"] for r in rows.values())
        for p, r in rows.items():
            owner = "cli-c1" if (topic, p) in m1.assignment() else "cli-c2"
            assert (r["clientId"], r["consumerId"]) == (owner, members[owner]["memberId"])

        produce(bootstrap, topic, 8, start=20)  # nobody polls: the group falls behind by 8
        [desc] = ok_json(bootstrap, "describe", "--group", group)
        ends, commits = end_offsets(admin, topic, 4), committed(admin, group)
        assert {r["partition"]: r["logEndOffset"] for r in desc["offsets"]} == ends
        assert {r["partition"]: r["lag"] for r in desc["offsets"]} == {p: ends[p] - commits[p] for p in ends}
        assert sum(r["lag"] for r in desc["offsets"]) == 8
        text = ok(pylog(bootstrap, "describe", "--group", group)).splitlines()
        assert text[1].split() == [
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
        assert sum(int(line.split()[5]) for line in text[2:]) == 8

        drive([m1, m2], lambda: sum(committed(admin, group).values()) == 28)
        [desc] = ok_json(bootstrap, "describe", "--group", group)
        assert [r["lag"] for r in desc["offsets"]] == [0, 0, 0, 0]

        [state] = ok_json(bootstrap, "describe", "--group", group, "--state")
        assert state["coordinator"]["id"] == 1
        assert len(state["members"]) == 2
    finally:
        c1.close()
        c2.close()


def test_delete_fails_while_the_group_has_members_and_works_once_empty(bootstrap: str, admin: AdminClient) -> None:
    topic, group = unique("del"), unique("g")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 6)
    m1, c1 = confluent_member("del-c1", bootstrap, group, [topic], **AUTO_COMMIT)
    try:
        drive([m1], lambda: len(m1.received) == 6 and sum(committed(admin, group).values()) == 6)
        line = fails(pylog(bootstrap, "delete", "--group", group))
        assert line == f"pylog: consumer group '{group}' is not empty: it has active members (NON_EMPTY_GROUP)"
    finally:
        c1.close()  # LeaveGroup: the group is empty at once
    wait_until(lambda: state_of(admin, group) == "Empty", "the group to be empty")
    [desc] = ok_json(bootstrap, "describe", "--group", group)
    assert desc["members"] == []
    assert [(r["partition"], r["currentOffset"], r["consumerId"]) for r in desc["offsets"]] == [
        (p, offset, None) for p, offset in sorted(committed(admin, group).items())
    ]
    assert ok(pylog(bootstrap, "delete", "--group", group)) == (
        f"Deletion of requested consumer groups ('{group}') was successful.\n"
    )
    assert group not in ok(pylog(bootstrap, "list")).splitlines()
    assert committed(admin, group) == {}
    assert fails(pylog(bootstrap, "describe", "--group", group)) == (
        f"pylog: consumer group '{group}' does not exist (GROUP_ID_NOT_FOUND)"
    )
    assert fails(pylog(bootstrap, "delete", "--group", group)) == (
        f"pylog: consumer group '{group}' does not exist (GROUP_ID_NOT_FOUND)"
    )


def test_reset_offsets_refused_while_active_dry_run_then_executed(bootstrap: str, admin: AdminClient) -> None:
    topic, group = unique("reset"), unique("g")
    create_topic(bootstrap, topic, 2)
    values = produce(bootstrap, topic, 10)
    m1, c1 = confluent_member("reset-c1", bootstrap, group, [topic], **AUTO_COMMIT)
    try:
        drive([m1], lambda: len(m1.received) == 10 and sum(committed(admin, group).values()) == 10)
        before = committed(admin, group)
        line = fails(pylog(bootstrap, "reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute"))
        assert line == (
            f"pylog: assignments can only be reset if the group '{group}' is inactive, but the current state is Stable"
        )
        assert committed(admin, group) == before
    finally:
        c1.close()
    wait_until(lambda: state_of(admin, group) == "Empty", "the group to be empty")

    dry = pylog(bootstrap, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert [line.split() for line in ok(dry).splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [group, topic, "0", "0"],
        [group, topic, "1", "0"],
    ]
    assert "Dry run" in dry.stderr
    assert ok_json(bootstrap, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run") == [
        {"group": group, "topic": topic, "partition": p, "offset": 0} for p in (0, 1)
    ]
    assert committed(admin, group) == before  # a dry run changes nothing

    ok(pylog(bootstrap, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"))
    assert committed(admin, group) == {0: 0, 1: 0}
    plan = ok_json(bootstrap, "reset-offsets", "--group", group, "--all-topics", "--shift-by", "2", "--execute")
    assert [r["offset"] for r in plan] == [2, 2]
    ok(pylog(bootstrap, "reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "999", "--execute"))
    assert committed(admin, group) == {0: 2, 1: before[1]}  # clamped to the log end
    [desc] = ok_json(bootstrap, "describe", "--group", group)
    assert {r["partition"]: r["lag"] for r in desc["offsets"]} == {0: before[0] - 2, 1: 0}

    # The next member of the group starts where the reset put it.
    m2, c2 = confluent_member("reset-c2", bootstrap, group, [topic])
    try:
        drive([m2], lambda: len(m2.received) == before[0] - 2)
        assert set(m2.received) < set(values)
        assert len(m2.received) == before[0] - 2
    finally:
        c2.close()


def test_a_group_with_only_committed_offsets(bootstrap: str, admin: AdminClient) -> None:
    """What a Spark query with groupId leaves: offsets, no members, no protocol type."""
    topic, group = unique("simple"), unique("spark")
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, 9)
    ends = end_offsets(admin, topic, 3)
    admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): ends[0], TopicPartition(topic, 2): 1})
    assert {"groupId": group, "state": "Empty", "protocolType": "", "type": "classic"} in ok_json(bootstrap, "list")
    proc = pylog(bootstrap, "describe", "--group", group)
    assert proc.stderr == f"Consumer group '{group}' has no active members.\n"
    assert [line.split() for line in ok(proc).splitlines()[2:]] == [
        [group, topic, "0", str(ends[0]), str(ends[0]), "0", "-", "-", "-"],
        [group, topic, "2", "1", str(ends[2]), str(ends[2] - 1), "-", "-", "-"],
    ]
    deleted = pylog(bootstrap, "delete-offsets", "--group", group, "--topic", f"{topic}:2")
    assert [line.split() for line in ok(deleted).splitlines()] == [
        ["TOPIC", "PARTITION", "STATUS"],
        [topic, "2", "Successful"],
    ]
    assert committed(admin, group) == {0: ends[0]}
    assert [g["groupId"] for g in ok_json(bootstrap, "describe", "--all-groups") if g["groupId"] == group] == [group]
    ok(pylog(bootstrap, "delete", "--group", group))
    assert group not in ok(pylog(bootstrap, "list")).splitlines()
