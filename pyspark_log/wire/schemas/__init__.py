"""Schema declarations, one module per API family, each exporting ``APIS``.

Every field fact comes from Kafka 3.7's published message schemas; see ``versions.py`` for why
3.7 and ``dsl.py`` for the declaration form.
"""

from __future__ import annotations

from pyspark_log.wire.schema import Api
from pyspark_log.wire.schemas import (
    acls,
    admin,
    broker_registration,
    consumer_groups,
    elections,
    fetch,
    fetch_snapshot,
    groups,
    log_dirs,
    metadata,
    offsets,
    operations,
    produce,
    quotas,
    raft,
    reassignments,
    replication,
    sasl,
    share_groups,
    share_state,
    txn,
)

ALL_APIS: tuple[Api, ...] = (
    *metadata.APIS,
    *produce.APIS,
    *fetch.APIS,
    *offsets.APIS,
    *admin.APIS,
    *groups.APIS,
    *consumer_groups.APIS,
    *txn.APIS,
    *raft.APIS,
    *fetch_snapshot.APIS,  # KIP-630
    *broker_registration.APIS,
    *replication.APIS,
    *elections.APIS,
    *sasl.APIS,
    *log_dirs.APIS,
    *operations.APIS,
    *quotas.APIS,
    *acls.APIS,
    *reassignments.APIS,
    *share_groups.APIS,  # KIP-932 (Kafka 4.1.1's v1)
    *share_state.APIS,  # KIP-932's persister RPCs (Kafka 4.1.1's v0)
)
