"""The KIP-848 driver over the group coordinator's manager (in-memory offsets log, injected clock):
session expiry through the coordinator's timers, records written before the answer and replayed
by a restarted coordinator, offsets kept for subscribed topics while the group has members,
OffsetCommit epoch checks (KIP-848 "Offset Commit and Fetch", KIP-1251's assignment epochs)."""

from __future__ import annotations

import random
import uuid

from broker.coordinator.consumer_group.config import ConsumerGroupConfig
from broker.coordinator.consumer_group.coordinator import ConsumerGroups
from broker.coordinator.consumer_group.group import HeartbeatRequest
from broker.coordinator.group.records import CommittedOffset
from pyspark_log.wire.errors import ErrorCode
from tests.unit.coordinator.helpers import Harness

GROUP = "kip848-group"
TOPICS = {"t": (uuid.uuid4(), 2), "u": (uuid.uuid4(), 1)}
CONFIG = ConsumerGroupConfig(
    session_timeout_ms=3000, min_session_timeout_ms=1000, heartbeat_interval_ms=500, min_heartbeat_interval_ms=100
)


def driver(h: Harness) -> ConsumerGroups:
    groups = ConsumerGroups(CONFIG, h.coordinator.manager, h.clock, rng=random.Random(3))
    groups.topics = TOPICS
    h.coordinator.consumer = groups
    return groups


