"""CreateAcls and DeleteAcls as metadata records (pure), with Kafka's ``AclControlManager`` rules.

``create_acls(state, creations, new_id)`` validates each creation (``broker.security.acl.binding.new_binding``:
INVALID_REQUEST with Kafka's message) and returns one ``AccessControlEntryRecord`` per new ACL
and one ``(error_code, error_message)`` per creation, in order. An ACL equal to one that exists
(or to an earlier creation of the same request) succeeds without a record.

``delete_acls(state, filters)`` returns one ``RemoveAccessControlEntryRecord`` per ACL some
filter matches (each ACL once: a later filter does not list an ACL an earlier one removed) and,
per filter, ``(error_code, error_message, [(id, binding)])``. A filter with an UNKNOWN part is
INVALID_REQUEST and deletes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord
from broker.security.acl.binding import AclBinding, InvalidAcl, new_binding
from broker.security.acl.filters import AclFilter
from pyspark_log.wire.errors import ErrorCode

# (resource_type, resource_name, pattern_type, principal, host, operation, permission_type)
Creation = tuple[int, str, int, str, str, int, int]
CreateResult = tuple[int, str | None]
DeleteResult = tuple[int, str | None, list[tuple[uuid.UUID, AclBinding]]]


def create_acls(
    state: ClusterState, creations: Sequence[Creation], new_id: Callable[[], uuid.UUID] = uuid.uuid4
) -> tuple[list[MetadataRecord], list[CreateResult]]:
    existing = set(state.acls.values())
    records: list[MetadataRecord] = []
    results: list[CreateResult] = []
    for creation in creations:
        try:
            binding = new_binding(*creation)
        except InvalidAcl as exc:
            results.append((ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        if binding not in existing:
            existing.add(binding)
            records.append(
                AccessControlEntryRecord(
                    new_id(), int(binding.resource_type), binding.name, int(binding.pattern_type), binding.principal,
                    binding.host, int(binding.operation), int(binding.permission),
                )
            )  # fmt: skip
        results.append((ErrorCode.NONE, None))
    return records, results


def delete_acls(state: ClusterState, filters: Sequence[AclFilter]) -> tuple[list[MetadataRecord], list[DeleteResult]]:
    deleted: set[uuid.UUID] = set()
    records: list[MetadataRecord] = []
    results: list[DeleteResult] = []
    for acl_filter in filters:
        if acl_filter.is_unknown():
            results.append((ErrorCode.INVALID_REQUEST, "The filter contains an unknown element", []))
            continue
        matched = [
            (acl_id, acl)
            for acl_id, acl in sorted(state.acls.items(), key=lambda item: str(item[0]))
            if acl_id not in deleted and acl_filter.matches(acl)
        ]
        for acl_id, _ in matched:
            deleted.add(acl_id)
            records.append(RemoveAccessControlEntryRecord(acl_id))
        results.append((ErrorCode.NONE, None, matched))
    return records, results
