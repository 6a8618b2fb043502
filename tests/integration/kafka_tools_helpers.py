"""Shared pieces of the tests that run Apache Kafka's own command-line tools (Kafka 4.1, unchanged,
through ``tests.apache_kafka.kafka_tool``) against a pylog cluster (issue #26, "Kafka's own tools
against pylog").

``tools_cluster`` starts the 3-node pylog cluster a test module shares (combined KRaft nodes:
three processes); ``run`` runs one tool and fails with its whole output when it exits non-zero;
the ``parse_*`` functions read the tools' output formats (Kafka's ``TopicCommand`` lines of
``Key: value`` fields, the space-aligned tables of ``kafka-consumer-groups``, the tab-separated
tables of ``kafka-transactions``, the JSON lines of the verifiable clients).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.wire import ApiKey
from tests.apache_kafka import KafkaUnavailable, kafka_libs, kafka_tool
from tests.waiting import wait_until

NODES = (1, 2, 3)
WAIT_S = 90.0
# the first rebalance of a group is not delayed (the tools' consumers join one after another),
# and leadership moves only when a test asks for it (kafka-leader-election)
CLUSTER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
}


@contextmanager
def tools_cluster(root: Path, overrides: Mapping[str, str] | None = None, **shape: Any) -> Iterator[EmbeddedCluster]:
    """A started 3-node pylog cluster (combined roles; ``shape``: more ``EmbeddedCluster``
    arguments), closed on exit; the module is skipped when Kafka's jars cannot be had."""
    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka's tools are not available: {exc}")
    cluster = EmbeddedCluster(
        root, brokers=NODES, combined=True, overrides={**CLUSTER_OVERRIDES, **(overrides or {})}, **shape
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def run(
    tool: str, *args: str, ok: bool = True, input_text: str | None = None, timeout_s: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run Kafka's ``tool`` with ``args``; with ``ok`` (the default) it must exit 0."""
    done = kafka_tool(tool, *args, input_text=input_text, timeout_s=timeout_s)
    if ok:
        assert done.returncode == 0, (
            f"{tool} {' '.join(args)} exited {done.returncode}\n--- stdout:\n{done.stdout}\n--- stderr:\n{done.stderr}"
        )
    return done


def parse_fields(line: str) -> dict[str, str]:
    """One line of ``kafka-topics --describe`` (``Topic: t\\tPartition: 0\\tLeader: 1...``) as a dict."""
    fields: dict[str, str] = {}
    for part in line.strip().split("\t"):
        key, sep, value = part.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def parse_topic_description(stdout: str) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
    """``kafka-topics --describe --topic T``: the topic line's fields and each partition line's."""
    topic: dict[str, str] = {}
    partitions: dict[int, dict[str, str]] = {}
    for line in stdout.splitlines():
        if not line.strip():
            continue
        fields = parse_fields(line)
        if "Partition" in fields:
            partitions[int(fields["Partition"])] = fields
        elif "PartitionCount" in fields:
            topic = fields
    return topic, partitions


def ids(text: str) -> tuple[int, ...]:
    """A comma-separated broker list of the tools (``1,2,3``; empty: ``()``)."""
    return tuple(int(x) for x in text.split(",") if x.strip())


def parse_table(stdout: str, first_column: str) -> list[dict[str, str]]:
    """A space-aligned table whose header starts with ``first_column`` (``kafka-consumer-groups``):
    one dict per row under the last such header; cells have no spaces."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in stdout.splitlines():
        cells = line.split()
        if not cells:
            continue
        if cells[0] == first_column:
            header, rows = cells, []
        elif header is not None and len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def parse_tabbed(stdout: str) -> list[dict[str, str]]:
    """A tab-separated table with a header line (``kafka-transactions``); cells stripped."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return []
    header = [h.strip() for h in lines[0].rstrip("\t").split("\t")]
    return [dict(zip(header, (c.strip() for c in line.rstrip("\t").split("\t")), strict=False)) for line in lines[1:]]


def parse_offsets(stdout: str) -> dict[tuple[str, int], int]:
    """``kafka-get-offsets``'s ``topic:partition:offset`` lines."""
    out: dict[tuple[str, int], int] = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"(.+):(\d+):(-?\d+)", line.strip())
        if match:
            out[(match.group(1), int(match.group(2)))] = int(match.group(3))
    return out


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of a verifiable client's stdout (other lines skipped)."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def write_outside_transaction(cluster: EmbeddedCluster, topic: str, partition: int, transactional_id: str) -> int:
    """Write one transactional record to ``topic``/``partition`` under a fresh producer id of
    ``transactional_id`` without AddPartitionsToTxn: the coordinator's transaction stays Empty
    while the partition holds an open transaction, the "hanging transaction" of KIP-664 (which
    Kafka 3.6+ brokers prevent by verifying with the coordinator, KIP-890; pylog does not).
    Returns the producer id. Raw requests, as no client sends records outside a transaction."""
    body: dict[str, Any] = {"key": transactional_id, "key_type": 1}

    def coordinator() -> Any:
        answer = request(cluster.address(NODES[0]), ApiKey.FIND_COORDINATOR, 3, body)
        return answer if answer.error_code == 0 else None

    found = wait_until(coordinator, f"the transaction coordinator of {transactional_id}")
    init = {"transactional_id": transactional_id, "transaction_timeout_ms": 600_000}

    def producer_id() -> Any:
        answer = request(f"{found.host}:{found.port}", ApiKey.INIT_PRODUCER_ID, 3, init)
        return answer if answer.error_code == 0 else None

    ids_ = wait_until(producer_id, f"InitProducerId of {transactional_id}")
    leader = cluster.partitions(topic)[partition].leader
    batch = encode_batch(
        [ProducerRecord(None, b"outside-any-transaction", int(time.time() * 1000))],
        producer_id=ids_.producer_id, producer_epoch=ids_.producer_epoch, base_sequence=0, transactional=True,
    )  # fmt: skip
    produce = {
        "transactional_id": transactional_id, "acks": -1, "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }  # fmt: skip
    answer = request(cluster.address(leader), ApiKey.PRODUCE, 8, produce)
    code = answer.responses[0].partition_responses[0].error_code
    assert code == 0, f"the transactional produce was refused with error {code}"
    return int(ids_.producer_id)
