"""``pylog storage format | info | random-uuid`` against Kafka 4.1's ``kafka-storage`` (issue #29), and
the start-up refusal of unformatted or foreign log dirs (Kafka documentation "KRaft: Provisioning
Nodes"; ``MetaPropertiesEnsemble``).

* The same server.properties (two log dirs, a combined node with static voters) is given to both
  tools: ``info`` before formatting, ``format`` with ``--add-scram``, a second ``format`` without
  and with ``--ignore-formatted``, ``info`` after (the random ``directory.id`` aside), ``info`` with
  one dir unformatted, and the refusals (bad ``--add-scram`` arguments, ``--standalone`` with
  ``controller.quorum.voters``, a release version out of range) print the same lines and exit codes.
* KIP-853: ``--standalone``, ``--initial-controllers`` and ``--no-initial-controllers`` on a controller
  of a dynamic quorum print the same lines, and the bootstrap checkpoint's VotersRecord decodes in
  Kafka's kafka-dump-log as Kafka's does.
* ``python -m broker`` refuses to start on an unformatted dir (naming ``pylog storage format``),
  on a dir of another node id and on a dir of another cluster, and never listens.
* ``--add-scram`` credentials are in the metadata of a new KRaft node: a SCRAM-SHA-256 client logs
  in with them, a wrong password is refused.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded import EmbeddedBroker
from tests.apache_kafka import KafkaUnavailable, kafka_tool

pytestmark = pytest.mark.integration

CLUSTER_ID = "cGlsb2ctc3RvcmFnZS10ZXN"
SCRAM = "SCRAM-SHA-256=[name=alice,password=alice-secret]"


def pylog_storage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyspark_log.cli", "storage", *args], capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def write_config(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    config = root / "server.properties"
    config.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:19093\n"
        "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\ncontroller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        f"log.dirs={root / 'd1'},{root / 'd2'}\n"
    )
    return config


def normalised(text: str, root: Path) -> str:
    """Paths relative to the tool's root, the random directory id and Java's stack frames gone."""
    text = text.replace(str(root), "ROOT")
    text = re.sub(r"directory\.id=[A-Za-z0-9_-]{22}", "directory.id=ID", text)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("at "))


def test_format_and_info_print_what_kafka_storage_prints(tmp_path: Path) -> None:
    kafka_root, pylog_root = tmp_path / "kafka", tmp_path / "pylog"
    kafka_config, pylog_config = write_config(kafka_root), write_config(pylog_root)

    def both(*args: str) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
        try:
            k = kafka_tool("kafka-storage", *[a.replace("CONFIG", str(kafka_config)) for a in args])
        except KafkaUnavailable as exc:
            pytest.skip(str(exc))
        p = pylog_storage(*[a.replace("CONFIG", str(pylog_config)) for a in args])
        return (
            (k.returncode, normalised(k.stdout, kafka_root), normalised(k.stderr, kafka_root)),
            (p.returncode, normalised(p.stdout, pylog_root), normalised(p.stderr, pylog_root)),
        )

    def same(*args: str) -> None:
        kafka, pylog = both(*args)
        if args[0] == "format":
            # Kafka's order of the "Formatting ..." lines is not the same from run to run (one run
            # printed d2 first); pylog prints them in log.dirs order: compare them as a set
            kafka, pylog = ((code, "\n".join(sorted(out.splitlines())), err) for code, out, err in (kafka, pylog))
            # likewise which dir Kafka names as "already formatted" (the first in its hash order)
            kafka, pylog = ((c, o, re.sub(r"ROOT/d\d is", "ROOT/dN is", e)) for c, o, e in (kafka, pylog))
        assert pylog == kafka, args

    same("info", "--config", "CONFIG")  # both dirs missing: "Found problems:", exit 1
    same("format", "-c", "CONFIG", "-t", CLUSTER_ID, "--add-scram", SCRAM)
    same("format", "-c", "CONFIG", "-t", CLUSTER_ID)  # already formatted: refused, exit 1
    same("format", "-c", "CONFIG", "-t", CLUSTER_ID, "--ignore-formatted")
    same("info", "-c", "CONFIG")
    for root in (kafka_root, pylog_root):
        (root / "d2" / "meta.properties").unlink()
    same("info", "-c", "CONFIG")  # "Found problem: ROOT/d2 is not formatted."
    same("format", "-c", "CONFIG", "-t", CLUSTER_ID, "-g")  # formats d2 only
    for bad in ("SCRAM-SHA-256=[password=x]", "SCRAM-SHA-999=[name=a,password=x]", "SCRAM-SHA-256",
                "SCRAM-SHA-256=[name=a,password=x,iterations=100]", "SCRAM-SHA-256=[name=a,bogus=1]"):  # fmt: skip
        same("format", "-c", "CONFIG", "-t", CLUSTER_ID, "-g", "-S", bad)
    same("format", "-c", "CONFIG", "-t", CLUSTER_ID, "-g", "--standalone")
    kafka, pylog = both("format", "-c", "CONFIG", "-t", CLUSTER_ID, "-g", "-r", "3.0-IV1")
    assert pylog[0] == kafka[0] == 1
    assert pylog[2].strip() in kafka[2]  # Kafka's is the message of an exception with its stack trace
    assert (pylog_root / "d1" / "bootstrap.checkpoint").exists()


def test_random_uuid_is_a_cluster_id() -> None:
    done = pylog_storage("random-uuid")
    assert done.returncode == 0
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}\n", done.stdout)


def start(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "broker", "--data-dir", str(tmp_path / "logs"), "--override",
            "listeners=PLAINTEXT://127.0.0.1:0"]  # fmt: skip
    for item in overrides:
        argv += ["--override", item]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_a_node_refuses_unformatted_and_foreign_log_dirs(tmp_path: Path) -> None:
    done = start(tmp_path)
    assert done.returncode == 1
    assert "No readable meta.properties files found" in done.stderr
    assert "pylog storage format" in done.stderr
    assert "ready" not in done.stdout
    formatted = pylog_storage("format", "--data-dir", str(tmp_path / "logs"), "--cluster-id", CLUSTER_ID)
    assert formatted.returncode == 0, formatted.stderr
    assert formatted.stdout == f"Formatting metadata directory {tmp_path / 'logs'} with metadata.version 4.1-IV1.\n"
    done = start(tmp_path, "node.id=2")
    assert done.returncode == 1
    assert "Stored node id 1 doesn't match previous node id 2" in done.stderr
    done = start(tmp_path, "cluster.id=AAAAAAAAAAAAAAAAAAAAAA")
    assert done.returncode == 1
    assert f"formatted for cluster {CLUSTER_ID}" in done.stderr


def test_add_scram_credentials_log_in_on_a_new_kraft_node(tmp_path: Path) -> None:
    overrides = {
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    }
    argv = ["format", "--data-dir", str(tmp_path / "node" / "logs"), "--cluster-id", CLUSTER_ID, "--standalone",
            "--add-scram", SCRAM]  # fmt: skip
    for key, value in overrides.items():
        argv += ["--override", f"{key}={value}"]
    formatted = pylog_storage(*argv)
    assert formatted.returncode == 0, formatted.stderr
    assert "Formatting dynamic metadata voter directory" in formatted.stdout
    with EmbeddedBroker(tmp_path / "node", overrides=overrides, python=sys.executable) as node:
        ready = re.findall(r"pylog broker ready: .*listeners=(\S+)", node.output())[-1]
        addresses = dict(uri.split("://") for uri in ready.split(","))
        topic = f"scram-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": addresses["PLAINTEXT"]})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
        sasl = {"bootstrap.servers": addresses["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice"}  # fmt: skip
        errors: list[object] = []
        producer = Producer({**sasl, "sasl.password": "alice-secret", "acks": "all"})
        producer.produce(topic, b"hello", on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(60) == 0
        assert errors == [None]
        with pytest.raises(KafkaException):
            AdminClient({**sasl, "sasl.password": "wrong"}).list_topics(timeout=10)


def write_dynamic_config(root: Path, node_id: int = 1) -> Path:
    """A controller of a KIP-853 dynamic quorum: bootstrap servers, no voters."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "controller.properties"
    config.write_text(
        f"process.roles=controller\nnode.id={node_id}\ncontroller.quorum.bootstrap.servers=127.0.0.1:19093\n"
        "listeners=CONTROLLER://127.0.0.1:19093\ncontroller.listener.names=CONTROLLER\n"
        f"listener.security.protocol.map=CONTROLLER:PLAINTEXT\nlog.dirs={root / 'd1'}\n"
    )
    return config


