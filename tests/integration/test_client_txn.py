"""pylog's transactional producer against a real broker (KIP-98; Kafka documentation §4.6 "Message Delivery
Semantics", transactions):
committed transactions are visible to read_committed consumers (ours and confluent-kafka's),
aborted ones never are; offsets sent to a transaction commit with it; a second producer with the
same transactional.id fences the first; a prepared transaction is completed from another process."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import confluent_kafka
import pytest

from pyspark_log.client import (
    AdminClient,
    Consumer,
    NewTopic,
    Producer,
    ProducerFencedError,
    TopicPartition,
)
from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline


def _create(bs: str, topic: str, partitions: int = 2) -> None:
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def _ours(bs: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    config = {"bootstrap.servers": bs, "auto.offset.reset": "earliest", "isolation.level": isolation}
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[bytes] = []
    with Consumer(config) as c:
        c.assign(tps)
        ends = c.end_offsets(tps, isolation_level=isolation)
        deadline = Deadline(30)
        while any(c.position(tp) < ends[tp] for tp in tps) and not deadline.expired():
            out += [r.value for r in c.poll(timeout_ms=200) if r.value is not None]
    return sorted(out)


def _confluent(bs: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        c.assign(
            [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
        )
        out: list[bytes] = []
        eof: set[int] = set()
        deadline = Deadline(30)
        while len(eof) < partitions and not deadline.expired():
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                continue
            out.append(msg.value())
        return sorted(out)
    finally:
        c.close()


def _txn_producer(bs: str, tid: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bs, "transactional.id": tid, **extra})


def test_committed_visible_aborted_never_for_ours_and_confluent(broker: EmbeddedBroker, topic_name: str) -> None:
    bs = broker.bootstrap_servers
    _create(bs, topic_name)
    with _txn_producer(bs, f"tx-{topic_name}") as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(20):
            p.send(topic_name, b"c1-%02d" % i, partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(20):
            p.send(topic_name, b"ab-%02d" % i, partition=i % 2)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic_name, b"c2", partition=1)
        p.commit_transaction()
    committed = sorted([b"c1-%02d" % i for i in range(20)] + [b"c2"])
    everything = sorted(committed + [b"ab-%02d" % i for i in range(20)])
    assert _ours(bs, topic_name, 2, "read_committed") == committed
    assert _confluent(bs, topic_name, 2, "read_committed") == committed
    assert _ours(bs, topic_name, 2, "read_uncommitted") == everything
    assert _confluent(bs, topic_name, 2, "read_uncommitted") == everything


def test_open_transaction_is_invisible_until_commit(broker: EmbeddedBroker, topic_name: str) -> None:
    bs = broker.bootstrap_servers
    _create(bs, topic_name, 1)
    with _txn_producer(bs, f"tx-{topic_name}") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic_name, b"pending", partition=0).result()
        assert _ours(bs, topic_name, 1, "read_committed") == []
        assert _confluent(bs, topic_name, 1, "read_committed") == []
        p.commit_transaction()
    assert _ours(bs, topic_name, 1, "read_committed") == [b"pending"]


def test_send_offsets_to_transaction(broker: EmbeddedBroker, topic_name: str) -> None:
    bs = broker.bootstrap_servers
    _create(bs, topic_name, 1)
    _create(bs, f"{topic_name}-in", 1)
    group = f"group-{topic_name}"
    src = TopicPartition(f"{topic_name}-in", 0)
    with _txn_producer(bs, f"tx-{topic_name}") as p, AdminClient({"bootstrap.servers": bs}) as admin:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic_name, b"out-1", partition=0)
        p.send_offsets_to_transaction({src: 11}, group)
        p.abort_transaction()
        assert admin.list_consumer_group_offsets(group, [src], require_stable=True) == {}
        p.begin_transaction()
        p.send(topic_name, b"out-2", partition=0)
        p.send_offsets_to_transaction({src: 42}, group)
        p.commit_transaction()
        got = admin.list_consumer_group_offsets(group, [src], require_stable=True)
        assert got[src].offset == 42
    assert _ours(bs, topic_name, 1, "read_committed") == [b"out-2"]


def test_a_new_producer_with_the_same_id_fences_the_old_one(broker: EmbeddedBroker, topic_name: str) -> None:
    bs = broker.bootstrap_servers
    _create(bs, topic_name, 1)
    tid = f"tx-{topic_name}"
    old = _txn_producer(bs, tid)
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic_name, b"zombie", partition=0).result()
        with _txn_producer(bs, tid) as new:
            new.init_transactions()
            with pytest.raises(ProducerFencedError):
                old.commit_transaction()
            new.begin_transaction()
            new.send(topic_name, b"fresh", partition=0)
            new.commit_transaction()
    finally:
        old.close()
    assert _ours(bs, topic_name, 1, "read_committed") == [b"fresh"]
    assert _confluent(bs, topic_name, 1, "read_committed") == [b"fresh"]


_COMPLETE = """
import json, sys
from pyspark_log.client import TransactionHandle, complete_transaction
args = json.loads(sys.argv[1])
complete_transaction({"bootstrap.servers": args["bs"]}, TransactionHandle(*args["handle"]), args["commit"])
print("done")
"""


def test_prepare_then_complete_from_another_process(broker: EmbeddedBroker, topic_name: str) -> None:
    bs = broker.bootstrap_servers
    _create(bs, topic_name, 2)
    handles = []
    for i, value in enumerate((b"commit-me", b"abort-me")):
        with _txn_producer(bs, f"tx-{topic_name}-{i}") as p:
            p.init_transactions()
            p.begin_transaction()
            p.send(topic_name, value, partition=i)
            h = p.prepare_transaction()
            handles.append([h.transactional_id, h.producer_id, h.producer_epoch, h.empty])
    assert _ours(bs, topic_name, 2, "read_committed") == []
    for handle, commit in zip(handles, (True, False), strict=True):
        for _ in range(2):  # completing twice the same way succeeds
            arg = json.dumps({"bs": bs, "handle": handle, "commit": commit})
            out = subprocess.run(
                [sys.executable, "-c", _COMPLETE, arg], capture_output=True, text=True, timeout=120, check=False
            )
            assert out.returncode == 0, out.stderr
    assert _ours(bs, topic_name, 2, "read_committed") == [b"commit-me"]
    assert _confluent(bs, topic_name, 2, "read_committed") == [b"commit-me"]
