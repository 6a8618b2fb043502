"""The ``pylog`` command (``python -m pyspark_log.cli``) against a real broker: topics, produce,
consume, offsets, cluster, and the one-line errors with their exit codes (1 operation, 2 usage)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_log.cli import main
from pyspark_log.client import Producer
from pyspark_log.embedded import EmbeddedBroker

BASE_TS_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def pylog(
    broker: EmbeddedBroker | None, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    argv = [sys.executable, "-m", "pyspark_log.cli"]
    if broker is not None:
        argv += ["--bootstrap-server", broker.bootstrap_servers]
    run_env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    run_env.update(env or {})
    return subprocess.run([*argv, *args], input=stdin, capture_output=True, timeout=60, env=run_env, check=False)


def ok(proc: subprocess.CompletedProcess[bytes]) -> str:
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def fails(proc: subprocess.CompletedProcess[bytes], code: int = 1) -> str:
    """The single stderr line of a failed run (no traceback)."""
    err = proc.stderr.decode()
    assert proc.returncode == code, (proc.returncode, err)
    assert err.startswith("pylog: "), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.rstrip("\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- topics ----------------------------------------------------------------------------------------


def test_topics_lifecycle(broker: EmbeddedBroker, topic_name: str) -> None:
    t = topic_name
    assert ok(pylog(broker, "topics", "create", t, "--partitions", "2", "--config", "retention.ms=600000")) == (
        f"Created topic {t}.\n"
    )
    assert fails(pylog(broker, "topics", "create", t)) == f"pylog: topic '{t}' already exists (TOPIC_ALREADY_EXISTS)"
    assert ok(pylog(broker, "topics", "create", t, "--if-not-exists")) == ""

    assert t in ok(pylog(broker, "topics", "list")).splitlines()
    assert t in json.loads(ok(pylog(broker, "topics", "list", "--output", "json")))

    [desc] = json.loads(ok(pylog(broker, "--output", "json", "topics", "describe", t)))
    assert desc["name"] == t
    assert desc["partitionCount"] == 2
    assert desc["replicationFactor"] == 1
    assert desc["configs"] == {"retention.ms": "600000"}
    assert desc["cleanupPolicy"] == "delete"  # the broker's default, shown though not overridden
    assert [p["partition"] for p in desc["partitions"]] == [0, 1]
    assert all(p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1] for p in desc["partitions"])
    assert ok(pylog(broker, "topics", "describe", t)) == (
        f"Topic: {t}\tTopicId: {desc['topicId']}\tPartitionCount: 2\tReplicationFactor: 1\t"
        "Configs: retention.ms=600000\n"
        f"\tTopic: {t}\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n"
        f"\tTopic: {t}\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\n"
    )
    table = ok(pylog(broker, "topics", "describe", t, "--output", "table"))
    assert "ISR" in table
    assert "retention.ms=600000" in table

    altered = pylog(
        broker, "topics", "alter", t, "--partitions", "3", "--config", "cleanup.policy=compact",
        "--delete-config", "retention.ms",
    )  # fmt: skip
    assert ok(altered) == f"Altered topic {t}: set cleanup.policy=compact, deleted retention.ms, partitions=3.\n"
    [desc] = json.loads(ok(pylog(broker, "topics", "describe", t, "--output", "json")))
    assert desc["partitionCount"] == 3
    assert desc["configs"] == {"cleanup.policy": "compact"}
    assert desc["cleanupPolicy"] == "compact"
    assert "cleanup.policy compact" in ok(pylog(broker, "topics", "describe", t, "--output", "table"))
    assert "Configs: cleanup.policy=compact" in ok(pylog(broker, "topics", "describe", t))
    shrink = fails(pylog(broker, "topics", "alter", t, "--partitions", "1"))
    assert shrink.startswith(f"pylog: topic '{t}' has 3 partitions")
    assert shrink.endswith("(INVALID_PARTITIONS)")

    assert ok(pylog(broker, "topics", "delete", t)) == f"Deleted topic {t}.\n"
    assert fails(pylog(broker, "topics", "delete", t)) == (
        f"pylog: topic '{t}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"
    )
    assert ok(pylog(broker, "topics", "delete", t, "--if-exists")) == ""
    assert t not in ok(pylog(broker, "topics", "list")).splitlines()


def test_topic_errors(broker: EmbeddedBroker, topic_name: str) -> None:
    bad = fails(pylog(broker, "topics", "create", topic_name, "--config", "no.such.config=1"))
    assert bad == f"pylog: topic '{topic_name}': unknown topic config 'no.such.config' (INVALID_CONFIG)"
    bad_value = fails(pylog(broker, "topics", "create", topic_name, "--config", "retention.ms=soon"))
    expected = f"pylog: topic '{topic_name}': topic config retention.ms='soon' is not an integer (INVALID_CONFIG)"
    assert bad_value == expected
    missing = f"pylog: topic '{topic_name}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"
    assert fails(pylog(broker, "topics", "describe", topic_name)) == missing
    assert fails(pylog(broker, "topics", "alter", topic_name, "--config", "retention.ms=1")) == missing
    assert fails(pylog(broker, "consume", topic_name, "--timeout-ms", "100")) == missing
    assert fails(pylog(broker, "offsets", topic_name)) == missing


def test_replica_assignment(broker: EmbeddedBroker, topic_name: str) -> None:
    """kafka-topics' ``--replica-assignment``: this one-node broker (id 1) accepts only itself."""
    t = topic_name
    assert ok(pylog(broker, "topics", "create", t, "--replica-assignment", "1,1")) == f"Created topic {t}.\n"
    ok(pylog(broker, "topics", "alter", t, "--partitions", "3", "--replica-assignment", "1"))
    [desc] = json.loads(ok(pylog(broker, "--output", "json", "topics", "describe", t)))
    assert [(p["partition"], p["leader"], p["replicas"]) for p in desc["partitions"]] == [
        (0, 1, [1]), (1, 1, [1]), (2, 1, [1]),
    ]  # fmt: skip
    unknown = fails(pylog(broker, "topics", "create", f"{t}-x", "--replica-assignment", "1,7"))
    assert "includes broker 7, but no such broker is registered" in unknown  # Kafka's message
    assert unknown.endswith("(INVALID_REPLICA_ASSIGNMENT)")
    assert fails(pylog(broker, "topics", "create", f"{t}-y", "--replica-assignment", "1:x"), 2) == (
        "pylog: --replica-assignment '1:x': partition 0 is '1:x'; give broker ids separated by ':' and"
        " partitions separated by ',' (e.g. 1:2,2:1)"
    )
    both = fails(pylog(broker, "topics", "create", f"{t}-z", "--partitions", "2", "--replica-assignment", "1"), 2)
    assert both == "pylog: --replica-assignment replaces --partitions and --replication-factor; give only it"
    assert f"{t}-x" not in ok(pylog(broker, "topics", "list")).splitlines()


