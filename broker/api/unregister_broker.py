"""UnregisterBroker (API 64, KIP-631): remove a decommissioned broker's registration.

Served on every node of a KRaft cluster (``process.roles``): the controller does it on the active
controller, forwarded there from other nodes (``broker.api.broker_registration.FORWARDABLE``);
see ``QuorumController.unregister_broker`` for what changes. Errors as Kafka 4.1 answers them:
BROKER_ID_NOT_REGISTERED for an id that is not registered, NOT_CONTROLLER / REQUEST_TIMED_OUT
when no active controller completed it, CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster
(``broker.security.acl.checks``). A single node without the quorum has no registrations to remove:
UNSUPPORTED_VERSION, as a Kafka broker that does not serve the API (docs/compatibility.md).
"""

from __future__ import annotations

from typing import Any

from broker.api.context import Broker, Handler, Request
from broker.controller.errors import MetadataError
from broker.controller.quorum import QuorumController
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode


def _response(code: int, message: str | None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message}


def handle_unregister_broker(broker: Broker, request: Request) -> Any:
    return _unregister(broker, int(request.body.broker_id))


async def _unregister(broker: Broker, broker_id: int) -> dict[str, Any]:
    controller = broker.controller
    if not isinstance(controller, QuorumController):
        return _response(ErrorCode.UNSUPPORTED_VERSION, "UnregisterBroker needs a KRaft cluster (process.roles)")
    try:
        await controller.unregister_broker(broker_id)
    except MetadataError as exc:
        return _response(exc.code, exc.message)
    return _response(ErrorCode.NONE, None)


HANDLERS: dict[int, Handler] = {ApiKey.UNREGISTER_BROKER: handle_unregister_broker}