def join(groups: ConsumerGroups, member: str) -> object:
    req = HeartbeatRequest(member, 0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",), owned={})
    return groups.heartbeat(GROUP, req, TOPICS, 1)


def test_session_expiry_records_and_reload() -> None:
    h = Harness()
    groups = driver(h)
    a = join(groups, "a")
    assert a.error == ErrorCode.NONE
    assert a.member_epoch == 1
    b = join(groups, "b")
    assert b.member_epoch == 2
    written = h.log.log_end_offset(h.coordinator.manager.partition_of(GROUP))
    assert written > 0  # the group's records are in the log before the answers
    # b keeps heartbeating, a goes silent: a session timeout later a is fenced
    for _ in range(8):
        h.advance(500)
        groups.heartbeat(GROUP, HeartbeatRequest("b", b.member_epoch, owned={}), TOPICS, 1)
    group = groups.groups[GROUP]
    assert set(group.members) == {"b"}
    epoch = group.group_epoch
    # a restarted coordinator replays the records: same epochs, b's session goes on
    restarted = Harness(log=h.log, clock=h.clock)
    again = driver(restarted)
    restarted.coordinator.manager.load_all()
    back = again.groups[GROUP]
    assert back.group_epoch == epoch
    assert set(back.members) == {"b"}
    assert back.members["b"].member_epoch == group.members["b"].member_epoch
    assert back.members["b"].assignment == group.members["b"].assignment
    answer = again.heartbeat(GROUP, HeartbeatRequest("b", back.members["b"].member_epoch, owned={}), TOPICS, 1)
    assert answer.error == ErrorCode.NONE
    restarted.advance(CONFIG.session_timeout_ms + 500)  # b falls silent too
    assert not again.groups[GROUP].members


def test_offset_commit_epochs_and_expiry_of_unsubscribed_topics() -> None:
    h = Harness()
    groups = driver(h)
    a = join(groups, "a")
    both = [("t", 0), ("t", 1)]

    def verdict(member: str, epoch: int, version: int = 9) -> set[int]:
        verdicts = groups.validate_offset_commit(GROUP, member, epoch, version, both)
        assert verdicts is not None
        return set(verdicts.values())

    assert verdict("a", a.member_epoch - 1) == {ErrorCode.STALE_MEMBER_EPOCH}  # before it got them
    assert verdict("a", a.member_epoch + 1) == {ErrorCode.STALE_MEMBER_EPOCH}
    assert verdict("zz", a.member_epoch) == {ErrorCode.UNKNOWN_MEMBER_ID}
    assert verdict("a", a.member_epoch, 8) == {ErrorCode.UNSUPPORTED_VERSION}
    assert verdict("", -1) == {ErrorCode.UNKNOWN_MEMBER_ID}  # not while it has members
    assert verdict("a", a.member_epoch) == {ErrorCode.NONE}
    assert groups.validate_offset_commit("classic-group", "x", 3, 9, both) is None  # not a consumer group
    now = h.clock()
    offsets = {("t", 0): CommittedOffset(5, -1, "", now), ("u", 0): CommittedOffset(7, -1, "", now)}
    assert set(groups.commit_offsets(GROUP, offsets).values()) == {ErrorCode.NONE}
    h.clock.now += h.config.offsets_retention_ms + 1
    h.coordinator.manager.expire_offsets()
    assert set(h.coordinator.manager.groups[GROUP].offsets) == {("t", 0)}  # subscribed: kept
    groups.heartbeat(GROUP, HeartbeatRequest("a", -1), TOPICS, 1)  # the last member leaves
    h.coordinator.manager.expire_offsets()
    assert GROUP not in h.coordinator.manager.groups or not h.coordinator.manager.groups[GROUP].offsets


def test_a_commit_at_an_older_epoch_is_the_owners_while_the_partition_was_assigned_at_it() -> None:
    """KIP-1251: ``assignment epoch <= commit epoch <= member epoch`` per partition. ``a`` owns
    both partitions at epoch 1; ``b`` joins, ``a`` revokes one, then gets it back at a later epoch
    when ``b`` leaves: a commit at epoch 1 is ``a``'s for the partition it kept throughout, stale
    for the one it got back (``b`` owned it in between), and for a partition it does not own."""
    h = Harness()
    groups = driver(h)
    a = join(groups, "a")
    first = a.member_epoch
    join(groups, "b")
    member_a = groups.groups[GROUP].members["a"]
    for _ in range(10):  # a revokes what b gets; b takes it once released
        owned = {t: set(ps) for t, ps in member_a.assignment.assigned.items()}
        groups.heartbeat(GROUP, HeartbeatRequest("a", member_a.member_epoch, owned=owned), TOPICS, 1)
        member_b = groups.groups[GROUP].members["b"]
        owned_b = {t: set(ps) for t, ps in member_b.assignment.assigned.items()}
        groups.heartbeat(GROUP, HeartbeatRequest("b", member_b.member_epoch, owned=owned_b), TOPICS, 1)
    (kept,) = member_a.assignment.assigned["t"]
    (moved,) = groups.groups[GROUP].members["b"].assignment.assigned["t"]
    groups.heartbeat(GROUP, HeartbeatRequest("b", -1), TOPICS, 1)  # b leaves
    owned = {t: set(ps) for t, ps in member_a.assignment.assigned.items()}
    groups.heartbeat(GROUP, HeartbeatRequest("a", member_a.member_epoch, owned=owned), TOPICS, 1)
    assert member_a.assignment.assigned["t"] == {0, 1}
    assert member_a.member_epoch > first
    verdicts = groups.validate_offset_commit(GROUP, "a", first, 9, [("t", kept), ("t", moved), ("u", 0)])
    assert verdicts == {
        ("t", kept): ErrorCode.NONE,
        ("t", moved): ErrorCode.STALE_MEMBER_EPOCH,
        ("u", 0): ErrorCode.STALE_MEMBER_EPOCH,
    }
    assert set(groups.validate_offset_commit(GROUP, "a", member_a.member_epoch, 9, [("t", moved)]).values()) == {
        ErrorCode.NONE
    }
    # TxnOffsetCommit (any version): the same check, stale is ILLEGAL_GENERATION
    in_txn = groups.validate_offset_commit(GROUP, "a", first, 3, [("t", kept), ("t", moved)], transactional=True)
    assert in_txn == {("t", kept): ErrorCode.NONE, ("t", moved): ErrorCode.ILLEGAL_GENERATION}
    ahead = groups.validate_offset_commit(GROUP, "a", member_a.member_epoch + 1, 3, [("t", kept)], transactional=True)
    assert ahead == {("t", kept): ErrorCode.ILLEGAL_GENERATION}
    # without any membership (TxnOffsetCommit v0-v2, or a producer that sends none): taken, as Kafka's
    assert groups.validate_offset_commit(GROUP, "", -1, 0, [("t", kept)], transactional=True) == {
        ("t", kept): ErrorCode.NONE
    }
    assert groups.validate_offset_commit(GROUP, "", -1, 3, [("t", kept)], transactional=True, instance_id="i") == {
        ("t", kept): ErrorCode.UNKNOWN_MEMBER_ID  # an instance id makes it a member's
    }
    assert groups.validate_offset_commit(GROUP, "", -1, 9, [("t", kept)]) == {("t", kept): ErrorCode.UNKNOWN_MEMBER_ID}


ALLOWED = {
    ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH,
    ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.INVALID_REGULAR_EXPRESSION,
    ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.INVALID_GROUP_ID,
}  # fmt: skip


def test_arbitrary_heartbeats_get_kafka_errors_never_exceptions() -> None:
    """Seeded random ConsumerGroupHeartbeats (odd epochs, ids, regexes, owned partitions of unknown
    or deleted topics, negative timeouts): each is answered with one of Kafka's error codes and the
    coordinator's invariants hold."""
    rnd = random.Random(848)
    h = Harness()
    groups = driver(h)
    texts = ["", "a", "b", "i1", "t", "t|u", "t(", "(?=t)", ".*", "uniform", "range", "x" * 300]
    for step in range(3000):
        owned = None
        if rnd.random() < 0.4:
            owned = {rnd.choice(["t", "u", "gone"]): frozenset(rnd.sample(range(-2, 5), rnd.randint(0, 3)))}
        req = HeartbeatRequest(
            member_id=rnd.choice(["a", "b", "c", "d", ""]),
            member_epoch=rnd.choice([-3, -2, -1, 0, 0, 1, 2, 3, 50, 2**31 - 1]),
            instance_id=rnd.choice([None, None, None, None, "", "i1", "i2"]),
            rack_id=rnd.choice([None, None, "", "r"]),
            rebalance_timeout_ms=rnd.choice([-1, -5, 0, 1000, 1000]),
            subscribed_topic_names=rnd.choice([None, (), ("t",), ("t",), ("t", "u", "nope")]),
            subscribed_topic_regex=rnd.choice([None] * 12 + texts),
            server_assignor=rnd.choice([None, None, None, "uniform", "range", *texts[:4]]),
            owned=owned,
        )
        answer = groups.heartbeat(GROUP if rnd.random() < 0.95 else "", req, TOPICS, rnd.choice([0, 1]))
        assert answer.error in ALLOWED, (step, req, answer)
        h.advance(rnd.choice([0, 10, 700]))
        group = groups.groups.get(GROUP)
        if group is not None:
            held = [(t, p) for m in group.members.values() for parts in (m.assignment.assigned,
                    m.assignment.pending_revocation) for t, ps in parts.items() for p in ps]  # fmt: skip
            assert len(held) == len(set(held)), step
            assert group.assignment_epoch <= group.group_epoch


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    """KIP-848 "Rebalance Timeout": a member that keeps reporting a partition it was asked to give
    up is fenced once its rebalance timeout passes, and the partition moves on."""
    h = Harness()
    groups = driver(h)
    a = join(groups, "a")  # rebalance timeout 5000 ms
    everything = {"t": frozenset({0, 1})}
    assert a.assignment == everything
    b = join(groups, "b")
    asked = groups.heartbeat(GROUP, HeartbeatRequest("a", a.member_epoch, owned=everything), TOPICS, 1)
    assert asked.assignment is not None
    assert len(asked.assignment["t"]) == 1  # give one up
    for _ in range(12):  # a never does, and b waits for it
        h.advance(500)
        groups.heartbeat(GROUP, HeartbeatRequest("b", b.member_epoch, owned={}), TOPICS, 1)
        stubborn = groups.heartbeat(GROUP, HeartbeatRequest("a", a.member_epoch, owned=everything), TOPICS, 1)
        if stubborn.error != ErrorCode.NONE:
            break
    assert stubborn.error == ErrorCode.UNKNOWN_MEMBER_ID  # fenced: it must rejoin
    now_b = groups.heartbeat(GROUP, HeartbeatRequest("b", b.member_epoch, owned={}), TOPICS, 1)
    assert now_b.assignment == everything


def test_version_0_joins_get_a_member_id_from_the_coordinator() -> None:
    """ConsumerGroupHeartbeat v0: an empty member id on a join is given one by the coordinator;
    v1 (KIP-1082) requires the client's own."""
    groups = driver(Harness())
    req = HeartbeatRequest("", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",), owned={})
    first = groups.heartbeat(GROUP, req, TOPICS, 0)
    assert first.error == ErrorCode.NONE
    assert first.member_id is not None
    assert len(first.member_id) == 22
    assert groups.heartbeat(GROUP, req, TOPICS, 1).error == ErrorCode.INVALID_REQUEST
    again = groups.heartbeat(GROUP, HeartbeatRequest(first.member_id, first.member_epoch, owned={}), TOPICS, 0)
    assert again.error == ErrorCode.NONE
