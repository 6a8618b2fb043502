"""Issue #26, "Kafka's own tools against pylog": Apache Kafka 4.1's command-line tools, unchanged
(their Java AdminClient, producer and consumer), against a 3-node pylog cluster; the tools' output
is parsed and checked against what the cluster serves, not only their exit codes.

This module: ``kafka-topics`` (create with configs, describe against the cluster's Metadata,
alter, list, delete, the errors of bad requests, ``--under-replicated-partitions`` while a node is
stopped), ``kafka-console-producer``/``kafka-console-consumer`` (keys, headers, a group),
``kafka-consumer-groups`` (list, describe with lag, reset to earliest, delete),
``kafka-get-offsets`` (-1/-2/-3 and a timestamp), ``kafka-delete-records``, ``kafka-log-dirs``,
``kafka-metadata-quorum`` (through a broker and through the controllers, KIP-919) and
``kafka-leader-election`` (preferred). Kafka's documentation: "Operations" (§6.1 basic Kafka
operations) and each tool's ``--help``.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from pyspark_log.embedded_cluster import CLUSTER_ID, EmbeddedCluster, PartitionView
from tests.apache_kafka import kafka_tool_process
from tests.integration.kafka_tools_helpers import (
    NODES,
    ids,
    parse_fields,
    parse_offsets,
    parse_tabbed,
    parse_table,
    parse_topic_description,
    run,
    tools_cluster,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    # a stopped follower leaves the ISRs after 10 s rather than Kafka's default 30 s
    overrides = {"replica.lag.time.max.ms": "10000"}
    with tools_cluster(Path(tmp_path_factory.mktemp("kafka-tools-topics")), overrides) as c:
        yield c


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(cluster: EmbeddedCluster, topic: str, partitions: int, *extra: str) -> None:
    done = run("kafka-topics", "--bootstrap-server", cluster.bootstrap(), "--create", "--topic", topic,
               "--partitions", str(partitions), "--replication-factor", "3", *extra)  # fmt: skip
    assert f"Created topic {topic}." in done.stdout
    wait_until(lambda: full_isr(cluster, topic, partitions), f"{topic}'s {partitions} partitions with full ISRs")


def full_isr(cluster: EmbeddedCluster, topic: str, partitions: int) -> bool:
    views = cluster.partitions(topic)
    return len(views) == partitions and all(len(v.isr) == len(NODES) and v.leader >= 0 for v in views.values())


def describe(cluster: EmbeddedCluster, topic: str) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
    done = run("kafka-topics", "--bootstrap-server", cluster.bootstrap(), "--describe", "--topic", topic)
    return parse_topic_description(done.stdout)


def test_topics_create_describe_alter_list_delete(cluster: EmbeddedCluster) -> None:
    topic, doomed = unique("tools-topic"), unique("tools-doomed")
    bootstrap = cluster.bootstrap()
    create_topic(cluster, topic, 3, "--config", "retention.ms=3600000", "--config", "max.message.bytes=200000")

    # every partition line agrees with the cluster's own Metadata answer (polled: on a busy
    # machine an ISR may change between the two reads)
    def agreeing() -> tuple[dict[str, str], dict[int, PartitionView]] | None:
        head, rows = describe(cluster, topic)
        metadata = cluster.partitions(topic)
        seen = {p: (int(r["Leader"]), ids(r["Replicas"]), ids(r["Isr"])) for p, r in rows.items()}
        return (head, metadata) if seen == {p: (v.leader, v.replicas, v.isr) for p, v in metadata.items()} else None

    head, metadata = wait_until(agreeing, "kafka-topics --describe to agree with the Metadata answer")
    assert (head["Topic"], head["PartitionCount"], head["ReplicationFactor"]) == (topic, "3", "3")
    assert len(head["TopicId"]) == 22  # a base64 UUID (KIP-516)
    configs = dict(item.split("=", 1) for item in head["Configs"].split(","))
    assert configs["retention.ms"] == "3600000"
    assert configs["max.message.bytes"] == "200000"
    assert sorted(metadata) == [0, 1, 2]
    assert all(sorted(view.replicas) == list(NODES) for view in metadata.values())
    assert {view.leader for view in metadata.values()} == set(NODES)  # leadership spread over the nodes

    # --alter --partitions: an increase is applied; a decrease is refused with Kafka's exception
    run("kafka-topics", "--bootstrap-server", bootstrap, "--alter", "--topic", topic, "--partitions", "5")
    wait_until(lambda: full_isr(cluster, topic, 5), "5 partitions with full ISRs")
    head, rows = describe(cluster, topic)
    assert head["PartitionCount"] == "5"
    assert sorted(rows) == [0, 1, 2, 3, 4]
    shrink = run("kafka-topics", "--bootstrap-server", bootstrap, "--alter", "--topic", topic, "--partitions", "2",
                 ok=False)  # fmt: skip
    assert shrink.returncode == 1
    assert "InvalidPartitionsException" in shrink.stdout + shrink.stderr

    # bad creates: the Kafka exception each error code maps to
    again = run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, ok=False)
    assert again.returncode == 1
    assert "TopicExistsException" in again.stdout + again.stderr
    too_many = run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", doomed,
                   "--replication-factor", "4", ok=False)  # fmt: skip
    assert too_many.returncode == 1
    assert "InvalidReplicationFactorException" in too_many.stdout + too_many.stderr

    create_topic(cluster, doomed, 1)
    listed = run("kafka-topics", "--bootstrap-server", bootstrap, "--list").stdout.split()
    assert topic in listed
    assert doomed in listed
    run("kafka-topics", "--bootstrap-server", bootstrap, "--delete", "--topic", doomed)

    def gone() -> bool:
        names = run("kafka-topics", "--bootstrap-server", bootstrap, "--list").stdout.split()
        return doomed not in names and topic in names

    wait_until(gone, f"{doomed} to leave kafka-topics --list")


def consume(cluster: EmbeddedCluster, topic: str, count: int, *extra: str) -> list[dict[str, str]]:
    """``kafka-console-consumer --max-messages count`` printing partition, offset, headers, key and
    value; one dict per record."""
    done = run("kafka-console-consumer", "--bootstrap-server", cluster.bootstrap(), "--topic", topic,
               "--max-messages", str(count), "--timeout-ms", "60000", "--property", "print.partition=true",
               "--property", "print.offset=true", "--property", "print.headers=true", "--property", "print.key=true",
               *extra)  # fmt: skip
    records = []
    for line in done.stdout.splitlines():
        partition, offset, headers, key, value = line.split("\t")
        records.append({"partition": partition.removeprefix("Partition:"), "offset": offset.removeprefix("Offset:"),
                        "headers": headers, "key": key, "value": value})  # fmt: skip
    assert f"Processed a total of {count} messages" in done.stderr
    assert len(records) == count, done.stdout
    return records


def describe_group(cluster: EmbeddedCluster, group: str) -> dict[int, dict[str, str]]:
    done = run("kafka-consumer-groups", "--bootstrap-server", cluster.bootstrap(), "--describe", "--group", group)
    return {int(row["PARTITION"]): row for row in parse_table(done.stdout, "GROUP")}


def test_console_clients_and_consumer_groups(cluster: EmbeddedCluster) -> None:
    topic, group = unique("tools-console"), unique("tools-group")
    bootstrap = cluster.bootstrap()
    create_topic(cluster, topic, 2)
    lines = [f"i:{i},src:tools\tk{i}:v{i}" for i in range(6)]
    run("kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
        "--property", "parse.key=true", "--property", "key.separator=:", "--property", "parse.headers=true",
        input_text="\n".join(lines) + "\n")  # fmt: skip

    got = consume(cluster, topic, 6, "--group", group, "--from-beginning")
    assert sorted((r["key"], r["value"], r["headers"]) for r in got) == [
        (f"k{i}", f"v{i}", f"i:{i},src:tools") for i in range(6)
    ]
    by_partition: dict[int, list[dict[str, str]]] = {}
    for r in got:
        by_partition.setdefault(int(r["partition"]), []).append(r)
    for records in by_partition.values():  # each partition read from offset 0, in production order
        assert [int(r["offset"]) for r in records] == list(range(len(records)))
        assert [int(r["key"][1:]) for r in records] == sorted(int(r["key"][1:]) for r in records)

    assert group in run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--list").stdout.split()
    described = describe_group(cluster, group)
    assert sorted(described) == [0, 1]
    for partition, row in described.items():
        produced = len(by_partition.get(partition, []))
        assert (row["TOPIC"], row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == (
            topic,
            str(produced),
            str(produced),
            "0",
        )
        assert row["CONSUMER-ID"] == "-"  # the console consumer has left

    run("kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
        "--property", "parse.key=true", "--property", "key.separator=:",
        input_text="".join(f"k{i}:v{i}\n" for i in range(6, 10)))  # fmt: skip
    described = describe_group(cluster, group)
    assert sum(int(row["LAG"]) for row in described.values()) == 4
    assert sum(int(row["LOG-END-OFFSET"]) for row in described.values()) == 10

    reset = run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--to-earliest",
                "--execute", "--group", group, "--topic", topic)  # fmt: skip
    assert {(int(r["PARTITION"]), r["NEW-OFFSET"]) for r in parse_table(reset.stdout, "GROUP")} == {(0, "0"), (1, "0")}
    described = describe_group(cluster, group)
    for row in described.values():
        assert row["CURRENT-OFFSET"] == "0"
        assert row["LAG"] == row["LOG-END-OFFSET"]
    # the group resumes from the reset offsets: everything again, without --from-beginning
    again = consume(cluster, topic, 10, "--group", group)
    assert sorted(r["value"] for r in again) == sorted(f"v{i}" for i in range(10))
    assert {r["headers"] for r in again if int(r["key"][1:]) >= 6} == {"NO_HEADERS"}

    # an active member: --members and --state show it, and the group cannot be deleted
    member = kafka_tool_process("kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                                "--group", group)  # fmt: skip
    try:

        def members() -> list[dict[str, str]]:
            done = run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group,
                       "--members")  # fmt: skip
            return [row for row in parse_table(done.stdout, "GROUP") if row["#PARTITIONS"] == "2"]

        (row,) = wait_until(members, "the console consumer to join the group with both partitions")
        assert row["CLIENT-ID"] == "console-consumer"
        assert row["CONSUMER-ID"].startswith("console-consumer-")
        done = run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--state")
        (state,) = [line.split() for line in done.stdout.splitlines() if line.startswith(group)]
        assert state[-3:] == ["range", "Stable", "1"]  # ASSIGNMENT-STRATEGY, STATE, #MEMBERS
        busy = run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", group)
        assert "GroupNotEmptyException" in busy.stdout
    finally:
        member.terminate()
        try:
            member.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            member.kill()
            member.communicate()

    def leave() -> bool:
        done = run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", group, ok=False)
        return f"Deletion of requested consumer groups ('{group}') was successful." in done.stdout

    # the member's LeaveGroup on SIGTERM empties the group (its session timeout at the latest)
    wait_until(leave, "the group to be deleted once its member left")
    assert group not in run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--list").stdout.split()
    # the group's offsets live in an internal topic that --exclude-internal hides
    listed = run("kafka-topics", "--bootstrap-server", bootstrap, "--list", "--exclude-internal").stdout.split()
    assert topic in listed
    assert not [name for name in listed if name.startswith("__")]


def test_get_offsets_delete_records_log_dirs(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    """kafka-get-offsets reads ListOffsets (-1 latest, -2 earliest, -3 max timestamp, a timestamp);
    kafka-delete-records moves the log start offset; kafka-log-dirs describes every replica."""
    topic = unique("tools-offsets")
    bootstrap = cluster.bootstrap()
    create_topic(cluster, topic, 2)
    base_ms = int(time.time() * 1000) - 60_000
    stamps = [base_ms + i * 10 for i in range(10)]
    stamps[6] = base_ms + 10_000  # the record of the largest timestamp is not the last one
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i, stamp in enumerate(stamps):
        producer.produce(topic, value=f"r{i}".encode(), partition=0, timestamp=stamp)
    assert producer.flush(60) == 0

    def offsets(spec: str) -> dict[tuple[str, int], int]:
        return parse_offsets(run("kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic,
                                 "--time", spec).stdout)  # fmt: skip

    assert offsets("-1") == {(topic, 0): 10, (topic, 1): 0}
    assert offsets("-2") == {(topic, 0): 0, (topic, 1): 0}
    assert offsets("-3") == {(topic, 0): 6}  # an empty partition has no max-timestamp record (as in Kafka)
    assert offsets(str(base_ms + 25))[(topic, 0)] == 3  # the first record at or after the timestamp

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 4}]}))
    done = run("kafka-delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", str(spec))
    assert "Records delete operation completed:" in done.stdout
    assert parse_fields(done.stdout.splitlines()[-1]) == {"partition": f"{topic}-0", "low_watermark": "4"}
    assert offsets("-2") == {(topic, 0): 4, (topic, 1): 0}
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 99}]}))
    beyond = run("kafka-delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", str(spec))
    assert "OffsetOutOfRangeException" in beyond.stdout  # reported per partition; the tool itself exits 0

    def described() -> dict[int, dict[str, dict[str, object]]] | None:
        out = run("kafka-log-dirs", "--bootstrap-server", bootstrap, "--describe", "--topic-list", topic).stdout
        report = json.loads(out.splitlines()[-1])
        by_broker = {
            b["broker"]: {p["partition"]: {**p, "logDir": d["logDir"], "error": d["error"]}
                          for d in b["logDirs"] for p in d["partitions"]}
            for b in report["brokers"]
        }  # fmt: skip
        sizes = {replicas[f"{topic}-0"]["size"] for replicas in by_broker.values() if f"{topic}-0" in replicas}
        return by_broker if len(sizes) == 1 else None  # the followers hold the leader's bytes

    report = wait_until(described, "kafka-log-dirs to show equal replicas")
    assert sorted(report) == list(NODES)
    for broker, replicas in report.items():
        assert sorted(replicas) == [f"{topic}-0", f"{topic}-1"]
        zero, one = replicas[f"{topic}-0"], replicas[f"{topic}-1"]
        assert isinstance(zero["size"], int)
        assert zero["size"] > 0
        assert one["size"] == 0
        assert zero["isFuture"] is False
        assert zero["offsetLag"] == 0
        assert zero["error"] is None
        assert str(zero["logDir"]).startswith(str(cluster.nodes[broker].data_dir))


def quorum_status(*target: str) -> dict[str, str]:
    done = run("kafka-metadata-quorum", *target, "describe", "--status")
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in done.stdout.splitlines()) if v}


def test_metadata_quorum_through_brokers_and_controllers(cluster: EmbeddedCluster) -> None:
    """kafka-metadata-quorum describes the KIP-595 quorum: through a broker (--bootstrap-server,
    DescribeQuorum forwarded to the leader) and through the controllers themselves
    (--bootstrap-controller, KIP-919: DescribeCluster answered with the controller endpoints)."""
    status = quorum_status("--bootstrap-server", cluster.bootstrap())
    assert status["ClusterId"] == CLUSTER_ID
    assert int(status["LeaderId"]) in NODES
    assert int(status["LeaderEpoch"]) >= 1
    assert int(status["HighWatermark"]) > 0
    assert sorted(v["id"] for v in json.loads(status["CurrentVoters"])) == list(NODES)
    assert json.loads(status["CurrentObservers"]) == []

    done = run("kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap(), "describe", "--replication")
    rows = parse_tabbed(done.stdout)
    assert sorted(int(r["NodeId"]) for r in rows) == list(NODES)
    assert sorted(r["Status"] for r in rows) == ["Follower", "Follower", "Leader"]
    leader = next(r for r in rows if r["Status"] == "Leader")
    assert int(leader["NodeId"]) == int(status["LeaderId"])
    assert int(leader["Lag"]) == 0

    via_controllers = quorum_status("--bootstrap-controller", cluster.controller_address(2))
    assert via_controllers["ClusterId"] == CLUSTER_ID
    assert int(via_controllers["LeaderId"]) in NODES
    assert sorted(v["id"] for v in json.loads(via_controllers["CurrentVoters"])) == list(NODES)
    done = run("kafka-metadata-quorum", "--bootstrap-controller", cluster.controller_address(3), "describe",
               "--replication")  # fmt: skip
    assert sorted(r["Status"] for r in parse_tabbed(done.stdout)) == ["Follower", "Follower", "Leader"]


def test_kafka_reassign_partitions(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    """``kafka-reassign-partitions`` (KIP-455) against pylog: ``--generate`` proposes a placement on
    the given brokers, ``--execute`` starts the moves (printing the current assignment for
    rollback), ``--verify`` reports each partition completed once the new replicas are in the ISR,
    ``--list`` then finds none, and ``--cancel`` of a finished move says none are active."""
    topic = unique("tools-move")
    bootstrap = cluster.bootstrap()
    done = run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
               "--replica-assignment", "1:2,2:3")  # fmt: skip
    assert f"Created topic {topic}." in done.stdout
    wait_until(lambda: all(len(v.isr) == 2 for v in cluster.partitions(topic).values()), f"{topic}'s ISRs")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(200):
        producer.produce(topic, value=b"m%d" % i, partition=i % 2)
    assert producer.flush(60) == 0
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    done = run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--generate",
               "--topics-to-move-json-file", str(topics_file), "--broker-list", "2,3")  # fmt: skip
    proposed = json.loads(done.stdout.split("Proposed partition reassignment configuration")[1].strip())
    assert {p["partition"]: set(p["replicas"]) for p in proposed["partitions"]} == {0: {2, 3}, 1: {2, 3}}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3]},
        {"topic": topic, "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
    ]}))  # fmt: skip
    done = run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
               "--reassignment-json-file", str(plan))  # fmt: skip
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in done.stdout

    def verified() -> bool:
        out = run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                  "--reassignment-json-file", str(plan)).stdout  # fmt: skip
        return all(f"Reassignment of partition {topic}-{p} is completed." in out for p in (0, 1))

    wait_until(verified, "--verify reporting both moves completed")
    views = cluster.partitions(topic)
    assert (views[0].replicas, set(views[0].isr), views[0].leader) == ((2, 3), {2, 3}, 2)
    assert (views[1].replicas, set(views[1].isr)) == ((3, 1), {3, 1})
    listed = run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--list").stdout
    assert "No partition reassignments found." in listed
    done = run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--cancel",
               "--reassignment-json-file", str(plan))  # fmt: skip
    assert "None of the specified partition reassignments are active." in done.stdout


def test_java_consumer_with_the_kip848_protocol(cluster: EmbeddedCluster) -> None:
    """``group.protocol=consumer`` (KIP-848, served since ``group.coordinator.rebalance.protocols``
    defaults to ``classic,consumer``): the Java console consumer joins through ConsumerGroupHeartbeat,
    reads everything and commits with its member epoch; ``kafka-consumer-groups --describe`` (the
    admin client's ConsumerGroupDescribe) shows the committed offsets."""
    topic, group = unique("tools-848"), unique("tools-848")
    bootstrap = cluster.bootstrap()
    create_topic(cluster, topic, 2)
    run("kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
        input_text="".join(f"v{i}\n" for i in range(8)))  # fmt: skip
    done = run("kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
               "--consumer-property", "group.protocol=consumer", "--from-beginning", "--max-messages", "8",
               "--timeout-ms", "60000")  # fmt: skip
    assert "Processed a total of 8 messages" in done.stderr
    assert sorted(done.stdout.split()) == sorted(f"v{i}" for i in range(8))
    described = describe_group(cluster, group)
    assert sorted(described) == [0, 1]
    assert sum(int(row["CURRENT-OFFSET"]) for row in described.values()) == 8
    assert {row["LAG"] for row in described.values()} == {"0"}

    # an active KIP-848 member as the tool shows it: member epochs and the group's assignor
    member = kafka_tool_process("kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                                "--group", group, "--consumer-property", "group.protocol=consumer")  # fmt: skip
    try:

        def members() -> list[dict[str, str]]:
            done = run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group,
                       "--members", "--verbose")  # fmt: skip
            return [row for row in parse_table(done.stdout, "GROUP") if row.get("#PARTITIONS") == "2"]

        (row,) = wait_until(members, "the KIP-848 console consumer with both partitions")
        assert row["CLIENT-ID"] == "console-consumer"
        assert int(row["CURRENT-EPOCH"]) >= 1
        assert row["CURRENT-EPOCH"] == row["TARGET-EPOCH"]
        assert row["CURRENT-ASSIGNMENT"] == row["TARGET-ASSIGNMENT"]
        done = run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--state")
        (state,) = [line.split() for line in done.stdout.splitlines() if line.startswith(group)]
        assert state[-3:] == ["uniform", "Stable", "1"]  # ASSIGNMENT-STRATEGY, STATE, #MEMBERS
    finally:
        member.terminate()
        try:
            member.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            member.kill()
            member.communicate()


def under_replicated(bootstrap: str) -> dict[tuple[str, int], dict[str, str]]:
    done = run("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--under-replicated-partitions")
    rows = [parse_fields(line) for line in done.stdout.splitlines() if line.strip()]
    return {(row["Topic"], int(row["Partition"])): row for row in rows}


def test_under_replicated_partitions_and_preferred_election(cluster: EmbeddedCluster) -> None:
    """Last in the module: node 3 is stopped (SIGSTOP) until its replicas leave the ISRs and
    ``--under-replicated-partitions`` lists them; once it is back and caught up the list is empty
    again and ``kafka-leader-election --election-type PREFERRED`` returns the leadership it lost."""
    topic = unique("tools-urp")
    create_topic(cluster, topic, 3)
    bootstrap = cluster.bootstrap()
    wait_until(lambda: under_replicated(bootstrap) == {}, "no under-replicated partition in a healthy cluster")
    preferred = {p: view.replicas[0] for p, view in cluster.partitions(topic).items()}
    assert sorted(preferred.values()) == list(NODES)

    survivors = cluster.bootstrap(among=(1, 2))
    cluster.pause(3)
    try:

        def listed() -> dict[tuple[str, int], dict[str, str]] | None:
            rows = {key: row for key, row in under_replicated(survivors).items() if key[0] == topic}
            return rows if len(rows) == 3 and all(int(r["Leader"]) != 3 for r in rows.values()) else None

        rows = wait_until(listed, "the partitions without node 3 in --under-replicated-partitions")
        for (_, partition), row in rows.items():
            assert 3 not in ids(row["Isr"])
            assert 3 in ids(row["Replicas"])
            assert ids(row["Replicas"]) == cluster.partitions(topic, via=1)[partition].replicas
    finally:
        cluster.resume(3)
    # asked through nodes 1 and 2: node 3's own metadata, just resumed, may still show the ISRs it
    # saw before the pause
    wait_until(lambda: under_replicated(survivors) == {}, "every ISR to be whole again")
    moved = [p for p, view in cluster.partitions(topic).items() if view.leader != preferred[p]]
    assert moved, "node 3's partition kept its leader while node 3 was stopped"

    done = run("kafka-leader-election", "--bootstrap-server", bootstrap, "--election-type", "PREFERRED",
               "--all-topic-partitions")  # fmt: skip
    assert "Successfully completed leader election (PREFERRED) for partitions" in done.stdout
    elected = done.stdout.split("for partitions", 1)[1].replace(",", " ").split()
    assert {f"{topic}-{p}" for p in moved} <= set(elected)
    wait_until(lambda: {p: v.leader for p, v in cluster.partitions(topic).items()} == preferred,
               "the preferred leaders back")  # fmt: skip
    _head, rows_now = describe(cluster, topic)
    assert {p: int(r["Leader"]) for p, r in rows_now.items()} == preferred
    again = run("kafka-leader-election", "--bootstrap-server", bootstrap, "--election-type", "PREFERRED",
                "--topic", topic, "--partition", "0")  # fmt: skip
    assert f"Valid replica already elected for partitions {topic}-0" in again.stdout
