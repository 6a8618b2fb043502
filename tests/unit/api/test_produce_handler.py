"""``handle_produce`` over a real ``ReplicaManager`` and logs: acks, min.insync.replicas, errors
per partition (the `acks` entry of Kafka documentation §3.3 "Producer Configs" and §4.7 "Replication"'s acks
table; KIP-467's record errors travel on the same path)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.api.context import Request
from broker.api.produce import handle_produce
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.manager import LogManager
from broker.metadata.image import BrokerInfo, MetadataImage, PartitionImage, TopicImage
from broker.network.connection import ConnectionContext
from broker.replication.replica_manager import ReplicaManager
from pyspark_log.wire import ApiKey, decode_request, encode_request
from pyspark_log.wire.errors import ErrorCode
from tests.unit.log.helpers import FakeClock, batch

TOPIC = "t"
TOPIC_ID = uuid.uuid4()


def image(isr: tuple[int, ...], partition_epoch: int = 0) -> MetadataImage:
    part = PartitionImage(0, 1, 0, (1, 2, 3), isr, partition_epoch)
    brokers = {n: BrokerInfo(n, "127.0.0.1", 9000 + n) for n in (1, 2, 3)}
    return MetadataImage("c", 1, brokers, {TOPIC: TopicImage(TOPIC, TOPIC_ID, {0: part})}, {TOPIC_ID: TOPIC})


class Harness:
    def __init__(self, root: Path) -> None:
        self.logs = LogManager(LogManagerConfig(log_dirs=(str(root),)), LogConfig(), FakeClock())
        self.logs.startup()
        self.current = image((1,))
        self.replicas = ReplicaManager(1, self.logs, lambda: self.current, lambda _: LogConfig(min_insync_replicas=2))
        self.replicas.on_image_change(None, self.current)
        self.broker = SimpleNamespace(
            replicas=self.replicas, image=lambda: self.current, config={"auto.create.topics.enable": False}
        )

    def set_isr(self, isr: tuple[int, ...], partition_epoch: int) -> None:
        old, self.current = self.current, image(isr, partition_epoch)
        self.replicas.on_image_change(old, self.current)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    h.logs.shutdown()


def produce(h: Harness, acks: int, records: bytes | None, *, version: int = 9, timeout_ms: int = 1000) -> Any:
    body = {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
    header, decoded = decode_request(encode_request(ApiKey.PRODUCE, version, 1, "test", body)[4:])
    result = handle_produce(h.broker, Request(header, decoded, ConnectionContext("peer", "PLAINTEXT", 1)))  # type: ignore[arg-type]
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    return None if result is None else result["responses"][0]["partition_responses"][0]


def test_acks_1_is_answered_after_the_leaders_append(harness: Harness):
    part = produce(harness, 1, batch(3))
    assert (part["error_code"], part["base_offset"]) == (0, 0)


def test_acks_0_appends_and_sends_no_answer(harness: Harness):
    assert produce(harness, 0, batch(2)) is None
    assert harness.replicas.get_partition(TOPIC, 0).log.log_end_offset == 2  # type: ignore[union-attr]


def test_acks_all_below_min_insync_replicas_is_refused_before_the_append(harness: Harness):
    """Kafka documentation §3.3 "Producer Configs" (`acks`): min.insync.replicas=2 with an ISR of one:
    acks=all refused, nothing written."""
    part = produce(harness, -1, batch(1))
    assert part["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    assert harness.replicas.get_partition(TOPIC, 0).log.log_end_offset == 0  # type: ignore[union-attr]


def test_acks_all_waits_for_the_isr_and_times_out_with_the_request(harness: Harness):
    harness.set_isr((1, 2), partition_epoch=1)  # broker 2 never fetches here
    part = produce(harness, -1, batch(1), timeout_ms=50)
    assert part["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert "did not all acknowledge" in part["error_message"]


@pytest.mark.parametrize(("acks", "records", "code"), [
    (2, b"x", ErrorCode.INVALID_REQUIRED_ACKS),
    (1, b"", ErrorCode.INVALID_RECORD),
    (1, b"\x00" * 70, ErrorCode.CORRUPT_MESSAGE),
])  # fmt: skip
def test_bad_produce_requests_get_a_kafka_error_per_partition(harness: Harness, acks: int, records: bytes, code: int):
    assert produce(harness, acks, records)["error_code"] == code


def test_message_format_v0_v1_is_refused_with_unsupported_version(harness: Harness):
    assert produce(harness, 1, batch(1), version=2)["error_code"] == ErrorCode.UNSUPPORTED_VERSION
