"""Client quotas through the admin client: DescribeClientQuotas (48), AlterClientQuotas (49).

An entity is a mapping of entity type (``"user"``, ``"client-id"``, ``"ip"``) to a name, None for
the default entity of that type (``{"client-id": None}`` is ``/config/clients/<default>``), as
Kafka's ``ClientQuotaEntity``. Quota keys and values as kafka-configs spells them
(``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``, ``connection_creation_rate``).

    await admin.alter_client_quotas([ClientQuotaAlteration({"client-id": "loader"}, {"producer_byte_rate": 1048576})])
    await admin.describe_client_quotas([ClientQuotaFilterComponent("client-id", "loader")])
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark_log.client.errors import error_for
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError, Message

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

EntityKey = tuple[tuple[str, str | None], ...]  # sorted (type, name) pairs: hashable entity


def entity_key(entity: Mapping[str, str | None]) -> EntityKey:
    return tuple(sorted(entity.items()))


@dataclass(frozen=True)
class ClientQuotaFilterComponent:
    """Match ``entity_type`` by exact ``name`` (the default), the default entity
    (``match_type=MATCH_DEFAULT``), or any entity of the type (``MATCH_ANY``)."""

    entity_type: str
    name: str | None = None
    match_type: int = MATCH_EXACT


@dataclass(frozen=True)
class ClientQuotaAlteration:
    """Set quotas of one entity; a value None removes that quota."""

    entity: Mapping[str, str | None]
    ops: Mapping[str, float | None] = field(default_factory=dict)


Send = Callable[[int, dict[str, Any], float], Awaitable[Message]]


async def describe_client_quotas(
    send: Send, components: Iterable[ClientQuotaFilterComponent], *, strict: bool, timeout_ms: float
) -> dict[EntityKey, dict[str, float]]:
    body = {
        "components": [{"entity_type": c.entity_type, "match_type": c.match_type, "match": c.name} for c in components],
        "strict": strict,
    }
    resp = await send(ApiKey.DESCRIBE_CLIENT_QUOTAS, body, timeout_ms)
    if resp.error_code != ErrorCode.NONE:
        raise error_for(resp.error_code, resp.error_message, context="describe client quotas")
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.quota_values
        }
        for entry in resp.entries or ()
    }


async def alter_client_quotas(
    send: Send, alterations: Iterable[ClientQuotaAlteration], *, validate_only: bool, timeout_ms: float
) -> dict[EntityKey, KafkaError]:
    """The per-entity errors (empty when every alteration was applied)."""
    body = {
        "entries": [
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity_key(a.entity)],
                "ops": [
                    {"key": k, "value": 0.0 if v is None else float(v), "remove": v is None} for k, v in a.ops.items()
                ],
            }
            for a in alterations
        ],
        "validate_only": validate_only,
    }
    resp = await send(ApiKey.ALTER_CLIENT_QUOTAS, body, timeout_ms)
    errors: dict[EntityKey, KafkaError] = {}
    for entry in resp.entries:
        if entry.error_code != ErrorCode.NONE:
            key = tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity))
            what = ", ".join(f"{t} {'<default>' if n is None else repr(n)}" for t, n in key)
            errors[key] = error_for(entry.error_code, entry.error_message, context=f"alter client quotas of {what}")
    return errors