def test_usage_errors_exit_2(broker: EmbeddedBroker) -> None:
    """More usage errors run in-process in tests/unit/cli/test_app.py."""
    assert fails(pylog(broker, "topics", "alter", "x"), 2) == (
        "pylog: topics alter needs --partitions, --config or --delete-config"
    )
    assert "not allowed with argument" in fails(pylog(broker, "consume", "x", "--from-beginning", "--offset", "1"), 2)


def test_unreachable_broker(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    line = f"pylog: cannot reach {address}: connection refused"
    assert fails(pylog(None, "--bootstrap-server", address, "topics", "list")) == line
    assert fails(pylog(None, "produce", "t", "--bootstrap-server", address, stdin=b"x\n")) == line
    # the environment names the broker when no flag does; a bad --command-config key is a usage error
    assert fails(pylog(None, "cluster", "describe", env={"PYLOG_BOOTSTRAP_SERVERS": address})) == line
    config = tmp_path / "client.properties"
    config.write_text("# a comment\nno.such.key=1\n")
    assert fails(pylog(None, "--command-config", str(config), "topics", "list"), 2) == (
        "pylog: bad client config: unknown admin config key 'no.such.key'"
    )


# -- produce and consume ---------------------------------------------------------------------------


def test_produce_stdin_then_consume_each_format(broker: EmbeddedBroker, topic_name: str) -> None:
    t = topic_name
    ok(pylog(broker, "topics", "create", t, "--partitions", "1"))
    produced = pylog(
        broker, "produce", t, "--key-separator", ":", "--header", "source=cli", "--header", "n=1=2",
        "--acks", "1", "--compression", "gzip", "--linger-ms", "0",
        stdin=b"k1:hello\nk2:w\xc3\xb6rld:x\r\nk3:\n",
    )  # fmt: skip
    assert ok(produced) == ""
    assert produced.stderr.decode().startswith(f"Produced 3 records (19 B) to {t} in ")

    def consume(*args: str) -> str:
        proc = pylog(broker, "consume", t, "--from-beginning", "--max-messages", "3", "--timeout-ms", "10000", *args)
        assert proc.stderr.decode().endswith("Processed a total of 3 messages\n")
        return ok(proc)

    assert consume() == "hello\nwörld:x\n\n"
    assert consume("--format", "key-value") == "k1\thello\nk2\twörld:x\nk3\t\n"
    lines = [json.loads(line) for line in consume("--format", "json").splitlines()]
    headers = [{"key": "source", "value": "cli"}, {"key": "n", "value": "1=2"}]
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in lines] == [
        (0, "k1", "hello", headers),
        (1, "k2", "wörld:x", headers),
        (2, "k3", "", headers),
    ]
    assert all(r["topic"] == t and r["partition"] == 0 and r["timestampType"] == "CreateTime" for r in lines)
    assert all(isinstance(r["timestamp"], int) and r["timestamp"] > BASE_TS_MS for r in lines)


