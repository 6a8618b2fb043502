"""Applying committed metadata records (``broker.metadata.replay``): pure, deterministic,
and total over well-formed records, with the image showing live brokers only."""

from __future__ import annotations

import uuid

from broker.metadata.cluster_state import ClusterState, build_image
from broker.metadata.records import (
    ClusterIdRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    encode_records,
)
from broker.metadata.replay import apply_payload, apply_record

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def apply_all(*batches: list[MetadataRecord]) -> ClusterState:
    state = ClusterState()
    for offset, batch in enumerate(batches):
        state = apply_payload(state, offset, encode_records(batch))
    return state


def two_brokers_and_a_topic() -> ClusterState:
    return apply_all(
        [ClusterIdRecord("cid")],
        [RegisterBrokerRecord(1, "a", "127.0.0.1", 9001)],
        [RegisterBrokerRecord(2, "b", "127.0.0.1", 9002)],
        [
            TopicRecord("t", T1),
            PartitionRecord(T1, 0, (1,), (1,), 1),
            PartitionRecord(T1, 1, (2,), (2,), 2),
            ConfigRecord("t", "retention.ms", "5000"),
        ],
    )


def test_registration_epoch_is_the_offset_of_the_record():
    state = two_brokers_and_a_topic()
    assert state.registrations[1].epoch == 1
    assert state.registrations[2].epoch == 2
    assert state.applied_offset == 3
    assert state.cluster_id == "cid"


def test_image_lists_brokers_topics_leaders_and_configs():
    image = build_image(two_brokers_and_a_topic(), cluster_id="cid", local_broker_id=2)
    assert sorted(image.brokers) == [1, 2]
    assert image.brokers[2].port == 9002
    topic = image.topics["t"]
    assert topic.topic_id == T1
    assert {p: part.leader for p, part in topic.partitions.items()} == {0: 1, 1: 2}
    assert topic.configs == {"retention.ms": "5000"}
    assert image.topic_ids == {T1: "t"}
    assert image.controller_id == 2  # a live broker answers with itself
    assert build_image(two_brokers_and_a_topic(), cluster_id="cid", local_broker_id=None).controller_id == 1


def test_fenced_broker_leaves_the_image_and_its_partitions_show_no_leader():
    state = apply_payload(two_brokers_and_a_topic(), 4, encode_records([FenceBrokerRecord(2, 2)]))
    image = build_image(state, cluster_id="cid", local_broker_id=1)
    assert sorted(image.brokers) == [1]
    assert image.topics["t"].partitions[1].leader == -1
    assert image.topics["t"].partitions[0].leader == 1
    assert state.topics["t"].partitions[1].leader == 2  # the log keeps the assignment
    state = apply_payload(state, 5, encode_records([UnfenceBrokerRecord(2, 2)]))
    assert build_image(state, cluster_id="cid", local_broker_id=1).topics["t"].partitions[1].leader == 2


def test_fence_of_an_older_broker_epoch_is_ignored():
    state = two_brokers_and_a_topic()
    state = apply_payload(state, 4, encode_records([RegisterBrokerRecord(2, "b2", "127.0.0.1", 9102)]))
    state = apply_payload(state, 5, encode_records([FenceBrokerRecord(2, 2)]))
    assert not state.registrations[2].fenced
    assert state.registrations[2].epoch == 4


def test_config_removal_and_topic_removal():
    state = apply_payload(two_brokers_and_a_topic(), 4, encode_records([ConfigRecord("t", "retention.ms", None)]))
    assert state.topics["t"].configs == {}
    state = apply_payload(state, 5, encode_records([RemoveTopicRecord(T1)]))
    assert state.topics == {}
    assert state.topic_ids == {}


def test_records_that_do_not_fit_the_state_are_skipped_the_same_way_everywhere():
    state = two_brokers_and_a_topic()
    same = state
    for record in (
        PartitionRecord(T2, 0, (1,), (1,), 1),
        ConfigRecord("nope", "retention.ms", "1"),
        RemoveTopicRecord(T2),
        FenceBrokerRecord(9, 1),
        ClusterIdRecord("other"),  # the first cluster id stays
    ):
        state = apply_record(state, 9, record)
    assert state == same


def test_recreated_topic_replaces_the_old_id():
    state = two_brokers_and_a_topic()
    state = apply_payload(state, 4, encode_records([RemoveTopicRecord(T1), TopicRecord("t", T2)]))
    state = apply_payload(state, 5, encode_records([PartitionRecord(T2, 0, (1,), (1,), 1)]))
    assert state.topic_ids == {T2: "t"}
    assert list(state.topics["t"].partitions) == [0]


def test_undecodable_entry_is_skipped_but_counts_as_applied():
    state = apply_payload(two_brokers_and_a_topic(), 4, b"garbage")
    assert state.applied_offset == 4
    assert "t" in state.topics


def test_applying_the_same_log_twice_gives_equal_states():
    assert two_brokers_and_a_topic() == two_brokers_and_a_topic()
