"""``LaneWriter`` (``client/lane_writer.py``), the one owner of the producer's lane: the compiled
send (``records/_speedups.c``) names nothing of the client but the writer's documented contract,
and the writer's ``accepting`` gate says "take the fast path" exactly when
``AsyncProducer.check_send`` would let a send through without looking (KIP-98: an idempotent
producer in FATAL_ERROR or ABORTABLE_ERROR refuses sends; a transactional one needs an open
transaction, so it always looks)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from pyspark_log.client import Producer
from pyspark_log.client.bufferpool import BufferPool
from pyspark_log.client.errors import ClientClosedError, KafkaError, ProducerFencedError
from pyspark_log.client.lane_writer import LaneWriter
from pyspark_log.client.producer import AsyncProducer
from pyspark_log.client.txn_manager import TxnState
from pyspark_log.wire import ErrorCode

from .fake_broker import FakeCluster

pytestmark = pytest.mark.unit

C_SOURCE = Path(__file__).parents[3] / "pyspark_log" / "records" / "_speedups.c"
# what the contract names besides the writer's own slots and methods (the module doc says so)
FOREIGN = {"available": "BufferPool", "metadata": "Cluster", "acquire": "Lock", "release": "Lock"}


def c_names() -> set[str]:
    """The attribute names the compiled send interns (``intern_names``' table)."""
    source = C_SOURCE.read_text()
    table = re.search(r"static const char \*strs\[\] = \{(.*?)\};", source, re.S)
    assert table is not None, "intern_names' table not found"
    return set(re.findall(r'"([A-Za-z_]+)"', table.group(1)))


def test_the_compiled_send_names_only_the_writer_contract() -> None:
    names = c_names()
    writer_names = set(LaneWriter.__slots__) | {n for n in vars(LaneWriter) if not n.startswith("_")}
    assert names - writer_names == set(FOREIGN), names - writer_names
    assert not {n for n in names if n.startswith("_")}, "no private attribute of any class"
    # the foreign names are public and mean what the writer's doc says
    pool = BufferPool(100)
    assert pool.available == 100
    assert isinstance(pool.lock, type(threading.Lock()))
    core = AsyncProducer({"bootstrap.servers": "fake:9092"})
    assert core.lane_writer.cluster is core.cluster
    assert core.cluster.metadata is not None
    assert core.lane_writer.pool is core.pool
    assert core.lane_writer.lock is core.pool.lock


def test_the_gate_follows_start_close_and_the_sync_facade() -> None:
    fake = FakeCluster(1, topics={"t": 2})
    p = Producer({"bootstrap.servers": "fake:9092", "linger.ms": 1}, connector=fake.connector)
    writer = p.core.lane_writer
    try:
        assert writer.accepting  # started, healthy, not transactional
        p.send("t", b"v", b"k").result(timeout=5)
    finally:
        p.close()
    assert not writer.accepting
    with pytest.raises(ClientClosedError):
        p.send("t", b"v", b"k")


def test_the_gate_follows_the_idempotent_state_and_shut_is_final() -> None:
    core = AsyncProducer({"bootstrap.servers": "fake:9092"})  # idempotent: a transaction manager
    writer = core.lane_writer
    assert core.txn is not None
    assert not core.txn.transactional
    assert not writer.accepting  # not started
    core._started = True  # (as start() leaves it, without a broker)
    core._update_lane_gate()
    assert writer.accepting
    core.txn.on_error = None  # (the producer's reaction needs its loop; the gate does not)
    core.txn.transition_to(TxnState.FATAL_ERROR, ProducerFencedError("fenced"))
    assert not writer.accepting  # check_send must raise: the general path looks
    core.txn.state = TxnState.INITIALIZING  # (back, by hand, to see the next transition reopen it)
    core.txn.transition_to(TxnState.READY)
    assert writer.accepting
    core.txn.state = TxnState.IN_TRANSACTION  # (by hand: the move an abortable error makes)
    core.txn.transition_to(TxnState.ABORTABLE_ERROR, KafkaError(ErrorCode.INVALID_TXN_STATE, "abortable"))
    assert not writer.accepting
    core.txn.transition_to(TxnState.ABORTING)
    assert writer.accepting
    writer.shut()
    core._update_lane_gate()
    assert not writer.accepting


def test_a_transactional_producer_never_takes_the_gate() -> None:
    core = AsyncProducer({"bootstrap.servers": "fake:9092", "transactional.id": "x"})
    core._started = True
    for state in (TxnState.READY, TxnState.IN_TRANSACTION):
        core.txn.state = state  # type: ignore[union-attr]
        core._update_lane_gate()
        assert not core.lane_writer.accepting
