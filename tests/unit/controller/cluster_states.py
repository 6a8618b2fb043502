"""Metadata states for the pure controller tests: registered brokers, a topic, records applied
in log order (``broker.metadata.replay.apply_payload``), as the active controller would build them."""

from __future__ import annotations

import uuid

from broker.controller import operations
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import RegisterBrokerRecord, encode_records
from broker.metadata.replay import apply_payload


def cluster(*brokers: int) -> ClusterState:
    """A state with ``brokers`` registered (unfenced), one record per metadata offset."""
    state = ClusterState()
    for offset, b in enumerate(brokers):
        state = apply_payload(state, offset, encode_records([RegisterBrokerRecord(b, f"i{b}", "127.0.0.1", 9000 + b)]))
    return state


def apply(state: ClusterState, records: list) -> ClusterState:
    """``records`` applied as the next metadata entry."""
    return apply_payload(state, state.applied_offset + 1, encode_records(records))


def with_topic(state: ClusterState, assignments: list[list[int]], name: str = "t") -> tuple[ClusterState, uuid.UUID]:
    """``state`` plus topic ``name`` with one partition per replica list of ``assignments``."""
    topic_id = uuid.uuid4()
    records, _ = operations.create_topic(state, name, -1, -1, {}, topic_id=topic_id, assignments=assignments)
    return apply(state, records), topic_id
