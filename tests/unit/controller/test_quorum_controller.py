"""``QuorumController`` over an in-memory quorum: changes run on the active controller, are
forwarded from other nodes (one hop, retried on NOT_CONTROLLER), and return once the calling
node's own image shows them; brokers register, heartbeat and are fenced when they stop."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.controller.broker_session import ClusterIdMismatchError
from broker.controller.errors import MetadataError
from broker.controller.forwarding import Registration, forwarded_request
from broker.metadata.records import ClusterIdRecord, decode_records
from broker.raft.core import NotLeaderError
from pyspark_log.wire.errors import ErrorCode
from tests.unit.controller.fake_quorum import FakeQuorum, controller, route_forwarding
from tests.waiting import wait_until_async


async def started(*controllers) -> None:
    for c in controllers:
        await c.start()


async def stopped(*controllers) -> None:
    for c in controllers:
        await c.shutdown()


def test_leader_appends_one_entry_per_change_and_publishes_the_image(monkeypatch):
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        leader = controller(quorum, 1)
        seen = []
        leader.add_listener(lambda old, new: seen.append((set(old.topics), set(new.topics))))
        await started(leader)
        topic = await leader.create_topic("orders", 3, 1, {"retention.ms": "1000"})
        assert leader.image().topics["orders"] == topic
        assert topic.configs == {"retention.ms": "1000"}
        assert {p.leader for p in topic.partitions.values()} == {1}
        assert seen[-1] == (set(), {"orders"})
        # entry 0: the epoch's no-op, 1: the cluster id, 2: registration, 3: the topic
        assert decode_records(quorum.entries[0]) == []
        assert decode_records(quorum.entries[1]) == [ClusterIdRecord("cid")]
        assert leader.state().cluster_id == "cid"
        await leader.alter_topic_configs("orders", {"retention.ms": None, "cleanup.policy": "compact"})
        assert leader.image().topics["orders"].configs == {"cleanup.policy": "compact"}
        await leader.create_partitions("orders", 5)
        assert len(leader.image().topics["orders"].partitions) == 5
        await leader.delete_topic("orders")
        assert "orders" not in leader.image().topics
        await stopped(leader)

    asyncio.run(run())


def test_validate_only_appends_nothing():
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        leader = controller(quorum, 1)
        await started(leader)
        before = len(quorum.entries)
        topic = await leader.create_topic("t", 2, 1, {}, validate_only=True)
        assert len(topic.partitions) == 2
        await leader.create_topic("t2", 1, 1, {})
        await leader.create_partitions("t2", 4, validate_only=True)
        await leader.alter_topic_configs("t2", {"retention.ms": "1"}, validate_only=True)
        assert len(quorum.entries) == before + 1
        assert "t" not in leader.image().topics
        await stopped(leader)

    asyncio.run(run())


def test_follower_forwards_and_returns_once_its_own_image_has_the_topic(monkeypatch):
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        nodes = {1: controller(quorum, 1, broker=False), 2: controller(quorum, 2), 3: controller(quorum, 3)}
        calls = route_forwarding(monkeypatch, nodes)
        await started(*nodes.values())
        assert sorted(nodes[2].image().brokers) == [2, 3]
        topic = await nodes[2].create_topic("t", 4, 1, {})
        assert nodes[2].image().topics["t"].topic_id == topic.topic_id
        assert [p.leader for p in topic.partitions.values()] == [2, 3, 2, 3]
        assert "forward_create_topic" not in calls[0]  # registrations went first
        assert "create_topic->1" in calls
        with pytest.raises(MetadataError) as info:
            await nodes[3].create_topic("t", 1, 1, {})
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        await nodes[3].delete_topic("t")
        assert "t" not in nodes[3].image().topics
        await stopped(*nodes.values())

    asyncio.run(run())


def test_a_forwarded_request_on_a_non_leader_is_answered_not_controller():
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        follower = controller(quorum, 2, broker=False)
        controller(quorum, 1, broker=False)
        token = forwarded_request.set(True)
        try:
            with pytest.raises(MetadataError) as info:
                await follower.create_topic("t", 1, 1, {})
        finally:
            forwarded_request.reset(token)
        assert info.value.code == ErrorCode.NOT_CONTROLLER

    asyncio.run(run())


def test_stale_leader_view_is_retried_against_the_new_leader(monkeypatch):
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        nodes = {n: controller(quorum, n) for n in (1, 2, 3)}
        calls = route_forwarding(monkeypatch, nodes)
        await started(*nodes.values())
        quorum.elect(3)
        quorum.drivers[2].believed_leader = 1  # node 2 has not heard of the election yet

        async def learn_later():
            # node 2 hears of the election only after it forwarded to the old leader once
            await wait_until_async(lambda: "create_topic->1" in calls, what="a forward to the old leader")
            quorum.drivers[2].believed_leader = None

        learner = asyncio.create_task(learn_later())
        await nodes[2].create_topic("t", 1, 1, {})
        await learner
        forwarded = [c for c in calls if c.startswith("create_topic")]
        assert forwarded[0] == "create_topic->1"
        assert forwarded[-1] == "create_topic->3"
        assert "t" in nodes[2].image().topics
        await stopped(*nodes.values())

    asyncio.run(run())


def test_no_leader_times_out_with_request_timed_out(monkeypatch):
    async def run():
        quorum = FakeQuorum()
        node = controller(quorum, 2, broker=False, request_timeout_ms=50)
        route_forwarding(monkeypatch, {2: node})
        with pytest.raises(MetadataError) as info:
            await node.create_topic("t", 1, 1, {})
        assert info.value.code == ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(run())


def test_new_leader_first_commits_a_no_op_of_its_epoch():
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        one, two = controller(quorum, 1), controller(quorum, 2, broker=False)
        await started(one)
        await one.create_topic("t", 1, 1, {})
        quorum.elect(2)
        before = len(quorum.entries)
        with pytest.raises(MetadataError) as info:
            await two.create_topic("t", 1, 1, {})  # validated against the caught-up state
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert len(quorum.entries) == before + 1
        assert decode_records(quorum.entries[-1]) == []
        await stopped(one, two)

    asyncio.run(run())


def test_wrong_cluster_id_is_refused_by_any_controller(monkeypatch):
    async def run():
        quorum = FakeQuorum()
        leader = controller(quorum, 1, broker=False)
        stranger = controller(quorum, 7, cluster_id="other")
        route_forwarding(monkeypatch, {1: leader, 7: stranger})
        # no leader elected yet: the broker asks any voter, which checks the cluster id first
        with pytest.raises(ClusterIdMismatchError, match="INCONSISTENT_CLUSTER_ID"):
            await stranger.start()
        await stopped(leader, stranger)

    asyncio.run(run())


def test_registration_of_the_same_incarnation_is_idempotent():
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        leader = controller(quorum, 1, broker=False)
        reg = Registration(5, "cid", uuid.uuid4(), "127.0.0.1", 9005)  # offsets 0, 1: no-op, cluster id
        assert await leader.handle_registration(reg) == (0, 2)
        assert await leader.handle_registration(reg) == (0, 2)
        assert (await leader.handle_registration(Registration(5, "x", reg.incarnation_id, "h", 1)))[0] == (
            ErrorCode.INCONSISTENT_CLUSTER_ID
        )
        assert await leader.handle_heartbeat(5, 0, want_shut_down=False) == (ErrorCode.STALE_BROKER_EPOCH, True)

    asyncio.run(run())


def test_a_fenced_broker_is_unfenced_only_once_it_applied_its_fencing_and_only_then_holds_its_lease(monkeypatch):
    """The session lease (broker_session): a broker that missed its fencing still believes it
    leads; its heartbeat is answered ``is_fenced`` (no lease) until it reports the fencing entry."""

    async def run():
        now = [0]
        quorum = FakeQuorum()
        quorum.elect(1)
        leader = controller(quorum, 1, broker=False, clock_ms=lambda: now[0], session_timeout_ms=60_000)
        broker = controller(
            quorum, 2, clock_ms=lambda: now[0], heartbeat_interval_ms=20_000, session_timeout_ms=60_000,
            quorum_fetch_timeout_ms=2000,
        )  # fmt: skip
        route_forwarding(monkeypatch, {1: leader, 2: broker})
        await started(leader, broker)
        assert broker.holds_session_lease()  # the start's first heartbeat: lease for 0.9 * 60 s - 2 s
        now[0] = 51_999
        assert broker.holds_session_lease()
        now[0] = 52_000
        assert not broker.holds_session_lease()  # lapsed: OffsetFetch is refused now
        assert await broker._session.heartbeat_once() == 0
        assert broker.holds_session_lease()
        fenced_at = leader.state().applied_offset + 1
        now[0] = 52_000 + 60_000
        assert await leader.fence_expired_brokers() == [2]
        assert not broker.holds_session_lease()
        # it has not applied the fencing entry (as when cut off from the quorum): stays fenced
        code, fenced = await leader.handle_heartbeat(2, broker.broker_epoch, want_shut_down=False,
                                                      metadata_offset=fenced_at - 1)  # fmt: skip
        assert (code, fenced) == (ErrorCode.NONE, True)
        assert leader.state().registrations[2].fenced
        assert await broker.wait_until(lambda: 2 not in broker.image().brokers, 1000)
        assert await broker._session.heartbeat_once() == 0  # now it reports the fencing: unfenced
        assert not leader.state().registrations[2].fenced
        assert broker.holds_session_lease()
        await stopped(broker, leader)

    asyncio.run(run())


def test_no_session_lease_when_the_timeouts_leave_no_room_for_one():
    from broker.controller.broker_session import session_lease_ms

    assert session_lease_ms(9000, 2000, 2000) == 6100
    assert session_lease_ms(4000, 2000, 500) == 1600
    assert session_lease_ms(4000, 2000, 1000) is None  # under two heartbeat intervals: Kafka's behaviour
    assert session_lease_ms(2000, 2000, 500) is None


def test_silent_broker_is_fenced_and_unfenced_by_its_next_heartbeat(monkeypatch):
    async def run():
        now = [0]
        quorum = FakeQuorum()
        quorum.elect(1)
        leader = controller(quorum, 1, broker=False, clock_ms=lambda: now[0], session_timeout_ms=9000)
        broker = controller(quorum, 2, clock_ms=lambda: now[0], heartbeat_interval_ms=60_000)
        route_forwarding(monkeypatch, {1: leader, 2: broker})
        await started(leader, broker)
        topic = await broker.create_topic("t", 1, 1, {})
        assert topic.partitions[0].leader == 2
        now[0] = 8999
        assert await leader.fence_expired_brokers() == []
        now[0] = 9000
        assert await leader.fence_expired_brokers() == [2]
        assert await broker.wait_until(lambda: 2 not in broker.image().brokers, 1000)
        assert broker.image().topics["t"].partitions[0].leader == -1
        assert await broker._session.heartbeat_once() == 0
        assert await broker.wait_until(lambda: 2 in broker.image().brokers, 1000)
        assert broker.image().topics["t"].partitions[0].leader == 2
        await stopped(broker)  # a clean stop asks to be fenced at once
        assert leader.state().registrations[2].fenced
        await stopped(leader)

    asyncio.run(run())


def test_elections_are_forwarded_to_the_active_controller_and_rebalancing_runs_on_its_interval(monkeypatch):
    """Kafka documentation §4.7 "Replication" "balance of leadership": ElectLeaders from any node, and the active
    controller's periodic check (``leader.imbalance.check.interval.seconds``)."""
    from broker.controller.partition_changes import ElectionType
    from broker.metadata.records import PartitionChangeRecord, encode_records

    async def run():
        now = [0]
        quorum = FakeQuorum()
        quorum.elect(1)
        leader = controller(quorum, 1, broker=False, clock_ms=lambda: now[0], leader_imbalance_check_interval_ms=5000)
        nodes = {1: leader, 2: controller(quorum, 2), 3: controller(quorum, 3)}
        calls = route_forwarding(monkeypatch, nodes)
        await started(*nodes.values())
        topic = await nodes[2].create_topic("t", 2, 2, {})
        assert [p.replicas[0] for p in topic.partitions.values()] == [2, 3]
        moved = PartitionChangeRecord(topic.topic_id, 0, leader=3)
        await quorum.drivers[1].append([encode_records([moved, PartitionChangeRecord(topic.topic_id, 1, leader=2)])])
        assert await nodes[3].wait_until(lambda: nodes[3].image().topics["t"].partitions[0].leader == 3, 1000)

        results = await nodes[3].elect_leaders(ElectionType.PREFERRED, [("t", 0), ("t", 5)])
        assert "elect_leaders->1" in calls
        assert {k: r.error_code for k, r in results.items()} == {
            ("t", 0): ErrorCode.NONE,
            ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert nodes[3].image().topics["t"].partitions[0].leader == 2  # shown on the caller's image

        await leader._replication.check_imbalance()  # first call while active: schedules the first check
        assert nodes[2].image().topics["t"].partitions[1].leader == 2
        now[0] = 4999
        await leader._replication.check_imbalance()
        assert nodes[2].image().topics["t"].partitions[1].leader == 2
        now[0] = 5000
        await leader._replication.check_imbalance()
        assert await nodes[2].wait_until(lambda: nodes[2].image().topics["t"].partitions[1].leader == 3, 1000)
        await stopped(*nodes.values())

    asyncio.run(run())


def test_a_forwarded_request_that_waited_across_a_leadership_change_is_not_run_later():
    """Chaos finding (issue 31, the transactions-and-metadata workload, seed 7): a forwarded
    CreateAcls waited for the operation lock on a leader that lost the leadership and won it back
    a few epochs later; it then ran, after its sender had retried it at the leader in between,
    answered the client, and the client had deleted the ACL: the ACL came back. A forwarded
    operation runs in the epoch it arrived in or not at all (NOT_CONTROLLER: the sender retries)."""

    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        leader = controller(quorum, 1)
        await started(leader)
        lock = leader._runner.op_lock()
        await lock.acquire()  # an operation in progress (on an isolated leader: waiting for its commit)

        async def forwarded_create():
            token = forwarded_request.set(True)
            try:
                await leader.create_topic("late", 1, 1, {})
            finally:
                forwarded_request.reset(token)

        pending = asyncio.create_task(forwarded_create())
        for _ in range(5):
            await asyncio.sleep(0)  # it is waiting for the lock now
        assert not pending.done()
        quorum.elect(2)
        quorum.elect(1)  # the same node leads again, in a later epoch
        lock.release()
        with pytest.raises(MetadataError) as info:
            await pending
        assert info.value.code == ErrorCode.NOT_CONTROLLER
        assert "late" not in leader.image().topics
        assert not any("late" in str(decode_records(entry)) for entry in quorum.entries)
        await leader.create_topic("now", 1, 1, {})  # a request of the new epoch runs
        await stopped(leader)

    asyncio.run(run())


def test_a_change_whose_commit_is_lost_with_the_leadership_is_not_decided_again(monkeypatch):
    """Once an operation's records are appended, losing the leadership before they commit answers
    NOT_CONTROLLER (their outcome is unknown, as Kafka's controller answers) instead of deciding the
    operation again on a later leader, which could apply it twice."""

    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        nodes = {n: controller(quorum, n) for n in (1, 2)}
        calls = route_forwarding(monkeypatch, nodes)
        await started(*nodes.values())
        driver = quorum.drivers[1]
        real_append = driver.append

        async def append_then_lose(payloads):
            if "lost" in str([decode_records(p) for p in payloads]):
                quorum.elect(2)  # deposed before the entry commits
                raise NotLeaderError(2, quorum.epoch)
            return await real_append(payloads)

        monkeypatch.setattr(driver, "append", append_then_lose)
        with pytest.raises(MetadataError) as info:
            await nodes[1].create_topic("lost", 1, 1, {})
        assert info.value.code == ErrorCode.NOT_CONTROLLER
        assert not [c for c in calls if c.startswith("create_topic")]  # not decided again at node 2
        await stopped(*nodes.values())

    asyncio.run(run())