def checkpoint_voters(root: Path) -> list[dict[str, object]]:
    """The VotersRecord of the bootstrap checkpoint as Kafka's kafka-dump-log decodes it."""
    checkpoint = root / "d1" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    done = kafka_tool("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(checkpoint))
    assert done.returncode == 0, done.stderr
    assert re.search(r"KRaftVersion \{\"version\":0,\"kRaftVersion\":1\}", done.stdout), done.stdout
    match = re.search(r"KRaftVoters (\{.*\})", done.stdout)
    assert match, done.stdout
    return list(json.loads(match.group(1))["voters"])


def directory_id(root: Path) -> str:
    text = (root / "d1" / "meta.properties").read_text()
    return re.search(r"directory\.id=(\S+)", text).group(1)  # type: ignore[union-attr]


def test_dynamic_quorum_format_matches_kafka_storage(tmp_path: Path) -> None:
    """KIP-853 formatting (Kafka documentation "Provisioning Nodes", dynamic quorum): ``--standalone``
    and ``--initial-controllers`` print what kafka-storage prints and write a bootstrap checkpoint
    whose VotersRecord Kafka's own kafka-dump-log decodes as it decodes Kafka's (the node's
    ``directory.id`` in it); ``--no-initial-controllers`` writes none. A node whose directory id is
    not the one its voter entry names refuses to start, naming ``pylog storage format``."""
    ids = {1: "ABEiM0RVZneImaq7zN3u_w", 2: "EBEiM0RVZneImaq7zN3u_w"}
    initial = ",".join(f"{n}@127.0.0.1:{19092 + n}:{d}" for n, d in ids.items())
    for flags in (["--standalone"], ["--initial-controllers", initial], ["--no-initial-controllers"], []):
        label = flags[0] if flags else "none"
        kafka_root, pylog_root = tmp_path / label / "kafka", tmp_path / label / "pylog"
        try:
            kafka = kafka_tool("kafka-storage", "format", "-c", str(write_dynamic_config(kafka_root)), "-t",
                               CLUSTER_ID, *flags)  # fmt: skip
        except KafkaUnavailable as exc:
            pytest.skip(str(exc))
        pylog = pylog_storage("format", "-c", str(write_dynamic_config(pylog_root)), "-t", CLUSTER_ID, *flags)
        assert (pylog.returncode, normalised(pylog.stdout, pylog_root)) == (
            kafka.returncode, normalised(kafka.stdout, kafka_root)
        ), label  # fmt: skip
        if not flags:
            assert kafka.returncode == pylog.returncode == 1
            assert pylog.stderr.strip() in kafka.stderr + kafka.stdout
            continue
        has_checkpoint = flags[0] != "--no-initial-controllers"
        for root in (kafka_root, pylog_root):
            checkpoint = root / "d1" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
            assert checkpoint.exists() == has_checkpoint, (label, root)
        if not has_checkpoint:
            continue
        kafka_voters, pylog_voters = checkpoint_voters(kafka_root), checkpoint_voters(pylog_root)
        assert pylog_voters[0]["voterDirectoryId"] == directory_id(pylog_root)
        if flags[0] == "--initial-controllers":
            assert directory_id(pylog_root) == directory_id(kafka_root) == ids[1]
            assert pylog_voters == kafka_voters
        else:
            for voters in (kafka_voters, pylog_voters):
                voters[0].pop("voterDirectoryId")
            assert pylog_voters == kafka_voters

    # the metadata dir of node 1 formatted with --initial-controllers, then given another directory id
    root = tmp_path / "--initial-controllers" / "pylog"
    meta = root / "d1" / "meta.properties"
    meta.write_text(meta.read_text().replace(ids[1], ids[2]))
    config = root / "controller.properties"
    done = subprocess.run([sys.executable, "-m", "broker", "--config", str(config)], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 1
    assert "pylog storage format" in done.stderr
    assert f"directory id {ids[1]}" in done.stderr
