"""Start-up, the running broker, and clean shutdown.

Start-up order: check the security settings → check ``meta.properties`` (the log dirs must have
been formatted by ``pylog storage format``, ``broker.meta_properties``) → bind listeners (port 0 picks a free one) →
load the logs (recovery) → load the metadata → create missing partition logs → serve → freeze
the start-up heap out of garbage collection (``gc.freeze.enable``, ``broker.runtime``) → print
the ready line ``pylog broker ready: node.id=… cluster.id=… listeners=…`` on stdout.

Shutdown (SIGTERM or SIGINT): stop accepting and close connections, stop background tasks,
flush every log, write the checkpoints and the clean-shutdown marker, release the dir locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import resource
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable

from prometheus_client import GCCollector, ProcessCollector
from prometheus_client.registry import CollectorRegistry

from broker.api.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
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
from broker.api.authz import authorized_handlers
from broker.api.broker_registration import quorum_handlers
from broker.api.configs import broker_log_config, topic_log_config
from broker.api.context import Broker, Handler
from broker.api.delete_records import handle_delete_records
from broker.api.dispatch import Dispatcher
from broker.api.elect_leaders import handle_elect_leaders
from broker.api.fetch import handle_fetch
from broker.api.groups import group_handlers
from broker.api.list_offsets import handle_list_offsets
from broker.api.log_dirs import handle_alter_replica_log_dirs, handle_describe_log_dirs
from broker.api.metadata import handle_metadata
from broker.api.offset_for_leader_epoch import handle_offset_for_leader_epoch
from broker.api.produce import handle_produce
from broker.api.quota_enforcement import QuotaEnforcer
from broker.api.quotas import handle_alter_client_quotas, handle_describe_client_quotas
from broker.api.raft import raft_handlers
from broker.api.reassignments import HANDLERS as REASSIGNMENT_HANDLERS
from broker.api.sasl import handle_sasl_authenticate, handle_sasl_handshake
from broker.api.share_groups import HANDLERS as SHARE_GROUP_HANDLERS
from broker.api.txn import txn_handlers
from broker.api.txn_admin import txn_admin_handlers
from broker.api.txn_markers import handle_write_txn_markers
from broker.api.unregister_broker import HANDLERS as UNREGISTER_BROKER_HANDLERS
from broker.api.user_scram import handle_alter_user_scram_credentials, handle_describe_user_scram_credentials
from broker.config import BrokerConfig, ConfigError, Listener, parse_listener
from broker.controller.local import LocalController, MetadataController
from broker.controller.quorum import QuorumController
from broker.controller.quorum import from_config as quorum_controller
from broker.coordinator import group as group_coordinator
from broker.coordinator import share_group as share_groups
from broker.coordinator import txn as txn_coordinator
from broker.coordinator.txn.sender import BrokerSender
from broker.dynamic_config import CLEANER_KEYS, CONNECTION_KEYS, DynamicBrokerConfig
from broker.log import flush as log_flush
from broker.log.cleaner.cleaner import LogCleaner
from broker.log.cleaner.config import CleanerConfig
from broker.log.cleaner.metrics import CleanerCollector
from broker.log.config import LogConfig, LogManagerConfig, system_clock_ms
from broker.log.manager import LogManager
from broker.log.metrics import LogCollector, LogDirCollector
from broker.log.remote.config import RemoteLogManagerConfig
from broker.log.remote.manager import RemoteLogManager
from broker.log.remote.storage import RemoteStorageException, load_remote_storage_manager
from broker.meta_properties import MetaPropertiesError, bootstrap_records, check_formatted
from broker.metadata.image import BrokerInfo, MetadataImage
from broker.metrics.collectors import (
    ControllerCollector,
    GroupCollector,
    LoopCollector,
    RaftCollector,
    RequestCollector,
    TxnCollector,
)
from broker.metrics.http import MetricsServer
from broker.metrics.instruments import BrokerStats
from broker.metrics.loop import LoopMonitor
from broker.network.connection import ConnectionLimits
from broker.network.dial import Dialer
from broker.network.fd_limit import raise_open_file_limit
from broker.network.listener import Listener as SocketListener
from broker.quota.connections import (
    ConnectionConfigError,
    ConnectionLimitsConfig,
    ConnectionQuotas,
    descriptor_caps,
    parse_overrides,
)
from broker.quota.entity import IP, QuotaTable
from broker.quota.manager import ClientQuotas, QuotaConfig
from broker.quota.metrics import QuotaCollector
from broker.quota.mutation import ControllerMutationQuotas
from broker.quota.replication import ReplicationThrottles
from broker.raft.bootstrap import check_directory_id, create_driver
from broker.raft.config import RaftConfigError
from broker.raft.driver import RaftDriver
from broker.replication.fetcher import ReplicaFetchers
from broker.replication.log_dir_mover import LogDirMover
from broker.replication.metrics import ReplicationCollector
from broker.replication.replica_manager import ReplicaManager, ReplicationConfig
from broker.runtime.gc_freeze import CONFIG_KEY as GC_FREEZE_KEY
from broker.runtime.gc_freeze import freeze_start_up_heap, thaw
from broker.runtime.gc_pauses import GcPauses
from broker.runtime.heap_trim import trim_heap
from broker.runtime.metrics import GcPauseCollector
from broker.security.acl import config as authorizer_config
from broker.security.acl.authority import AclAuthority
from broker.security.listeners import ListenerPolicy
from broker.security.outbound import (
    CONTROLLER_MECHANISM_KEY,
    INTER_BROKER_MECHANISM_KEY,
    OutboundConfigError,
    outbound_security,
)
from broker.security.principal_mapping import PrincipalMapper
from broker.security.sasl.config import SaslConfigError, SaslListenerConfig
from broker.security.sasl.config import listener_config as sasl_listener_config
from broker.security.tls import TlsConfigError, listener_settings, server_context
from pyspark_log.wire.api_keys import ApiKey

log = logging.getLogger(__name__)

HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.METADATA: handle_metadata,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: handle_alter_replica_log_dirs,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    **group_handlers(),  # FindCoordinator, consumer groups and committed offsets
    **SHARE_GROUP_HANDLERS,  # KIP-932 share groups
    **txn_handlers(),  # InitProducerId and transactions (TxnOffsetCommit is in group_handlers)
    **txn_admin_handlers(),  # DescribeProducers, DescribeTransactions, ListTransactions (KIP-664)
    **REASSIGNMENT_HANDLERS,  # AlterPartitionReassignments, ListPartitionReassignments (KIP-455)
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

    def __init__(
        self, config: BrokerConfig, clock_ms: Callable[[], int] = system_clock_ms, *, freeze_heap: bool = False
    ) -> None:
        """``freeze_heap``: ``gc.freeze.enable`` (``broker.runtime.gc_freeze``); only the broker
        process's ``run()`` passes it, tests running a server in their own process leave it off."""
        self.config = config
        self._freeze_heap = freeze_heap
        self._frozen = False
        self._clock_ms = clock_ms
        self._listeners: list[SocketListener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._logs: LogManager | None = None
        self._remote_log: RemoteLogManager | None = None  # KIP-405 (remote.log.storage.system.enable)
        self._remote_sender: BrokerSender | None = None
        self._groups: group_coordinator.GroupCoordinator | None = None
        self._txn: txn_coordinator.TransactionCoordinator | None = None
        self._replicas: ReplicaManager | None = None
        self._fetchers: ReplicaFetchers | None = None
        self.advertised: list[str] = []
        self.raft: RaftDriver | None = None  # the KIP-595 quorum replica (process.roles set)
        self._quorum: QuorumController | None = None  # the metadata on that quorum
        self._metrics: MetricsServer | None = None
        self.stats = BrokerStats()  # hot-path counters (broker.metrics), on /metrics
        self.loop_monitor = LoopMonitor()  # the event loop's lag and busy fraction, on /metrics
        self.gc_pauses = GcPauses()  # collection pauses once ready, on /metrics
        self.fatal_reason: str | None = None
        self.stop_requested = asyncio.Event()  # SIGTERM/SIGINT, or a fatal error of the quorum

    async def start(self) -> None:
        config = self.config
        fd_soft, _ = raise_open_file_limit()
        limits = ConnectionLimits(
            request_max_bytes=int(config["socket.request.max.bytes"]),
            idle_ms=int(config["connections.max.idle.ms"]),
            frame_timeout_ms=int(config["socket.request.frame.timeout.ms"]),
        )
        quota_config = QuotaConfig(int(config["quota.window.num"]), int(config["quota.window.size.seconds"]) * 1000)
        quota_table: list[Callable[[], QuotaTable]] = [dict]  # the metadata image's, once it is loaded
        try:
            overrides = parse_overrides(str(config["max.connections.per.ip.overrides"]))
        except ConnectionConfigError as exc:
            raise ConfigError(str(exc)) from None
        max_connections, max_per_ip = _connection_caps(config, fd_soft)
        connection_quotas = ConnectionQuotas(
            ConnectionLimitsConfig(max_connections, max_per_ip, overrides, int(config["max.connection.creation.rate"])),
            quota_config,
            ip_rate=lambda ip: _ip_connection_rate(quota_table[0](), ip),
        )  # fmt: skip
        advertised_by_name = {a.name: a for a in map(parse_listener, config["advertised.listeners"])}
        tls_contexts = self._tls_contexts()  # before binding: a bad keystore stops start-up here
        sasl_configs = self._sasl_configs()
        to_brokers, to_controllers = self._dialers()  # likewise a bad truststore or login for other nodes
        # formatted by `pylog storage format` (Kafka's kafka-storage) for this node and one cluster, or refused
        cluster_id = check_formatted(config.log_dirs, config.node_id, str(config["cluster.id"]))
        for uri in config["listeners"]:
            spec = parse_listener(uri)
            self._listeners.append(
                SocketListener(
                    spec.name, spec.host, spec.port, limits,
                    send_buffer_bytes=int(config["socket.send.buffer.bytes"]),
                    receive_buffer_bytes=int(config["socket.receive.buffer.bytes"]),
                    tls_context=tls_contexts.get(spec.name),
                    principal_mapping=self._principal_mapping(spec.name),
                    quotas=connection_quotas,
                    stats=self.stats,
                )
            )  # fmt: skip
        first = self._listeners[0]
        by_name = {sl.name: sl for sl in self._listeners}
        # the address other brokers and clients reach this node's data at (registered with the controller)
        inter_broker = by_name[config.inter_broker_listener]
        host, port = _advertised_address(inter_broker, advertised_by_name.get(inter_broker.name))
        # a one-voter quorum's own voter address: the controller listener when there is one
        raft_listener = next((by_name[n] for n in config.listener_names if n in config.controller_listeners), first)
        raft_address = _advertised_address(raft_listener, advertised_by_name.get(raft_listener.name))
        if config.kraft_enabled:  # committed-entry listeners go on self.raft before its start()
            try:
                check_directory_id(config)  # KIP-853: the directory the bootstrap voter set names
            except RaftConfigError as exc:
                raise MetaPropertiesError(str(exc)) from None
            self.raft = create_driver(
                config, cluster_id, raft_address, on_fatal=self._on_raft_fatal, dialer=to_controllers
            )
        self.advertised = [
            f"{sl.name}://{':'.join(map(str, _advertised_address(sl, advertised_by_name.get(sl.name))))}"
            for sl in self._listeners
        ]
        default_log_config = broker_log_config(config.raw)
        controller: LocalController | QuorumController
        # every client listener (the inter-broker one first), as BrokerRegistration lists them
        endpoints = tuple(
            (sl.name, *_advertised_address(sl, advertised_by_name.get(sl.name)))
            for sl in sorted(self._listeners, key=lambda sl: sl.name != inter_broker.name)
            if sl.name not in config.controller_listeners
        )
        if self.raft is not None:  # registers its committed-entry listener on the driver
            controller = self._quorum = quorum_controller(
                self.raft, config, cluster_id, (host, port), endpoints, dialer=to_controllers
            )
        else:
            controller = LocalController(
                config.log_dirs[0],
                cluster_id,
                BrokerInfo(config.node_id, host, port, endpoints=endpoints),
                deletion_enabled=bool(config["delete.topic.enable"]),
                bootstrap=bootstrap_records(config.log_dirs),
            )
        image = controller.image()
        dynamic = DynamicBrokerConfig(config)  # KIP-226: dynamic broker configs over the static ones

        def on_connection_limits() -> None:
            try:
                per_ip_overrides = parse_overrides(str(config["max.connections.per.ip.overrides"]))
            except ConnectionConfigError as exc:  # checked before it was stored; an old log may differ
                log.warning("dynamic max.connections.per.ip.overrides ignored: %s", exc)
                return
            total, per_ip = _connection_caps(config, fd_soft)
            rate = int(config["max.connection.creation.rate"])
            connection_quotas.config = ConnectionLimitsConfig(total, per_ip, per_ip_overrides, rate)

        dynamic.react(CONNECTION_KEYS, on_connection_limits)
        dynamic.apply(image.broker_configs)
        quota_table[0] = lambda: controller.image().client_quotas
        client_quotas = ClientQuotas(quota_table[0], quota_config)
        logs = LogManager(
            LogManagerConfig.from_properties({**config.raw, "log.dirs": ",".join(config.log_dirs)}),
            default_log_config,
            self._clock_ms,
            producer_id_expiration_ms=int(config["producer.id.expiration.ms"]),
            flush_in_background=True,  # fsyncs off the event loop (flush.py)
        )
        logs.startup({t.name: topic_log_config(config.raw, t.configs) for t in image.topics.values()})
        self._logs = logs

        def topic_config(topic: str) -> LogConfig:
            found = controller.image().topics.get(topic)
            return topic_log_config(config.raw, found.configs if found else {})

        quorum = self._quorum
        replicas = ReplicaManager(
            config.node_id, logs, controller.image, topic_config,
            config=ReplicationConfig.from_properties(config.get),
            alter_isr=quorum.alter_partition if quorum is not None and quorum.is_broker else None,
        )  # fmt: skip
        self._replicas = replicas
        logs.set_high_watermarks(replicas.high_watermark_of)  # retention and cleaning stop at the HW
        replicas.serving = quorum is None  # a KRaft broker leads nothing before it caught up (start())
        self._fetchers = ReplicaFetchers(replicas, controller.image, clock_ms=replicas.clock_ms, dialer=to_brokers)
        throttles = self._fetchers.throttles = ReplicationThrottles.from_config(
            config.node_id, config.get, lambda t: _topic_configs(controller.image(), t),
            lambda: controller.image().broker_configs, replicas.clock_ms,
        )  # fmt: skip

        def on_log_defaults() -> None:
            for name, topic in controller.image().topics.items():
                logs.set_topic_config(name, topic_log_config(config.raw, topic.configs))

        dynamic.on_log_defaults = on_log_defaults

        def on_change(old: MetadataImage, new: MetadataImage) -> None:
            dynamic.apply(new.broker_configs)
            for name, topic in new.topics.items():
                before = old.topics.get(name)
                if before is None or before.configs != topic.configs:
                    logs.set_topic_config(name, topic_log_config(config.raw, topic.configs))
            replicas.on_image_change(old, new)

        controller.add_listener(on_change)
        replicas.on_image_change(None, image)
        groups, on_groups_change = group_coordinator.attach(config.get, config.node_id, replicas, image, self._clock_ms)
        controller.add_listener(on_groups_change)
        self._groups = groups
        self._tasks.append(self._watch(asyncio.create_task(groups.run(), name="group-coordinator")))
        share, on_share_change = share_groups.attach(
            config.get, config.node_id, replicas, image, self._clock_ms, groups,
            current_image=controller.image, dialer=to_brokers,
        )  # fmt: skip
        controller.add_listener(on_share_change)  # KIP-932 share groups (timers in the group coordinator's task)
        txn, on_txn_change = txn_coordinator.attach(
            config.get, config.node_id, config.log_dirs[0], replicas=replicas, markers=replicas,
            image=controller.image, clock_ms=self._clock_ms, dialer=to_brokers,
        )  # fmt: skip
        controller.add_listener(on_txn_change)
        self._txn = txn
        self._tasks.append(self._watch(asyncio.create_task(txn.run(), name="transaction-coordinator")))
        if self.raft is not None:
            await self.raft.start()
        broker = Broker(
            config, controller, logs, replicas, self._clock_ms, groups=groups, raft=self.raft, txn=txn,
            listener_policy=ListenerPolicy(config.controller_listeners, sasl_configs),
            mutation_quotas=ControllerMutationQuotas(quota_config), replication_throttles=throttles,
        )  # fmt: skip
        broker.share = share
        broker.log_dir_mover = mover = LogDirMover(
            logs, replicas.get_partition, lambda: list(replicas.partitions()),
            delay_ms=throttles.log_dir_move_delay_ms, record=throttles.log_dir_move.record,
        )  # fmt: skip
        self._tasks.append(self._watch(asyncio.create_task(mover.run(), name="log-dir-mover")))
        quorum_only = {**raft_handlers(), **UNREGISTER_BROKER_HANDLERS}  # UnregisterBroker (64): KRaft only
        handlers = quorum_handlers({**HANDLERS, **quorum_only}) if self.raft else HANDLERS
        acl_settings = authorizer_config.settings(config.raw)
        if acl_settings is not None:
            broker.authorizer = AclAuthority(acl_settings)
            handlers = authorized_handlers(handlers, broker.authorizer)
        dispatcher = Dispatcher(broker, handlers, QuotaEnforcer(client_quotas, self._clock_ms), stats=self.stats)
        for sl in self._listeners:
            sl.start(dispatcher)
        cleaner = LogCleaner(logs, CleanerConfig.from_properties(self.config.raw), self._clock_ms)

        def on_cleaner() -> None:  # KIP-226: the next cleaning and back-off use the new values
            try:
                fresh = CleanerConfig.from_properties(config.raw)
                current = cleaner.config
                cleaner.config = dataclasses.replace(fresh, enable=current.enable, threads=current.threads)
            except ValueError as exc:
                log.warning("dynamic log.cleaner.* values ignored: %s", exc)

        dynamic.react(CLEANER_KEYS, on_cleaner)
        if int(config["metrics.port"]) >= 0:
            log_flush.flush_time_observer = self.stats.flush_ms.observe
            self.loop_monitor.start()
            registry = CollectorRegistry(auto_describe=False)  # this broker's, not the process-wide one
            for collector in (
                RaftCollector(self._raft_metrics),
                ControllerCollector(controller.image, lambda: self.raft, local=self._quorum is None),
                RequestCollector(self.stats, lambda: self._listeners),
                LoopCollector(self.loop_monitor),
                ReplicationCollector(replicas, controller.image, self._fetchers),
                LogDirCollector(logs),
                LogCollector(logs),
                CleanerCollector(cleaner),
                QuotaCollector(client_quotas, self._clock_ms, throttles),
                GroupCollector(groups, replicas, self.stats),
                TxnCollector(txn, replicas, self.stats, self._clock_ms),
                GcPauseCollector(self.gc_pauses),
            ):
                registry.register(collector)  # type: ignore[arg-type]  # may yield None checkpoints (exposition)
            GCCollector(registry=registry)
            off_loop = CollectorRegistry(auto_describe=False)  # reads /proc only: off the loop
            ProcessCollector(registry=off_loop)
            self._metrics = MetricsServer(first.host or host, int(config["metrics.port"]), registry, off_loop)
            await self._metrics.start()
        self._start_background(logs, replicas, cleaner)
        self._start_remote_log(broker, controller, to_brokers)
        if self._quorum is not None:  # a broker registers and catches up before it is ready
            await self._quorum.start()
            replicas.start_serving()
        log.info("serving %d api(s) at the ranges of Kafka %s", len(dispatcher.advertised), "3.7.0")
        if self._freeze_heap:  # start-up is over: its heap leaves the collector's reach (once)
            freeze_start_up_heap()
            self._frozen = True
        trim_heap()  # start-up's transient peak (the metadata tail replay) leaves the RSS
        self.gc_pauses.install()  # pauses while serving, not start-up's (nor the freeze's collection)
        print(
            f"pylog broker ready: node.id={config.node_id} cluster.id={cluster_id} "
            f"listeners={','.join(self.advertised)}",
            flush=True,
        )

    def _tls_contexts(self) -> dict[str, ssl.SSLContext]:
        """A server TLS context per SSL listener (``broker.security.tls``); ConfigError names the key."""
        out = {}
        for name, protocol in self.config.listener_protocols.items():
            if protocol in ("SSL", "SASL_SSL"):
                try:
                    out[name] = server_context(listener_settings(self.config.raw, name), name)
                except TlsConfigError as exc:
                    raise ConfigError(str(exc)) from None
                log.info("listener %s serves TLS", name)
        return out

    def _principal_mapping(self, listener: str) -> Callable[[str], str] | None:
        """The listener's ``ssl.principal.mapping.rules`` (None: DEFAULT, the DN itself); the
        value was validated with the configuration."""
        rules = listener_settings(self.config.raw, listener)["ssl.principal.mapping.rules"]
        return None if rules.strip() == "DEFAULT" else PrincipalMapper.parse(rules).name

    def _dialers(self) -> tuple[Dialer, Dialer]:
        """How this node dials other brokers (the inter-broker listener) and the controllers (the
        first controller listener), with those listeners' TLS and SASL (``broker.security.outbound``)."""
        config = self.config
        if not config.kraft_enabled:  # a single broker (LocalController) dials no other node
            return Dialer(), Dialer()
        inter = config.inter_broker_listener
        targets = (
            (inter, config.listener_protocols[inter], INTER_BROKER_MECHANISM_KEY, f"broker-{config.node_id}"),
            (*config.controller_target, CONTROLLER_MECHANISM_KEY, f"node-{config.node_id}-to-controller"),
        )
        broker_role = "broker" in config["process.roles"]
        out = []
        for listener, protocol, mechanism_key, client_id in targets if broker_role else targets[1:]:
            try:
                security = outbound_security(config.raw, listener, protocol, mechanism_key)
            except OutboundConfigError as exc:
                raise ConfigError(str(exc)) from None
            if protocol != "PLAINTEXT":
                log.info("connections to other nodes' listener %s use %s", listener, protocol)
            out.append(Dialer(security, client_id=client_id))
        return (out[0], out[1]) if broker_role else (Dialer(), out[0])  # a controller dials no broker

    def _sasl_configs(self) -> dict[str, SaslListenerConfig]:
        """The SASL settings of every SASL_PLAINTEXT / SASL_SSL listener; ConfigError names the key."""
        out = {}
        for name, protocol in self.config.listener_protocols.items():
            if protocol.startswith("SASL_"):
                try:
                    out[name] = sasl_listener_config(self.config.raw, name)
                except SaslConfigError as exc:
                    raise ConfigError(str(exc)) from None
                log.info("listener %s authenticates with SASL %s", name, ",".join(out[name].mechanisms))
        return out

    def _start_background(self, logs: LogManager, replicas: ReplicaManager, cleaner: LogCleaner) -> None:
        mc = logs.config
        rc = replicas.config

        async def check_isr() -> None:
            replicas.check_isr()

        schedule: list[tuple[str, int, Callable[[], Awaitable[object]]]] = [
            ("retention", mc.retention_check_interval_ms, logs.run_retention_once),
            ("file-deletion", mc.file_deletion_check_interval_ms, logs.run_file_deletion_once),
            ("checkpoints", mc.flush_offset_checkpoint_interval_ms, logs.run_checkpoints_once),
            ("log-dir-probe", mc.dir_failure_probe_interval_ms, logs.run_dir_probe_once),
            ("high-watermark-checkpoint", rc.hw_checkpoint_interval_ms, replicas.run_checkpoint_once),
            ("isr-expiration", max(rc.lag_time_max_ms // 2, 1), check_isr),  # Kafka's cadence
        ]
        if mc.flush_scheduler_interval_ms < 2**62:
            schedule.append(("flush", mc.flush_scheduler_interval_ms, logs.run_flush_once))
        for name, interval_ms, work in schedule:
            self._tasks.append(asyncio.create_task(_every(name, interval_ms, work), name=name))
        self._tasks.append(asyncio.create_task(cleaner.run(), name="log-cleaner"))  # Kafka docs §4.8 "Log Compaction"

    def _start_remote_log(self, broker: Broker, controller: MetadataController, dialer: Dialer) -> None:
        """KIP-405: with ``remote.log.storage.system.enable`` the RemoteLogManager
        (``broker.log.remote.manager``) runs every ``remote.log.manager.task.interval.ms`` and the
        fetch and ListOffsets handlers serve the remote tier through it."""
        rlm_config = RemoteLogManagerConfig.from_properties(self.config.get, self.config.raw)
        if not rlm_config.system_enabled or self._replicas is None:
            return
        assert rlm_config.rsm_class_name is not None  # checked by BrokerConfig.validate
        try:
            rsm = load_remote_storage_manager(rlm_config.rsm_class_name, self.config.raw, rlm_config.rsm_prefix)
        except RemoteStorageException as exc:
            raise ConfigError(str(exc)) from None
        self._remote_sender = BrokerSender("pylog-remote-log-manager", dialer)
        rlm = broker.remote_log = self._remote_log = RemoteLogManager(
            self.config.node_id, rlm_config, rsm=rsm, replicas=self._replicas, image=controller.image,
            create_topic=controller.create_topic, sender=self._remote_sender, clock_ms=self._clock_ms,
        )  # fmt: skip
        if self._fetchers is not None:
            self._fetchers.tier = rlm  # KIP-405: followers rebuild from the tier
        task = asyncio.create_task(_every("remote-log-manager", rlm_config.task_interval_ms, rlm.run_once))
        self._tasks.append(task)

    def _raft_metrics(self) -> dict[str, float | int | str] | None:
        return self.raft.metrics() if self.raft is not None and self.raft.running else None

    def _on_raft_fatal(self, reason: str) -> None:
        self.fatal_reason = reason
        print(f"pylog-broker: fatal: {reason}", file=sys.stderr, flush=True)
        self.stop_requested.set()

    def _watch(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        """A coordinator's one task that dies (its owner logged why and failed its waiters) stops
        the broker like a fatal quorum error: serving on without it would answer its groups or
        transactions COORDINATOR_NOT_AVAILABLE forever, while a stopped broker hands them over."""

        def done(finished: asyncio.Task[None]) -> None:
            if not finished.cancelled() and finished.exception() is not None:
                self._on_raft_fatal(f"{finished.get_name()} died: {finished.exception()!r}")

        task.add_done_callback(done)
        return task

    async def shutdown(self) -> None:
        if self._metrics is not None:
            await self._metrics.close()
            self._metrics = None
            await self.loop_monitor.stop()
        if self._quorum is not None:  # a broker asks to be fenced while the quorum still runs
            await self._quorum.shutdown()
            self._quorum = None
        if self.raft is not None:  # first: a leader resigns while its listener still answers fetches
            await self.raft.shutdown(graceful=self.fatal_reason is None)
            self.raft = None
        for sl in self._listeners:
            await sl.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):  # a died task was escalated (_watch)
                await task
        if self._fetchers is not None:
            await self._fetchers.close()
            self._fetchers = None
        if self._remote_log is not None:
            self._remote_log.rsm.close()
            self._remote_log = None
        if self._remote_sender is not None:
            self._remote_sender.close()
            self._remote_sender = None
        if self._replicas is not None:
            self._replicas.shutdown()
            if self._logs is not None:
                self._replicas.write_checkpoints()
            self._replicas = None
        if self._groups is not None:
            self._groups.shutdown()
            self._groups = None
        if self._txn is not None:
            self._txn.shutdown()
            self._txn = None
        if self._logs is not None:
            self._logs.shutdown()
            self._logs = None
        if self._frozen:  # what start-up made may now be collected again
            thaw()
            self._frozen = False
        self.gc_pauses.uninstall()
        log.info("shut down cleanly")


def _topic_configs(image: MetadataImage, topic: str) -> dict[str, str] | None:
    found = image.topics.get(topic)
    return found.configs if found is not None else None


def _connection_caps(config: BrokerConfig, fd_soft: int) -> tuple[int, int]:
    """``max.connections`` and ``max.connections.per.ip`` as configured, else derived from the
    open-file limit (``descriptor_caps``), logged."""
    derived_total, derived_per_ip = descriptor_caps(fd_soft if fd_soft != resource.RLIM_INFINITY else -1)
    total = int(config["max.connections"]) if "max.connections" in config.raw else derived_total
    per_ip = int(config["max.connections.per.ip"]) if "max.connections.per.ip" in config.raw else derived_per_ip
    log.info(
        "connection limits: max.connections=%d%s, max.connections.per.ip=%d%s",
        total, "" if "max.connections" in config.raw else " (from the open-file limit)",
        per_ip, "" if "max.connections.per.ip" in config.raw else " (from the open-file limit)",
    )  # fmt: skip
    return total, per_ip


def _ip_connection_rate(table: QuotaTable, ip: str) -> float | None:
    """KIP-612: the ``connection_creation_rate`` of the ``ip`` entity ``ip``, else of the default ip."""
    for entity in (((IP, ip),), ((IP, None),)):
        values = table.get(entity)
        if values and "connection_creation_rate" in values:
            return values["connection_creation_rate"]
    return None


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
    server = BrokerServer(config, freeze_heap=bool(config[GC_FREEZE_KEY]))
    try:
        await server.start()
    except ConfigError as exc:  # a setting found unusable at start-up (a TLS keystore): no traceback
        print(f"pylog-broker: failed to start: {exc}", file=sys.stderr, flush=True)
        await server.shutdown()
        return 2
    except MetaPropertiesError as exc:  # unformatted or foreign log dirs (Kafka exits 1 too): no traceback
        print(f"pylog-broker: failed to start: {exc}", file=sys.stderr, flush=True)
        await server.shutdown()
        return 1
    except Exception as exc:
        log.exception("broker failed to start")
        print(f"pylog-broker: failed to start: {exc}", file=sys.stderr, flush=True)
        await server.shutdown()
        return 1
    stop = server.stop_requested
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping")
    await server.shutdown()
    return 1 if server.fatal_reason else 0
