"""Batched replay of the metadata log (Kafka's ``MetadataLoader``: one ``MetadataDelta`` filled
with a batch of records, one new image per batch; KIP-630: a replica starts from a snapshot and
replays the tail). ``apply_payloads`` over any split of a log into batches, with snapshots taken
and loaded in between, builds the same ``ClusterState`` and ``MetadataImage`` as ``apply_payload``
entry by entry, and never mutates a state it built before (``StateBuilder``'s copy on write).

The log is generated from a seed (printed on failure) and holds every record kind, deletes
(topics, brokers, SCRAM credentials, ACLs, quotas, configs), re-creations under the same name,
records that do not fit the state (skipped alike) and an undecodable entry."""

from __future__ import annotations

import random
import uuid

import pytest

from broker.metadata.cluster_state import ClusterState, build_image
from broker.metadata.records import (
    BROKER_RESOURCE,
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ClusterIdRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    encode_records,
)
from broker.metadata.replay import StateBuilder, apply_payload, apply_payloads
from broker.metadata.snapshot_records import state_from_records, state_to_records

pytestmark = pytest.mark.unit

BROKERS = (1, 2, 3, 4)
NAMES = ("a", "b", "c")
KEYS = ("retention.ms", "segment.ms", "cleanup.policy")
USERS = ("alice", "bob")


