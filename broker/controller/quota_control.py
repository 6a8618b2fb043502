"""``ClientQuotaControlManager``: client quotas on the quorum controller, as Kafka's
``ClientQuotaControlManager`` (``org.apache.kafka.controller``; Kafka documentation §4.9 "Quotas").

AlterClientQuotas of one entity becomes ``ClientQuotaRecord``s (``operations.alter_client_quotas``
validates entity and keys), appended on the active controller (forwarded there from any other
node); every broker applies them in log order, and the call returns once this node's image shows
every change. It holds no state of its own: the quotas are in the metadata log.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.controller import operations
from broker.controller.forwarding import ControllerChannel, forward_alter_client_quotas, raise_for
from broker.controller.operation_runner import OperationRunner
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import MetadataRecord


class ClientQuotaControlManager:
    """Client quotas through the metadata log; see the module docstring."""

    def __init__(self, runner: OperationRunner) -> None:
        self._runner = runner

    async def alter_client_quotas(
        self, entity: Sequence[tuple[str, str | None]], changes: dict[str, float | None], *, validate_only: bool = False
    ) -> None:
        """ClientQuotaRecords through the metadata log: every broker applies them in log order."""
        runner = self._runner

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            records = operations.alter_client_quotas(entity, changes)
            return ([] if validate_only else records), None

        def applied() -> bool:
            values = runner.image.client_quotas.get(tuple(sorted(entity, key=lambda p: p[0])), {})
            return all(values.get(k) == v for k, v in changes.items())

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            outcome = await forward_alter_client_quotas(
                channel, entity, changes, validate_only=validate_only, timeout_ms=timeout_ms
            )
            raise_for(outcome)
            if not validate_only:
                await runner.await_image(applied, "the client quota change")

        await runner.execute(local, remote)
