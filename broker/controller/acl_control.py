"""``AclControlManager``: ACLs on the quorum controller, as Kafka's ``AclControlManager``
(``org.apache.kafka.controller``; KIP-801's StandardAuthorizer reads them from the metadata).

CreateAcls and DeleteAcls are decided by ``acl_changes`` on the active controller (forwarded there
from any other node) and answered once this node's image shows the result — so a client that
created an ACL through a broker finds it enforced by that broker when the call returns. It holds
no state of its own: the ACLs are in the metadata log.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from broker.controller.acl_changes import CreateResult, Creation, DeleteResult, create_acls, delete_acls
from broker.controller.forwarding import ControllerChannel, forward_create_acls, forward_delete_acls
from broker.controller.operation_runner import OperationRunner
from broker.security.acl.binding import AclBinding, InvalidAcl, new_binding
from broker.security.acl.filters import AclFilter
from pyspark_log.wire.errors import ErrorCode


class AclControlManager:
    """CreateAcls / DeleteAcls through the metadata log; see the module docstring."""

    def __init__(self, runner: OperationRunner) -> None:
        self._runner = runner

    async def create_acls(self, creations: Sequence[Creation]) -> list[CreateResult]:
        """CreateAcls on the active controller (forwarded there); returns once this node's image
        holds every ACL created."""
        runner = self._runner

        def wanted(results: list[CreateResult]) -> list[AclBinding]:
            out = []
            for creation, (code, _) in zip(creations, results, strict=True):
                if code == ErrorCode.NONE:
                    try:
                        out.append(new_binding(*creation))
                    except InvalidAcl:  # pragma: no cover - the controller refused it then
                        continue
            return out

        def applied(results: list[CreateResult]) -> bool:
            present = set(runner.image.acls.values())
            return all(b in present for b in wanted(results))

        async def remote(channel: ControllerChannel, timeout_ms: int) -> list[CreateResult]:
            return await forward_create_acls(channel, creations, timeout_ms=timeout_ms)

        results = await runner.execute(lambda state: create_acls(state, creations), remote)
        await runner.await_image(lambda: applied(results), "the created ACLs")
        return results

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteResult]:
        """DeleteAcls on the active controller (forwarded there); returns once this node's image
        no longer holds the deleted ACLs. Forwarded results carry the ACLs without their ids
        (DeleteAcls does not transmit them): ``uuid.UUID(int=0)`` stands in."""
        runner = self._runner

        def applied(results: list[DeleteResult]) -> bool:
            present = set(runner.image.acls.values())
            return not any(binding in present for _, _, matched in results for _, binding in matched)

        async def remote(channel: ControllerChannel, timeout_ms: int) -> list[DeleteResult]:
            raw = await forward_delete_acls(channel, filters, timeout_ms=timeout_ms)
            return [(code, message, [(uuid.UUID(int=0), new_binding(*m)) for m in matched])
                    for code, message, matched in raw]  # fmt: skip

        results = await runner.execute(lambda state: delete_acls(state, filters), remote)
        await runner.await_image(lambda: applied(results), "the deleted ACLs")
        return results