def test_produce_file_binary_and_max_messages(broker: EmbeddedBroker, topic_name: str, tmp_path: Path) -> None:
    t = topic_name
    ok(pylog(broker, "topics", "create", t))
    data = tmp_path / "records.txt"
    data.write_bytes(b"a\tplain\nb\t\xff\xfe\x00\n" + b"".join(b"k%d\tv%d\n" % (i, i) for i in range(20)))
    produced = pylog(broker, "produce", t, "--file", str(data), "--key-separator", "\\t", "--partition", "0")
    ok(produced)
    assert produced.stderr.decode().startswith("Produced 22 records (")

    proc = pylog(broker, "consume", t, "--from-beginning", "--max-messages", "2", "--format", "json")
    first, second = (json.loads(line) for line in ok(proc).splitlines())
    assert (first["key"], first["value"]) == ("a", "plain")
    assert (second["key"], second["value"]) == ("b", {"base64": "//4A"})
    assert proc.stderr.decode() == "Processed a total of 2 messages\n"
    raw = pylog(broker, "consume", t, "--offset", "1", "--max-messages", "1")
    assert raw.stdout == b"\xff\xfe\x00\n"


def test_consume_from_offset_timestamp_and_partitions(broker: EmbeddedBroker, topic_name: str) -> None:
    t = topic_name
    ok(pylog(broker, "topics", "create", t, "--partitions", "2"))
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0}) as producer:
        for i in range(6):
            producer.send(t, f"v{i}", partition=0, timestamp_ms=BASE_TS_MS + i * 1000).result(30)
        producer.send(t, "p1", partition=1, timestamp_ms=BASE_TS_MS).result(30)

    def consume(expected: int, *args: str) -> list[str]:
        """Records until ``expected`` came (the idle timeout only guards), or for 500 ms when none should."""
        limit = ["--max-messages", str(expected), "--timeout-ms", "10000"] if expected else ["--timeout-ms", "500"]
        proc = pylog(broker, "consume", t, *limit, *args)
        assert proc.stderr.decode() == f"Processed a total of {expected} messages\n"
        return ok(proc).splitlines()

    assert consume(2, "--partition", "0", "--offset", "4") == ["v4", "v5"]
    assert consume(3, "--partition", "0", "--from-timestamp", "2023-11-14T22:13:23Z") == ["v3", "v4", "v5"]
    assert consume(1, "--partition", "0", "--from-timestamp", str(BASE_TS_MS + 4500)) == ["v5"]
    # naive ISO 8601 means UTC; a partition with nothing at or after the time starts at its end
    assert consume(1, "--from-timestamp", "2023-11-14T22:13:25") == ["v5"]
    assert sorted(consume(7, "--from-beginning")) == ["p1", "v0", "v1", "v2", "v3", "v4", "v5"]
    assert consume(1, "--from-beginning", "--partition", "1") == ["p1"]
    assert consume(0, "--partition", "0", "--offset", "6") == []
    assert consume(0) == []  # the default start is the end: nothing new
    assert fails(pylog(broker, "consume", t, "--partition", "5")) == (
        f"pylog: topic '{t}' has no partition 5 (it has 2) (UNKNOWN_TOPIC_OR_PARTITION)"
    )

    # offsets: kafka-get-offsets' text, JSON, and a table
    assert ok(pylog(broker, "offsets", t)) == f"{t}:0:6\n{t}:1:1\n"
    assert ok(pylog(broker, "offsets", t, "--time", "earliest")) == f"{t}:0:0\n{t}:1:0\n"
    assert ok(pylog(broker, "offsets", t, "--time", "2023-11-14T22:13:22Z", "--partition", "0")) == f"{t}:0:2\n"
    assert ok(pylog(broker, "offsets", t, "--time", str(BASE_TS_MS + 10_000))) == f"{t}:0:\n{t}:1:\n"
    rows = json.loads(ok(pylog(broker, "offsets", t, "--time", "max-timestamp", "--output", "json")))
    assert rows == [
        {"topic": t, "partition": 0, "offset": 5, "timestamp": BASE_TS_MS + 5000},
        {"topic": t, "partition": 1, "offset": 0, "timestamp": BASE_TS_MS},
    ]
    table = ok(pylog(broker, "offsets", t, "--output", "table"))
    assert "Offset" in table


def test_cluster_describe(broker: EmbeddedBroker) -> None:
    desc = json.loads(ok(pylog(broker, "cluster", "describe", "--output", "json")))
    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    assert desc["clusterId"]
    assert desc["controller"] == 1
    assert desc["brokers"] == [{"id": 1, "host": "127.0.0.1", "port": port, "rack": None}]
    text = ok(pylog(broker, "cluster", "describe"))
    assert (
        text == f"ClusterId: {desc['clusterId']}\tController: 1\nBroker: 1\tHost: 127.0.0.1\tPort: {port}\tRack: null\n"
    )


@pytest.mark.parametrize("module", ["pyspark_log.cli"])
def test_import_does_not_load_pyspark_or_rich(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in ('pyspark', 'rich') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "[]"


def test_metadata_quorum_unreachable_bootstrap_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metadata-quorum", "--bootstrap-server", "127.0.0.1:1", "describe", "--status"]) == 1
    _, err = capsys.readouterr()
    assert err.count("\n") == 1
    assert err.startswith("pylog: cannot reach 127.0.0.1:1")
