"""A broker whose transaction-coordinator task dies stops as on a fatal quorum error, and its
shutdown still closes the coordinators and the logs (review finding 6; a whole ``BrokerServer``
listening on a loopback port, in this process)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.config import BrokerConfig
from broker.meta_properties import ensure_meta_properties
from broker.server import BrokerServer


def test_broker_stops_cleanly_when_a_coordinator_task_dies(tmp_path: Path) -> None:
    """Review finding 6: the dead task stops the broker (as a fatal quorum error does) and
    ``shutdown`` still closes the coordinators and the logs."""

    async def scenario() -> BrokerServer:
        config = BrokerConfig.from_mapping({"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0"})
        ensure_meta_properties(config.log_dirs, config.node_id, "")  # formatted, as `pylog storage format` does
        server = BrokerServer(config)
        await server.start()
        txn = server._txn
        assert txn is not None

        def broken() -> bool:
            raise RuntimeError("bug in the loop")

        txn.manager.load_step = broken  # type: ignore[method-assign]
        txn.manager.wake()
        await asyncio.wait_for(server.stop_requested.wait(), 60)
        await server.shutdown()
        return server

    server = asyncio.run(scenario())
    assert server.fatal_reason is not None
    assert "transaction-coordinator" in server.fatal_reason
    assert (server._txn, server._groups, server._logs) == (None, None, None)
