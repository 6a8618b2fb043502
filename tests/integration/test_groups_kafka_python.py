"""Consumer groups with kafka-python against a real broker: a group splits the partitions, a member
that closes hands them over, committed offsets are read back, and the admin calls see the group
(ListGroups, DescribeGroups, OffsetFetch, OffsetDelete, DeleteGroups)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import kafka
import pytest

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline

from .groups_helpers import (
    GROUP_BROKER_OVERRIDES,
    Member,
    create_topic,
    drive,
    produce,
    received_all,
    split_evenly,
    unique,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("groups-kafka-python"), overrides=GROUP_BROKER_OVERRIDES) as broker:
        yield broker.bootstrap_servers


class PolledInThread:
    """A kafka-python consumer owned by a thread that polls it without pause, as applications run
    one: other threads hand it calls (``call``) instead of touching the consumer themselves.

    Why not poll two consumers in turn from the test's thread: kafka-python 3.0.12 runs a member's
    JoinGroup and SyncGroup as one task on its network thread, and when that task completes while
    no ``poll()`` is waiting for it, the next ``poll()`` drops the result and sends a new JoinGroup.
    The group's leader rejoining makes the coordinator rebalance the whole group (as Kafka's does),
    so a leader that was outside ``poll()`` whenever its task completed kept its group rebalancing
    for over 90 s on a loaded machine. Polled without pause, a member is nearly always inside
    ``poll()``."""

    POLL_MS = 100

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self._calls: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._received: list[bytes] = []
        self._assignment: frozenset[tuple[str, int]] = frozenset()
        self._lock = threading.Lock()
        self._polled = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"poll-{consumer.config['client_id']}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._poll_until_stopped()
        except BaseException as exc:  # raised to the test by the next take_received or call
            self._error = exc
            self._polled.set()

    def _poll_until_stopped(self) -> None:
        while not self._stop.is_set():
            while not self._calls.empty():
                fn, future = self._calls.get()
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to the caller of call()
                    future.set_exception(exc)
            if self._stop.is_set():
                break
            batches = self.consumer.poll(timeout_ms=self.POLL_MS)
            values = [r.value for records in batches.values() for r in records]
            assignment = frozenset((tp.topic, tp.partition) for tp in self.consumer.assignment())
            with self._lock:
                self._received.extend(values)
                self._assignment = assignment
            self._polled.set()

    def call(self, fn: Callable[[], Any], timeout_s: float = 60) -> Any:
        """Run ``fn`` on the polling thread between two polls; its result or its exception."""
        self._raise_if_dead()
        future: Future[Any] = Future()
        self._calls.put((fn, future))
        return future.result(timeout_s)

    def _raise_if_dead(self) -> None:
        if self._error is not None:
            raise AssertionError("the polling thread failed") from self._error

    def take_received(self) -> list[bytes]:
        """Wait for the next poll to finish (at most a second), then what arrived since last asked."""
        self._polled.wait(1.0)
        self._polled.clear()
        self._raise_if_dead()
        with self._lock:
            values, self._received = self._received, []
        return values

    def assignment(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self._assignment)

    def close(self) -> None:
        """Close the consumer (leaving its group) on its thread and stop the thread; idempotent.
        A consumer whose polling thread died is closed here (no other thread uses it now)."""
        if self._stop.is_set():
            return
        if not self._thread.is_alive():
            self._stop.set()
            self.consumer.close()
            return
        try:
            self.call(self.consumer.close)
        finally:
            self._stop.set()
            self._thread.join(30)


def kp_member(name: str, bootstrap: str, group: str, topic: str, **extra: Any) -> tuple[Member, PolledInThread]:
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        **extra,
    )
    polled = PolledInThread(consumer)
    return Member(name, polled.take_received, polled.assignment), polled


def commit_when_stable(members: list[Member], consumers: list[PolledInThread], timeout_s: float = 90) -> None:
    """Commit every consumer; a client may still be finishing a rebalance it started itself (e.g.
    after a metadata refresh): let it poll, as kafka-python's RebalanceInProgressError advises,
    and retry."""
    deadline = Deadline(timeout_s)
    pending = list(consumers)
    while pending:
        try:
            pending[0].call(pending[0].consumer.commit)
            pending.pop(0)
        except (kafka.errors.RebalanceInProgressError, kafka.errors.CommitFailedError):
            assert not deadline.expired(), "the group did not settle"
            for m in members:
                m.poll()


def test_kafka_python_group_splits_commits_and_hands_over(bootstrap: str) -> None:
    topic, group = unique("kp"), unique("g")
    create_topic(bootstrap, topic, 4)
    m1, c1 = kp_member("kp1", bootstrap, group, topic)
    m2, c2 = kp_member("kp2", bootstrap, group, topic)
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        drive([m1, m2], split_evenly([m1, m2], topic, 4))
        values = produce(bootstrap, topic, 40)
        drive([m1, m2], lambda: split_evenly([m1, m2], topic, 4)() and received_all([m1, m2], values)())
        commit_when_stable([m1, m2], [c1, c2])

        # kafka-python may start a rebalance of its own (after a metadata refresh): poll until the
        # group is seen Stable with both members rather than reading its state once.
        def stable_with_both() -> bool:
            listed = {g["group_id"]: g for g in admin.list_groups()}
            described = admin.describe_groups([group])[group]
            return listed[group]["group_state"] == "Stable" and len(described["members"]) == 2

        drive([m1, m2], stable_with_both, timeout_s=90)
        described = admin.describe_groups([group])[group]
        assert described["protocol_type"] == "consumer"
        assert described["protocol_data"] in ("range", "roundrobin")
        offsets = admin.list_group_offsets(group)[group]
        assert {(tp.topic, tp.partition) for tp in offsets} == {(topic, p) for p in range(4)}
        assert sum(om.offset for om in offsets.values()) == 40

        deleted = admin.delete_groups([group])
        assert deleted[group] != "OK"  # NON_EMPTY_GROUP while members remain

        c2.close()
        drive([m1], lambda: m1.assignment() == {(topic, p) for p in range(4)}, timeout_s=90)
    finally:
        c2.close()
        c1.close()
    drive([], lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", timeout_s=90)
    assert admin.delete_groups([group])[group] == "OK"
    assert group not in {g["group_id"] for g in admin.list_groups()}
    assert not admin.list_group_offsets(group)[group]
    admin.close()
