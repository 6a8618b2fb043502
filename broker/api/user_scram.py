"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554.

Alter runs on the active controller (``MetadataController.alter_user_scram_credentials``; a
quorum broker forwards it, so ``quorum_handlers`` wraps this handler) and answers one result per
user. Describe reads this node's image: all users with credentials when ``users`` is null, else
each named user, RESOURCE_NOT_FOUND for one without credentials and DUPLICATE_RESOURCE for a
name asked twice (Kafka's rules). Only mechanism and iterations are ever described.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.controller.errors import MetadataError
from broker.controller.scram_credentials import Deletion, Upsertion
from broker.security.sasl.scram import MECHANISM_IDS
from pyspark_log.wire.errors import ErrorCode


def handle_describe_user_scram_credentials(broker: Broker, request: Request) -> Mapping[str, Any]:
    scram = broker.image().scram
    by_user: dict[str, list[dict[str, int]]] = {}
    for (user, mechanism), credential in sorted(scram.items()):
        by_user.setdefault(user, []).append(
            {"mechanism": MECHANISM_IDS[mechanism], "iterations": credential.iterations}
        )
    wanted = request.body.users
    results = []
    if wanted is None:
        results = [
            {"user": u, "error_code": 0, "error_message": None, "credential_infos": infos}
            for u, infos in by_user.items()
        ]
    else:
        counts = Counter(str(u.name) for u in wanted)
        for name in dict.fromkeys(str(u.name) for u in wanted):
            if counts[name] > 1:
                results.append(
                    _user_error(name, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe the same user more than once")
                )
            elif name not in by_user:
                results.append(_user_error(name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe nonexistent user"))
            else:
                results.append(
                    {"user": name, "error_code": 0, "error_message": None, "credential_infos": by_user[name]}
                )
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


def _user_error(name: str, code: int, message: str) -> dict[str, Any]:
    return {"user": name, "error_code": code, "error_message": message, "credential_infos": []}


def handle_alter_user_scram_credentials(broker: Broker, request: Request) -> Any:
    return _alter(broker, request)


async def _alter(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    deletions = [Deletion(str(d.name), int(d.mechanism)) for d in body.deletions]
    upsertions = [
        Upsertion(str(u.name), int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
        for u in body.upsertions
    ]
    names = list(dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions]))
    try:
        outcome = await broker.controller.alter_user_scram_credentials(deletions, upsertions)
    except MetadataError as exc:
        return {
            "throttle_time_ms": 0,
            "results": [{"user": n, "error_code": exc.code, "error_message": str(exc)} for n in names],
        }
    results = [{"user": n, "error_code": outcome[n][0], "error_message": outcome[n][1]} for n in names]
    return {"throttle_time_ms": 0, "results": results}
