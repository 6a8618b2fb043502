"""The ACL part of ``QuorumController``: CreateAcls and DeleteAcls on the active controller
(``acl_changes`` decides the records; forwarded there from any other node), answered once this
node's image shows the result — so a client that created an ACL through a broker finds it
enforced by that broker when the call returns."""

from __future__ import annotations

import abc
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from broker.controller.acl_changes import CreateResult, Creation, DeleteResult, create_acls, delete_acls
from broker.controller.forwarding import ControllerChannel, forward_create_acls, forward_delete_acls
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import MetadataImage
from broker.metadata.records import MetadataRecord
from broker.security.acl.binding import AclBinding, InvalidAcl, new_binding
from broker.security.acl.filters import AclFilter
from pyspark_log.wire.errors import ErrorCode

T = TypeVar("T")


class AclOperations(abc.ABC):
    """CreateAcls / DeleteAcls of ``QuorumController`` (see the module docstring)."""

    _image: MetadataImage

    @abc.abstractmethod
    async def _execute(
        self,
        local: Callable[[ClusterState], tuple[list[MetadataRecord], T]],
        remote: Callable[[ControllerChannel, int], Awaitable[T]],
    ) -> T: ...

    @abc.abstractmethod
    async def _await_image(self, predicate: Callable[[], bool], what: str) -> None: ...

    async def create_acls(self, creations: Sequence[Creation]) -> list[CreateResult]:
        """CreateAcls on the active controller (forwarded there); returns once this node's image
        holds every ACL created."""

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
            present = set(self._image.acls.values())
            return all(b in present for b in wanted(results))

        async def remote(channel: ControllerChannel, timeout_ms: int) -> list[CreateResult]:
            return await forward_create_acls(channel, creations, timeout_ms=timeout_ms)

        results = await self._execute(lambda state: create_acls(state, creations), remote)
        await self._await_image(lambda: applied(results), "the created ACLs")
        return results

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteResult]:
        """DeleteAcls on the active controller (forwarded there); returns once this node's image
        no longer holds the deleted ACLs. Forwarded results carry the ACLs without their ids
        (DeleteAcls does not transmit them): ``uuid.UUID(int=0)`` stands in."""

        def applied(results: list[DeleteResult]) -> bool:
            present = set(self._image.acls.values())
            return not any(binding in present for _, _, matched in results for _, binding in matched)

        async def remote(channel: ControllerChannel, timeout_ms: int) -> list[DeleteResult]:
            raw = await forward_delete_acls(channel, filters, timeout_ms=timeout_ms)
            return [(code, message, [(uuid.UUID(int=0), new_binding(*m)) for m in matched])
                    for code, message, matched in raw]  # fmt: skip

        results = await self._execute(lambda state: delete_acls(state, filters), remote)
        await self._await_image(lambda: applied(results), "the deleted ACLs")
        return results
