"""The request and response halves of the SCRAM user admin calls (KIP-554) for ``AsyncAdmin``:
AlterUserScramCredentials (51) and DescribeUserScramCredentials (50).

``alter_body`` salts every password here, as Kafka's admin client does (a random 32-byte salt,
PBKDF2 in a worker thread, never on the I/O loop): only the salted password leaves the process.
``describe_results`` turns a DescribeUserScramCredentials response into, per user,
``[(mechanism, iterations)]`` or the user's error.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Iterable
from typing import Any

from pyspark_log.client.errors import ConfigError, error_for
from pyspark_log.wire import KafkaError
from pyspark_log.wire.scram import SCRAM_DIGESTS, SCRAM_MECHANISM_IDS, SCRAM_MECHANISM_NAMES

SALT_BYTES = 32


def scram_mechanism(name: str) -> str:
    """The canonical name of a SCRAM mechanism (``ConfigError`` for anything else)."""
    upper = name.strip().upper()
    if upper not in SCRAM_MECHANISM_IDS:
        raise ConfigError(f"SCRAM mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, not {name!r}")
    return upper


async def alter_body(
    upsertions: Iterable[tuple[str, str, str, int]], deletions: Iterable[tuple[str, str]]
) -> dict[str, Any]:
    """The AlterUserScramCredentials request for ``(user, mechanism, password, iterations)``
    upsertions and ``(user, mechanism)`` deletions."""
    loop = asyncio.get_running_loop()
    ups = []
    for user, name, password, iterations in upsertions:
        mechanism = scram_mechanism(name)
        salt = secrets.token_bytes(SALT_BYTES)
        digest = SCRAM_DIGESTS[mechanism]
        salted = await loop.run_in_executor(None, hashlib.pbkdf2_hmac, digest, password.encode(), salt, iterations)
        ups.append(
            {
                "name": user,
                "mechanism": SCRAM_MECHANISM_IDS[mechanism],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted,
            }
        )
    dels = [{"name": user, "mechanism": SCRAM_MECHANISM_IDS[scram_mechanism(m)]} for user, m in deletions]
    return {"deletions": dels, "upsertions": ups}


def describe_results(resp: Any) -> dict[str, list[tuple[str, int]] | KafkaError]:
    """Per user of a DescribeUserScramCredentials response: its credentials or its error
    (RESOURCE_NOT_FOUND for a user without any); a top-level error is raised."""
    if resp.error_code:
        raise error_for(resp.error_code, resp.error_message, context="DescribeUserScramCredentials")
    out: dict[str, list[tuple[str, int]] | KafkaError] = {}
    for r in resp.results:
        if r.error_code:
            out[str(r.user)] = error_for(r.error_code, r.error_message, context=f"user {r.user}")
        else:
            out[str(r.user)] = [
                (SCRAM_MECHANISM_NAMES[int(i.mechanism)], int(i.iterations)) for i in r.credential_infos
            ]
    return out
