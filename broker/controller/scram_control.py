"""``ScramControlManager``: SCRAM credentials on the quorum controller, as Kafka's
``ScramControlManager`` (``org.apache.kafka.controller``; KIP-554).

AlterUserScramCredentials is decided by ``scram_credentials.alter_scram`` (per user: all its
alterations or its error) on the active controller (forwarded there from any other node) and
answered once this node's image shows every accepted change, so a client that set a credential
through a broker can authenticate with it there when the call returns. It holds no state of its
own: the credentials are in the metadata log.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.controller.forwarding import ControllerChannel, forward_alter_user_scram_credentials
from broker.controller.operation_runner import OperationRunner
from broker.controller.scram_credentials import MECHANISM_NAMES, Deletion, Upsertion, alter_scram
from broker.controller.scram_credentials import Result as ScramResult
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import MetadataRecord
from pyspark_log.wire.errors import ErrorCode


class ScramControlManager:
    """SCRAM credentials through the metadata log; see the module docstring."""

    def __init__(self, runner: OperationRunner) -> None:
        self._runner = runner

    async def alter_user_scram_credentials(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> dict[str, ScramResult]:
        """KIP-554 on the active controller (forwarded there); returns once this node's image
        shows every accepted change."""
        runner = self._runner

        def local(state: ClusterState) -> tuple[list[MetadataRecord], dict[str, ScramResult]]:
            return alter_scram(state, deletions, upsertions)

        def applied(results: dict[str, ScramResult]) -> bool:
            scram = runner.image.scram
            ok = {name for name, (code, _) in results.items() if code == ErrorCode.NONE}
            gone = all((d.name, MECHANISM_NAMES[d.mechanism]) not in scram for d in deletions if d.name in ok)
            there = all((u.name, MECHANISM_NAMES[u.mechanism]) in scram for u in upsertions if u.name in ok)
            return gone and there

        async def remote(channel: ControllerChannel, timeout_ms: int) -> dict[str, ScramResult]:
            results = await forward_alter_user_scram_credentials(channel, deletions, upsertions, timeout_ms=timeout_ms)
            await runner.await_image(lambda: applied(results), "the SCRAM credentials")
            return results

        results = await runner.execute(local, remote)
        await runner.await_image(lambda: applied(results), "the SCRAM credentials")
        return results
