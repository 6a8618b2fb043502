"""AlterUserScramCredentials as metadata records (pure): validation per user, as Kafka's controller.

``alter_scram(state, deletions, upsertions)`` returns the records to append and, per user name,
``(error_code, error_message)``. A user with any invalid alteration gets that error and none of
its alterations; other users are applied. Rules (Kafka's ``ScramControlManager``): the mechanism
must be SCRAM-SHA-256 or SCRAM-SHA-512 (UNSUPPORTED_SASL_MECHANISM); a name must not be empty and
iterations must be 4096..16384, salt and salted password not empty (UNACCEPTABLE_CREDENTIAL); one
user and mechanism may appear once per request (DUPLICATE_RESOURCE); deleting a credential that
does not exist is RESOURCE_NOT_FOUND. Only salt, StoredKey and ServerKey are recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord
from broker.security.sasl.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    credential_from_salted_password,
)
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.scram import SCRAM_MECHANISM_NAMES

MECHANISM_NAMES = SCRAM_MECHANISM_NAMES


@dataclass(frozen=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


Result = tuple[int, str | None]


def _check(state: ClusterState, item: Deletion | Upsertion) -> Result | None:
    mechanism = MECHANISM_NAMES.get(item.mechanism)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism type {item.mechanism}"
    if not item.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if isinstance(item, Deletion):
        if (item.name, mechanism) not in state.scram:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None
    if not MIN_ITERATIONS <= item.iterations <= MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"
    if not item.salt or not item.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


def alter_scram(
    state: ClusterState, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
) -> tuple[list[MetadataRecord], dict[str, Result]]:
    results: dict[str, Result] = {}
    seen: set[tuple[str, int]] = set()
    items: list[Deletion | Upsertion] = [*deletions, *upsertions]
    for item in items:
        key = (item.name, item.mechanism)
        if key in seen:
            results[item.name] = (
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
        seen.add(key)
        problem = _check(state, item)
        if problem is not None and item.name not in results:
            results[item.name] = problem
    records: list[MetadataRecord] = []
    for item in items:
        if item.name in results and results[item.name][0] != ErrorCode.NONE:
            continue
        mechanism = MECHANISM_NAMES[item.mechanism]
        if isinstance(item, Deletion):
            records.append(RemoveUserScramCredentialRecord(item.name, mechanism))
        else:
            c = credential_from_salted_password(mechanism, item.salt, item.salted_password, item.iterations)
            records.append(
                UserScramCredentialRecord(
                    item.name, mechanism, c.salt.hex(), c.stored_key.hex(), c.server_key.hex(), c.iterations
                )
            )
        results.setdefault(item.name, (ErrorCode.NONE, None))
    return records, results
