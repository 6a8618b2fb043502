"""DescribeClientQuotas (48) and AlterClientQuotas (49) (KIP-546; Kafka documentation §4.9 "Quotas" Quota
Configuration).

Describe reads the quotas of the local metadata image (every broker has them: every broker reads quota
overrides and applies them at once). Alter changes one entity per entry through the controller
(``MetadataController.alter_client_quotas``: the local snapshot on a single node, ClientQuotaRecords
in the metadata log on a quorum, forwarded to the active controller); each entry gets its own
error code, as in Kafka: INVALID_REQUEST for a bad entity, key, value or a key given twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.controller.errors import MetadataError
from broker.quota.entity import InvalidQuotaError, filter_entities
from pyspark_log.wire.errors import ErrorCode


def handle_describe_client_quotas(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    components = [(c.entity_type, c.match_type, c.match) for c in body.components]
    try:
        found = filter_entities(broker.image().client_quotas, components, strict=body.strict)
    except InvalidQuotaError as exc:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": str(exc),
            "entries": None,
        }
    entries = [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "quota_values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for entity, values in found
    ]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}


def handle_alter_client_quotas(broker: Broker, request: Request) -> Any:
    return _alter_client_quotas(broker, request)


async def _alter_client_quotas(broker: Broker, request: Request) -> Mapping[str, Any]:
    results = []
    for entry in request.body.entries:
        entity = [(e.entity_type, e.entity_name) for e in entry.entity]
        code: int = ErrorCode.NONE
        message: str | None = None
        changes: dict[str, float | None] = {}
        for op in entry.ops:
            if op.key in changes:
                code, message = ErrorCode.INVALID_REQUEST, f"quota key {op.key!r} appears twice in one entry"
                break
            changes[op.key] = None if op.remove else float(op.value)
        if code == ErrorCode.NONE:
            try:
                await broker.controller.alter_client_quotas(entity, changes, validate_only=request.body.validate_only)
            except MetadataError as exc:
                code, message = exc.code, exc.message
        results.append(
            {
                "error_code": code,
                "error_message": message,
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            }
        )
    return {"throttle_time_ms": 0, "entries": results}