class LogGenerator:
    """A random but well-formed metadata log: each entry is 1-4 records chosen against the state
    the generator tracks (so most of them change something, some deliberately do not)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.epochs: dict[int, int] = {}  # broker -> offset of its registration
        self.topics: dict[str, uuid.UUID] = {}
        self.partitions: dict[str, int] = {}
        self.acls: list[uuid.UUID] = []

    def record(self, offset: int) -> MetadataRecord:
        rng = self.rng
        kind = rng.randrange(14)
        broker = rng.choice(BROKERS)
        name = rng.choice(NAMES)
        if kind == 0:
            self.epochs[broker] = offset
            return RegisterBrokerRecord(broker, f"i{offset}", "127.0.0.1", 9000 + broker, rng.choice((None, "r1")))
        if kind in (1, 2, 3):
            epoch = self.epochs.get(broker, 0) if rng.random() < 0.9 else 12345  # a stale epoch: skipped
            if kind == 3:
                return UnregisterBrokerRecord(broker, epoch)
            return (FenceBrokerRecord if kind == 1 else UnfenceBrokerRecord)(broker, epoch)
        if kind == 4:
            topic_id = self.topics[name] = uuid.UUID(int=rng.getrandbits(128))  # created or re-created
            self.partitions[name] = 0
            return TopicRecord(name, topic_id)
        if kind == 5 and name in self.topics:
            topic_id = self.topics.pop(name) if rng.random() < 0.8 else uuid.uuid4()  # unknown id: skipped
            return RemoveTopicRecord(topic_id)
        if kind == 6:
            topic_id = self.topics.get(name, uuid.UUID(int=1))
            partition = self.partitions.get(name, 0)
            self.partitions[name] = partition + 1
            replicas = tuple(rng.sample(BROKERS, 2))
            return PartitionRecord(topic_id, partition, replicas, replicas, replicas[0])
        if kind == 7:
            topic_id = self.topics.get(name, uuid.UUID(int=2))
            partition = rng.randrange(self.partitions.get(name, 0) + 1)  # sometimes one that does not exist
            leader = rng.choice((-2, -1, *BROKERS))
            replicas = tuple(rng.sample(BROKERS, 3)) if rng.random() < 0.2 else None
            isr = tuple(rng.sample(BROKERS, 2)) if rng.random() < 0.5 else None
            return PartitionChangeRecord(topic_id, partition, isr, leader, replicas)
        if kind == 8:
            value = rng.choice((None, str(rng.randrange(10**6))))
            return ConfigRecord(rng.choice((*NAMES, "gone")), rng.choice(KEYS), value)
        if kind == 9:
            level = rng.choice(("", str(broker)))
            value = rng.choice((None, str(rng.randrange(100))))
            return ConfigRecord(level, "log.cleaner.threads", value, BROKER_RESOURCE)
        if kind == 10:
            entity = rng.choice(((("user", "alice"),), (("client-id", None),)))
            return ClientQuotaRecord(entity, rng.choice(("producer_byte_rate", "consumer_byte_rate")),
                                     float(rng.randrange(1, 10**6)), remove=rng.random() < 0.4)  # fmt: skip
        if kind == 11:
            user = rng.choice(USERS)
            if rng.random() < 0.4:
                return RemoveUserScramCredentialRecord(user, "SCRAM-SHA-256")
            return UserScramCredentialRecord(user, "SCRAM-SHA-256", "aa" * 8, "bb" * 32, "cc" * 32, 4096 + offset)
        if kind == 12 or not self.acls:
            acl_id = uuid.UUID(int=rng.getrandbits(128))
            self.acls.append(acl_id)
            return AccessControlEntryRecord(acl_id, 2, rng.choice(NAMES), 3, f"User:{rng.choice(USERS)}", "*", 3, 3)
        return RemoveAccessControlEntryRecord(self.acls.pop(rng.randrange(len(self.acls))))

    def log(self, length: int) -> list[tuple[int, bytes]]:
        entries = [(0, encode_records([ClusterIdRecord("cid")]))]
        for offset in range(1, length):
            if offset == length // 2:
                entries.append((offset, b"not a metadata payload"))  # skipped whole, alike
                continue
            records = [self.record(offset) for _ in range(self.rng.randint(1, 4))]
            entries.append((offset, encode_records(records)))
        return entries


def entry_by_entry(entries: list[tuple[int, bytes]]) -> list[ClusterState]:
    """The state after each entry, applied one at a time (the reference)."""
    states = []
    state = ClusterState()
    for offset, payload in entries:
        state = apply_payload(state, offset, payload)
        states.append(state)
    return states


def image(state: ClusterState):
    return build_image(state, cluster_id="cid", local_broker_id=1)


@pytest.mark.parametrize("seed", range(8))
def test_any_split_into_batches_builds_the_same_state_and_image_as_entry_by_entry(seed: int) -> None:
    entries = LogGenerator(seed).log(600)
    reference = entry_by_entry(entries)
    rng = random.Random(seed)
    state = ClusterState()
    built: list[tuple[ClusterState, list[bytes]]] = []  # every batch's state and its encoding then
    start = 0
    while start < len(entries):
        end = min(len(entries), start + rng.choice((1, 2, 7, 50, 200)))
        state = apply_payloads(state, entries[start:end])
        assert state == reference[end - 1], f"seed {seed}: batch {start}..{end - 1}"
        assert image(state) == image(reference[end - 1]), f"seed {seed}: image after {end - 1}"
        built.append((state, state_to_records(state)))
        if rng.random() < 0.2:  # KIP-630: a snapshot here, and the rest replayed from it
            state = state_from_records(state_to_records(state))
        start = end
    for earlier, encoded in built:
        assert state_to_records(earlier) == encoded, f"seed {seed}: a later batch mutated a built state"


def test_one_batch_of_a_whole_log_equals_the_entry_by_entry_replay() -> None:
    entries = LogGenerator(99).log(2000)
    assert apply_payloads(ClusterState(), entries) == entry_by_entry(entries)[-1]


def test_a_builder_keeps_untouched_mappings_and_copies_a_mapping_once_per_batch() -> None:
    """Copy on write: a batch of topic config changes shares the registrations and ACL mappings
    of the state it started from, and the state it started from is left as it was."""
    entries = LogGenerator(5).log(300)
    base = apply_payloads(ClusterState(), entries)
    name = next(iter(base.topics))
    before = state_to_records(base)
    builder = StateBuilder(base)
    for offset in range(300, 400):
        builder.apply_payload(offset, encode_records([ConfigRecord(name, "retention.ms", str(offset))]))
    after = builder.build()
    assert after.topics[name].configs["retention.ms"] == "399"
    assert after.applied_offset == 399
    assert after.registrations is base.registrations
    assert after.acls is base.acls
    assert state_to_records(base) == before
    builder.apply_payload(400, encode_records([ConfigRecord(name, "retention.ms", "400")]))
    assert after.topics[name].configs["retention.ms"] == "399"  # built states are never mutated
    assert builder.build().topics[name].configs["retention.ms"] == "400"
