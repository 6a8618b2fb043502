"""The broker's logs against a real broker process (issue #32 "Logs"): ``log.format=json`` lines
carry the node id; Kafka's loggers switch at run time through DescribeConfigs /
IncrementalAlterConfigs on ``BROKER_LOGGER`` (KIP-412) from ``pylog configs`` and from Kafka's own
``kafka-configs``; the state-change log gets a line per partition leadership with its epochs;
files under ``kafka.logs.dir`` rotate at ``log.file.max.bytes``; a restart logs the recovery
progress; CLI progress bars appear only when stderr is a terminal (a pseudo-terminal here)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.client import AdminClient, Producer
from pyspark_log.client.admin import AlterConfigOp, AlterOp, ConfigResource, ResourceType
from pyspark_log.embedded import EmbeddedBroker
from tests.apache_kafka import KafkaUnavailable, kafka_libs, kafka_tool
from tests.terminal import run_on_pty
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    root = tmp_path_factory.mktemp("broker-logs")
    overrides = {
        "log.format": "json",
        "kafka.logs.dir": str(root / "klogs"),
        "log.file.max.bytes": "20000",
        "log.file.backup.count": "3",
        "log.recovery.progress.interval.ms": "0",
    }
    with EmbeddedBroker(root / "node", kraft=True, overrides=overrides) as running:
        yield running


def _logs_dir(broker: EmbeddedBroker) -> Path:
    return Path(broker.overrides["kafka.logs.dir"])


def pylog(broker: EmbeddedBroker, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", broker.bootstrap_servers, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, **kwargs)  # type: ignore[call-overload,no-any-return]


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _levels(broker: EmbeddedBroker) -> dict[str, str]:
    done = pylog(broker, "configs", "--describe", "--entity-type", "broker-loggers", "--entity-name", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker-logger 1 are:"
    return dict(line.strip().split(" ")[0].split("=", 1) for line in lines[1:])


def test_json_lines_parse_and_carry_the_node_id(broker: EmbeddedBroker) -> None:
    lines = _json_lines(broker.output())
    assert len(lines) > 5
    for obj in lines:
        assert obj["node_id"] == 1
        assert {"timestamp", "level", "logger", "message"} <= obj.keys()
        assert str(obj["timestamp"]).endswith("Z")
    server = _json_lines((_logs_dir(broker) / "server.log").read_text())
    assert any(o["logger"] == "broker.server" for o in server)


def test_broker_loggers_switched_by_pylog_and_kafka_configs(broker: EmbeddedBroker) -> None:
    assert _levels(broker)["kafka.request.logger"] == "WARN"
    assert _levels(broker)["state.change.logger"] == "INFO"
    done = pylog(broker, "configs", "--alter", "--entity-type", "broker-loggers", "--entity-name", "1",
                 "--add-config", "kafka.request.logger=DEBUG")  # fmt: skip
    assert done.returncode == 0
    assert done.stdout.strip() == "Completed updating config for broker-logger 1."
    assert _levels(broker)["kafka.request.logger"] == "DEBUG"
    bad = pylog(broker, "configs", "--alter", "--entity-type", "broker-loggers", "--entity-name", "1",
                "--add-config", "kafka.request.logger=LOUD")  # fmt: skip
    assert bad.returncode == 1
    assert "(INVALID_CONFIG)" in bad.stderr
    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka's tools are not available: {exc}")
    args = ("--bootstrap-server", broker.bootstrap_servers, "--entity-type", "broker-loggers", "--entity-name", "1")
    described = kafka_tool("kafka-configs", *args, "--describe")
    assert described.returncode == 0, described.stderr
    assert "Dynamic configs for broker-logger 1 are:" in described.stdout
    assert "  kafka.request.logger=DEBUG sensitive=false synonyms={}" in described.stdout.splitlines()
    altered = kafka_tool("kafka-configs", *args, "--alter", "--add-config", "kafka.request.logger=INFO")
    assert altered.returncode == 0, altered.stderr
    assert "Completed updating config for broker-logger 1." in altered.stdout
    assert _levels(broker)["kafka.request.logger"] == "INFO"
    reset = kafka_tool("kafka-configs", *args, "--alter", "--delete-config", "kafka.request.logger")
    assert reset.returncode == 0, reset.stderr
    assert _levels(broker)["kafka.request.logger"] == _levels(broker)["root"]


def _set_request_logger(broker: EmbeddedBroker, level: str) -> None:
    done = pylog(broker, "configs", "--alter", "--entity-type", "broker-loggers", "--entity-name", "1",
                 "--add-config", f"kafka.request.logger={level}")  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_request_log_lines_follow_the_logger_level(broker: EmbeddedBroker, tmp_path: Path) -> None:
    def with_client_id(client_id: str) -> str:
        path = tmp_path / f"{client_id}.properties"
        path.write_text(f"client.id={client_id}\n")
        return str(path)

    def lines_of(client_id: str) -> list[dict[str, object]]:
        files = sorted(_logs_dir(broker).glob("kafka-request.log*"))
        return [o for f in files for o in _json_lines(f.read_text()) if o.get("client_id") == client_id]

    def requests_from(client_id: str) -> None:
        done = pylog(broker, "--command-config", with_client_id(client_id), "topics", "list")
        assert done.returncode == 0, done.stderr

    try:
        _set_request_logger(broker, "DEBUG")
        requests_from("request-log-on")
        wait_until(lambda: lines_of("request-log-on"), "request-log lines at DEBUG")
        line = lines_of("request-log-on")[0]
        assert line["logger"] == "kafka.request.logger"
        assert line["level"] == "DEBUG"
        assert line["node_id"] == 1
        assert {"api", "version", "principal", "total_ms", "local_ms"} <= line.keys()
        _set_request_logger(broker, "INFO")
        requests_from("request-log-off")
        _set_request_logger(broker, "DEBUG")
        requests_from("request-log-marker")  # sent after every request of the INFO phase was answered
        wait_until(lambda: lines_of("request-log-marker"), "the marker's request-log lines")
        assert lines_of("request-log-off") == []
    finally:
        _set_request_logger(broker, "WARN")


def test_state_change_lines_with_epochs_and_rotation(broker: EmbeddedBroker) -> None:
    done = pylog(broker, "topics", "create", "leaders", "--partitions", "40")
    assert done.returncode == 0, done.stderr
    state_log = _logs_dir(broker) / "state-change.log"

    def all_files() -> list[dict[str, object]]:
        files = sorted(_logs_dir(broker).glob("state-change.log*"))
        return [o for f in files for o in _json_lines(f.read_text())]

    def broker_lines() -> list[dict[str, object]]:
        return [o for o in all_files() if o.get("role") == "leader" and o.get("topic") == "leaders"]

    wait_until(lambda: len(broker_lines()) >= 40, "a broker state-change line per partition")
    created = [o for o in all_files() if o.get("controller") == 1 and o.get("topic") == "leaders"]
    assert len(created) >= 40
    first = next(o for o in broker_lines() if o["partition"] == 0)
    assert first["logger"] == "state.change.logger"
    assert first["node_id"] == 1
    assert (first["leader"], first["leader_epoch"], first["isr"], first["partition_epoch"]) == (1, 0, [1], 0)
    assert "[Broker id=1] Leader leaders-0 at leader epoch 0" in str(first["message"])
    # 80 lines of ~500 bytes exceed log.file.max.bytes=20000: the file rolled over
    assert (_logs_dir(broker) / "state-change.log.1").exists()
    assert state_log.stat().st_size <= 20000
    assert "state.change.logger" not in (_logs_dir(broker) / "server.log").read_text()  # its own file only


def test_restart_logs_recovery_progress(broker: EmbeddedBroker) -> None:
    created = pylog(broker, "topics", "create", "recovered", "--partitions", "3")
    assert created.returncode == 0, created.stderr
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for _ in range(4):
            producer.send("recovered", b"x" * 100)
        producer.flush()
    broker.restart()
    wait_until(lambda: "log recovery done" in broker.output(), "the recovery summary line")
    progress = [o for o in _json_lines(broker.output()) if str(o["message"]).startswith("log recovery: ")]
    assert progress, "no progress line with log.recovery.progress.interval.ms=0"
    assert progress[-1]["partitions_total"] >= 3
    assert "ETA" in str(progress[-1]["message"])


def test_consume_progress_bar_only_on_a_terminal(broker: EmbeddedBroker) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(300):
            producer.send("bars", f"v{i}".encode(), partition=0)
        producer.flush()
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", broker.bootstrap_servers,
            "consume", "bars", "--from-beginning", "--max-messages", "300"]  # fmt: skip
    code, out, terminal = run_on_pty(argv)
    assert code == 0
    assert len(out.splitlines()) == 300
    assert "bars" in terminal
    assert "messages" in terminal
    assert "\x1b[" in terminal
    assert "Processed a total of 300 messages" in terminal
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert piped.returncode == 0
    assert len(piped.stdout.splitlines()) == 300
    assert piped.stderr.strip() == "Processed a total of 300 messages"  # no bar off a terminal


def test_produce_file_and_delete_records_bars_only_on_a_terminal(broker: EmbeddedBroker, tmp_path: Path) -> None:
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"record {i}\n" for i in range(2000)))
    base = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", broker.bootstrap_servers]
    produce = [*base, "produce", "bars-file", "--file", str(lines)]
    code, _, terminal = run_on_pty(produce)
    assert code == 0, terminal
    assert "bars-file" in terminal
    assert "kB" in terminal
    assert "\x1b[" in terminal
    assert "Produced 2000 records" in terminal
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "bars-file", "partition": 0, "offset": 10}]}))
    delete = [*base, "delete-records", "--offset-json-file", str(offsets)]
    code, out, terminal = run_on_pty(delete)
    assert code == 0
    assert "partition: bars-file-0\tlow_watermark: 10" in out
    assert "Deleting records" in terminal
    assert "1/1" in terminal
    piped = subprocess.run(delete, capture_output=True, text=True, timeout=120, check=False)
    assert piped.returncode == 0
    assert piped.stderr == ""
    assert "partition: bars-file-0\tlow_watermark: 10" in piped.stdout


def test_reset_offsets_and_elections_bars_only_on_a_terminal(broker: EmbeddedBroker, tmp_path: Path) -> None:
    base = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", broker.bootstrap_servers]
    created = pylog(broker, "topics", "create", "bars-many", "--partitions", "150")
    assert created.returncode == 0, created.stderr
    reset = [*base, "groups", "reset-offsets", "--group", "bars-group", "--topic", "bars-many",
             "--to-earliest", "--execute"]  # fmt: skip
    code, out, terminal = run_on_pty(reset)
    assert code == 0, terminal
    assert len([line for line in out.splitlines() if "bars-many" in line]) == 150
    assert "Resetting offsets of bars-group" in terminal
    assert "150/150" in terminal
    committed = pylog(broker, "groups", "describe", "--group", "bars-group", "--output", "json")
    assert committed.returncode == 0, committed.stderr
    assert committed.stdout.count('"bars-many"') >= 150  # every partition's offset was committed
    election = tmp_path / "election.json"
    election.write_text(json.dumps({"partitions": [{"topic": "bars-many", "partition": p} for p in range(150)]}))
    elect = [*base, "leader-election", "--election-type", "PREFERRED", "--path-to-json-file", str(election)]
    code, out, terminal = run_on_pty(elect)
    assert "Electing leaders (PREFERRED)" in terminal, terminal
    assert "Valid replica already elected for partitions" in out  # one node: it leads them all
    piped = subprocess.run(elect, capture_output=True, text=True, timeout=120, check=False)
    assert piped.stdout == out
    assert "Electing leaders" not in piped.stderr


def test_admin_client_alters_a_topic_and_a_broker_logger_in_one_call(broker: EmbeddedBroker) -> None:
    """pylog's AdminClient sends the logger change to that broker and the topic change to the
    controller (two requests), as Kafka's admin client does."""
    created = pylog(broker, "topics", "create", "mixed-alter")
    assert created.returncode == 0, created.stderr
    topic = ConfigResource(ResourceType.TOPIC, "mixed-alter")
    loggers = ConfigResource(ResourceType.BROKER_LOGGER, "1")
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.incremental_alter_configs({
            topic: [AlterConfigOp("retention.ms", "3600000", AlterOp.SET)],
            loggers: [AlterConfigOp("state.change.logger", "DEBUG", AlterOp.SET)],
        })  # fmt: skip
        try:
            found = admin.describe_configs([topic, loggers])
            assert found[topic]["retention.ms"].value == "3600000"
            assert found[loggers]["state.change.logger"].value == "DEBUG"
            assert found[loggers]["state.change.logger"].source == 6  # DYNAMIC_BROKER_LOGGER_CONFIG
        finally:
            admin.incremental_alter_configs({loggers: [AlterConfigOp("state.change.logger", "INFO", AlterOp.SET)]})
