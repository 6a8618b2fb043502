"""Start-up, the running broker, and clean shutdown.

Start-up order: check/write ``meta.properties`` → bind listeners (port 0 picks a free one) →
load the logs (recovery) → load the metadata → create missing partition logs → serve → print
the ready line ``pylog broker ready: node.id=… cluster.id=… listeners=…`` on stdout.

Shutdown (SIGTERM or SIGINT): stop accepting and close connections, stop background tasks,
flush every log, write the checkpoints and the clean-shutdown marker, release the dir locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

from broker.api.admin import (
    handle_alter_configs,
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
    handle_describe_cluster,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from broker.api.api_versions import handle_api_versions
from broker.api.configs import broker_log_config, topic_log_config
from broker.api.context import Broker, Handler
from broker.api.dispatch import Dispatcher
from broker.api.fetch import handle_fetch
from broker.api.groups import group_handlers
from broker.api.list_offsets import handle_list_offsets
from broker.api.metadata import handle_metadata
from broker.api.produce import handle_produce
from broker.config import BrokerConfig, Listener, parse_listener
from broker.controller.image import BrokerInfo, MetadataImage
from broker.controller.local import LocalController
from broker.coordinator import group as group_coordinator
from broker.log.config import LogConfig, LogManagerConfig, system_clock_ms
from broker.log.manager import LogManager
from broker.meta_properties import ensure_meta_properties
from broker.network.connection import ConnectionLimits
from broker.network.listener import Listener as SocketListener
from broker.replication.replica_manager import ReplicaManager
from pyspark_log.wire.api_keys import ApiKey

log = logging.getLogger(__name__)

HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    **group_handlers(),  # FindCoordinator, consumer groups and committed offsets
}


def _advertised_address(bound: SocketListener, advertised: Listener | None) -> tuple[str, int]:
    """Where clients should connect: the advertised listener, with port 0 and wildcard or empty
    hosts replaced by the bound port and an IPv4 loopback address (librdkafka may resolve
    ``localhost`` to ::1)."""
    host = advertised.host if advertised else bound.host
    port = advertised.port if advertised and advertised.port else bound.port
    if host in ("", "0.0.0.0", "::", "localhost"):
        host = "127.0.0.1"
    return host, port


class BrokerServer:
    """One running broker; ``start()`` then ``shutdown()`` (both idempotent once)."""

    def __init__(self, config: BrokerConfig, clock_ms: Callable[[], int] = system_clock_ms) -> None:
        self.config = config
        self._clock_ms = clock_ms
        self._listeners: list[SocketListener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._logs: LogManager | None = None
        self._groups: group_coordinator.GroupCoordinator | None = None
        self.advertised: list[str] = []

    async def start(self) -> None:
        config = self.config
        cluster_id = ensure_meta_properties(config.log_dirs, config.node_id, str(config["cluster.id"]))
        limits = ConnectionLimits(
            request_max_bytes=int(config["socket.request.max.bytes"]),
            idle_ms=int(config["connections.max.idle.ms"]),
        )
        advertised_by_name = {a.name: a for a in map(parse_listener, config["advertised.listeners"])}
        for uri in config["listeners"]:
            spec = parse_listener(uri)
            self._listeners.append(
                SocketListener(
                    spec.name, spec.host, spec.port, limits,
                    send_buffer_bytes=int(config["socket.send.buffer.bytes"]),
                    receive_buffer_bytes=int(config["socket.receive.buffer.bytes"]),
                )
            )  # fmt: skip
        first = self._listeners[0]
        host, port = _advertised_address(first, advertised_by_name.get(first.name))
        self.advertised = [
            f"{sl.name}://{':'.join(map(str, _advertised_address(sl, advertised_by_name.get(sl.name))))}"
            for sl in self._listeners
        ]
        default_log_config = broker_log_config(config.raw)
        controller = LocalController(
            config.log_dirs[0],
            cluster_id,
            BrokerInfo(config.node_id, host, port),
            deletion_enabled=bool(config["delete.topic.enable"]),
        )
        image = controller.image()
        logs = LogManager(
            LogManagerConfig.from_properties({**config.raw, "log.dirs": ",".join(config.log_dirs)}),
            default_log_config,
            self._clock_ms,
        )
        logs.startup({t.name: topic_log_config(config.raw, t.configs) for t in image.topics.values()})
        self._logs = logs

        def topic_config(topic: str) -> LogConfig:
            found = controller.image().topics.get(topic)
            return topic_log_config(config.raw, found.configs if found else {})

        replicas = ReplicaManager(config.node_id, logs, controller.image, topic_config)

        def on_change(old: MetadataImage, new: MetadataImage) -> None:
            for name, topic in new.topics.items():
                before = old.topics.get(name)
                if before is not None and before.configs != topic.configs:
                    logs.set_topic_config(name, topic_log_config(config.raw, topic.configs))
            replicas.on_image_change(old, new)

        controller.add_listener(on_change)
        replicas.on_image_change(None, image)
        groups, on_groups_change = group_coordinator.attach(config.get, config.node_id, replicas, image, self._clock_ms)
        controller.add_listener(on_groups_change)
        self._groups = groups
        self._tasks.append(asyncio.create_task(groups.run(), name="group-coordinator"))
        broker = Broker(config, controller, logs, replicas, self._clock_ms, groups=groups)
        dispatcher = Dispatcher(broker, HANDLERS)
        for sl in self._listeners:
            sl.start(dispatcher)
        self._start_background(logs)
        log.info("serving %d api(s) at the ranges of Kafka %s", len(dispatcher.advertised), "3.7.0")
        print(
            f"pylog broker ready: node.id={config.node_id} cluster.id={cluster_id} "
            f"listeners={','.join(self.advertised)}",
            flush=True,
        )

    def _start_background(self, logs: LogManager) -> None:
        mc = logs.config
        schedule: list[tuple[str, int, Callable[[], Awaitable[object]]]] = [
            ("retention", mc.retention_check_interval_ms, logs.run_retention_once),
            ("file-deletion", mc.file_deletion_check_interval_ms, logs.run_file_deletion_once),
            ("checkpoints", mc.flush_offset_checkpoint_interval_ms, logs.run_checkpoints_once),
        ]
        if mc.flush_scheduler_interval_ms < 2**62:
            schedule.append(("flush", mc.flush_scheduler_interval_ms, logs.run_flush_once))
        for name, interval_ms, work in schedule:
            self._tasks.append(asyncio.create_task(_every(name, interval_ms, work), name=name))

    async def shutdown(self) -> None:
        for sl in self._listeners:
            await sl.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._groups is not None:
            self._groups.shutdown()
            self._groups = None
        if self._logs is not None:
            self._logs.shutdown()
            self._logs = None
        log.info("shut down cleanly")


async def _every(name: str, interval_ms: int, work: Callable[[], Awaitable[object]]) -> None:
    """Run ``work`` every ``interval_ms``; a failure is logged and the loop goes on."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await work()
        except Exception:
            log.exception("background task %s failed", name)


async def run(config: BrokerConfig) -> int:
    """Run a broker until SIGTERM/SIGINT; returns the process exit code."""
    server = BrokerServer(config)
    try:
        await server.start()
    except Exception as exc:
        log.exception("broker failed to start")
        print(f"pylog-broker: failed to start: {exc}", file=sys.stderr, flush=True)
        await server.shutdown()
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping")
    await server.shutdown()
    return 0
