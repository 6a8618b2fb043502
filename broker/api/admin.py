"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), DescribeCluster (60).

Every change goes through the ``MetadataController`` (validated, persisted, then published);
errors come back per topic with Kafka's codes and a message.

Two checks happen here, before the controller persists anything:

- topic configs must make a valid ``LogConfig`` together with the broker's (INVALID_CONFIG
  otherwise). The controller checks only keys and value kinds; a value such as
  ``max.message.bytes=-5`` would otherwise be persisted and then fail every log creation and
  every restart.
- one request creates at most ``MAX_PARTITIONS_PER_REQUEST`` partitions (POLICY_VIOLATION
  otherwise), as Kafka's controller refuses an operation of more than 10000 metadata records
  (``QuorumController.MAX_RECORDS_PER_USER_OP``: "Unable to perform excessively large batch
  operation."). Without it one CreateTopics with num_partitions=2^31-1 stalls the event loop.

CreateTopics, CreatePartitions and DeleteTopics also answer to the group's KIP-599
``controller_mutation_rate`` (``broker.quota.mutation``): a topic met while a strict quota is in
debt gets THROTTLING_QUOTA_EXCEEDED; the partitions of each successful mutation are recorded, and
the response carries the quota's throttle time (the channel is then muted by the dispatcher).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from broker.api.configs import (
    BROKER_LOGGER_RESOURCE,
    alter_broker_loggers,
    check_broker_logger_name,
    describe_broker_configs,
    describe_broker_loggers,
    describe_topic_configs,
    topic_log_config,
)
from broker.api.context import Broker, Request
from broker.api.metadata import ALL_CLUSTER_OPERATIONS
from broker.api.quota_enforcement import mutation_quota
from broker.controller.errors import MetadataError
from broker.controller.forwarding import forwarded_request
from broker.controller.topics import validate_topic_config
from broker.dynamic_config import (
    DynamicConfigError,
    apply_operations,
    check_changes,
    check_resource_name,
    replace_all,
)
from broker.ignored_configs import IGNORED_TOPIC_CONFIGS
from broker.log.remote.config import check_topic_config as check_remote_topic_config
from broker.metadata.image import TopicImage
from broker.quota.mutation import THROTTLED_MESSAGE, MutationQuota
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32  # KIP-848/932 group configs (share groups: broker.coordinator.share_group.config)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
MAX_PARTITIONS_PER_REQUEST = 10_000


def _check_log_config(broker: Broker, overrides: Mapping[str, str]) -> None:
    """Raise INVALID_CONFIG unless ``overrides`` make a valid ``LogConfig`` on this broker.

    Keys and value kinds are checked first, so the message names the rule ("is not an integer")
    rather than a parser's wording."""
    for key, value in overrides.items():
        validate_topic_config(key, value)
        if key in IGNORED_TOPIC_CONFIGS and value is not None and IGNORED_TOPIC_CONFIGS[key].reason:
            log.warning("topic config %s=%r is accepted and ignored: %s", key, value, IGNORED_TOPIC_CONFIGS[key].reason)
    try:
        effective = topic_log_config(broker.config.raw, overrides)
        # KIP-405: Kafka's LogConfig.validate checks of remote.storage.enable and local.retention.*
        check_remote_topic_config(effective, system_enabled=bool(broker.config.get("remote.log.storage.system.enable")))
    except (ValueError, TypeError, OverflowError) as exc:
        raise MetadataError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def _check_partition_budget(new_partitions: int, budget: int) -> None:
    if new_partitions > budget:
        raise MetadataError(
            ErrorCode.POLICY_VIOLATION,
            f"Unable to perform excessively large batch operation: a request may create at most "
            f"{MAX_PARTITIONS_PER_REQUEST} partitions",
        )


def _check_mutation_quota(broker: Broker, quota: MutationQuota, *, exempt: bool) -> None:
    """THROTTLING_QUOTA_EXCEEDED if a strict KIP-599 quota is in debt. ``exempt``: the topic will
    fail anyway (it exists, or does not) or change nothing (validate_only), so it is left to the
    controller's own answer and costs no quota."""
    if not exempt and not quota.admits(broker.clock_ms()):
        raise MetadataError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)


def _replica_lists(wanted: Any) -> list[list[int]] | None:
    """A CreateTopics topic's explicit assignment as replica lists by partition, or None.

    Kafka's request rules: with an assignment, num_partitions and replication_factor are -1
    (INVALID_REQUEST otherwise) and the partition indexes are 0..n-1 (INVALID_REPLICA_ASSIGNMENT);
    the controller checks the replica lists themselves."""
    if not wanted.assignments:
        return None
    if wanted.num_partitions != -1 or wanted.replication_factor != -1:
        raise MetadataError(
            ErrorCode.INVALID_REQUEST,
            "both num_partitions/replication_factor and a replica assignment were set; give -1 for both counts"
            " with an assignment",
        )
    by_index = sorted(wanted.assignments, key=lambda a: a.partition_index)
    if [a.partition_index for a in by_index] != list(range(len(by_index))):
        raise MetadataError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "the assigned partition indexes must be 0, 1, ... without gaps or repeats",
        )
    return [list(a.broker_ids) for a in by_index]


def handle_create_topics(broker: Broker, request: Request) -> Any:
    return _create_topics(broker, request)


async def _create_topics(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    results = []
    seen: set[str] = set()
    budget = MAX_PARTITIONS_PER_REQUEST
    quota = mutation_quota(broker, request)
    for wanted in body.topics:
        entry: dict[str, Any] = {"name": wanted.name, "error_code": 0, "error_message": None}
        if wanted.name in seen:
            entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message="topic named twice in one request")
            results.append(entry)
            continue
        seen.add(wanted.name)
        partitions = wanted.num_partitions if wanted.num_partitions != -1 else int(broker.config["num.partitions"])
        replication = (
            wanted.replication_factor
            if wanted.replication_factor != -1
            else int(broker.config["default.replication.factor"])
        )
        configs = {c.name: c.value for c in wanted.configs if c.value is not None}
        try:
            assignments = _replica_lists(wanted)
            if assignments is not None:
                partitions, replication = len(assignments), len(assignments[0])
            _check_partition_budget(partitions, budget)
            _check_log_config(broker, configs)
            _check_mutation_quota(broker, quota, exempt=body.validate_only or wanted.name in broker.image().topics)
            topic = await broker.controller.create_topic(
                wanted.name, partitions, replication, configs, validate_only=body.validate_only, assignments=assignments
            )
        except MetadataError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
            results.append(entry)
            continue
        budget -= len(topic.partitions)
        if not body.validate_only:
            quota.record(len(topic.partitions), broker.clock_ms())
        entry.update(
            topic_id=topic.topic_id,
            num_partitions=len(topic.partitions),
            replication_factor=replication,
            configs=[
                {"name": c["name"], "value": c["value"], "read_only": False, "config_source": c["config_source"],
                 "is_sensitive": False}
                for c in describe_topic_configs(broker, topic.name, overrides=topic.configs)
            ],
        )  # fmt: skip
        results.append(entry)
    return {"throttle_time_ms": quota.throttle_time_ms(broker.clock_ms()), "topics": results}


def handle_delete_topics(broker: Broker, request: Request) -> Any:
    return _delete_topics(broker, request)


async def _delete_topics(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    image = broker.image()
    wanted: list[tuple[str | None, Any]] = []
    if request.version >= 6:
        for t in body.topics:
            name = t.name if t.name is not None else image.topic_ids.get(t.topic_id)
            wanted.append((name, t.topic_id))
    else:
        wanted = [(name, None) for name in body.topic_names]
    responses = []
    quota = mutation_quota(broker, request)
    for name, topic_id in wanted:
        entry: dict[str, Any] = {"name": name, "error_code": 0}
        if topic_id is not None:
            entry["topic_id"] = topic_id
        if name is None:
            entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
            responses.append(entry)
            continue
        topic = broker.image().topics.get(name)
        if topic is not None:
            entry["topic_id"] = topic.topic_id
        try:
            _check_mutation_quota(broker, quota, exempt=topic is None)
            await broker.controller.delete_topic(name)
            quota.record(len(topic.partitions) if topic is not None else 0, broker.clock_ms())
        except MetadataError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time_ms": quota.throttle_time_ms(broker.clock_ms()), "responses": responses}


def handle_create_partitions(broker: Broker, request: Request) -> Any:
    return _create_partitions(broker, request)


async def _create_partitions(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    results = []
    budget = MAX_PARTITIONS_PER_REQUEST
    quota = mutation_quota(broker, request)
    for wanted in body.topics:
        entry: dict[str, Any] = {"name": wanted.name, "error_code": 0, "error_message": None}
        topic = broker.image().topics.get(wanted.name)
        added = wanted.count - len(topic.partitions) if topic is not None else 0
        try:
            _check_partition_budget(added, budget)
            _check_mutation_quota(broker, quota, exempt=body.validate_only or added <= 0)
            assignments = None if wanted.assignments is None else [list(a.broker_ids) for a in wanted.assignments]
            await broker.controller.create_partitions(
                wanted.name, wanted.count, validate_only=body.validate_only, assignments=assignments
            )
            budget -= max(0, added)
            if not body.validate_only:
                quota.record(added, broker.clock_ms())
        except MetadataError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return {"throttle_time_ms": quota.throttle_time_ms(broker.clock_ms()), "results": results}


def handle_describe_configs(broker: Broker, request: Request) -> Any:
    body = request.body
    results = []
    for res in body.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "configs": [],
        }
        if res.resource_type == TOPIC_RESOURCE:
            topic = broker.image().topics.get(res.resource_name)
            if topic is None:
                entry.update(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"topic {res.resource_name!r} does not exist",
                )
                results.append(entry)
                continue
            described = describe_topic_configs(broker, topic.name, overrides=topic.configs)
        elif res.resource_type == BROKER_RESOURCE:
            if res.resource_name not in ("", str(broker.node_id)):
                message = (
                    f"Unexpected broker id, expected {broker.node_id} or empty string, but received {res.resource_name}"
                )
                entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=message)
                results.append(entry)
                continue
            described = describe_broker_configs(broker, default_resource=res.resource_name == "")
        elif res.resource_type == BROKER_LOGGER_RESOURCE:
            problem = check_broker_logger_name(broker, res.resource_name)
            if problem is not None:
                entry.update(error_code=problem[0], error_message=problem[1])
                results.append(entry)
                continue
            described = describe_broker_loggers()
        elif res.resource_type == GROUP_RESOURCE and broker.share is not None:  # KIP-932 share group configs
            described = broker.share.describe_group_configs(res.resource_name)
        else:
            entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"resource type {res.resource_type}")
            results.append(entry)
            continue
        entry["configs"] = [
            {
                "name": c["name"],
                "value": c["value"],
                "read_only": c["read_only"],
                "is_default": c["config_source"] == 5,
                "config_source": c["config_source"],
                "is_sensitive": c.get("is_sensitive", False),
                "synonyms": c.get("synonyms", []) if getattr(body, "include_synonyms", False) else [],
                "config_type": c.get("config_type", 0),
                # Kafka documents no logger: "" when documentation is asked (BROKER_LOGGER only)
                "documentation": c.get("documentation") if getattr(body, "include_documentation", False) else None,
            }
            for c in described
            if keys is None or c["name"] in keys
        ]
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}


def handle_alter_configs(broker: Broker, request: Request) -> Any:
    """AlterConfigs (33): the given configs REPLACE the topic's overrides (absent keys return to
    their defaults), unlike IncrementalAlterConfigs. aiokafka changes configs only this way."""
    return _alter_configs(broker, request)


async def _alter_configs(broker: Broker, request: Request) -> Mapping[str, Any]:
    async def replace(topic: TopicImage, res: Any) -> None:
        wanted = {c.name: c.value for c in res.configs if c.value is not None}
        changes: dict[str, str | None] = {key: None for key in topic.configs if key not in wanted}
        changes.update(wanted)
        _check_log_config(broker, wanted)
        await broker.controller.alter_topic_configs(topic.name, changes, validate_only=request.body.validate_only)

    async def replace_broker(res: Any) -> None:
        current = broker.image().broker_configs.get(res.resource_name, {})
        wanted = {c.name: c.value for c in res.configs if c.value is not None}
        await alter_broker_configs(broker, res.resource_name, replace_all(current, wanted), request.body.validate_only)

    return await _alter_each_topic(broker, request, replace, brokers=replace_broker)


async def _alter_each_topic(
    broker: Broker,
    request: Request,
    alter: Callable[[TopicImage, Any], Awaitable[None]],
    *,
    loggers: bool = False,
    brokers: Callable[[Any], Awaitable[None]] | None = None,
) -> Mapping[str, Any]:
    """Run ``alter`` for each topic resource; broker resources and unknown topics get errors.
    With ``loggers`` (IncrementalAlterConfigs), BROKER_LOGGER resources change this broker's log
    levels (``broker.api.configs.alter_broker_loggers``)."""
    responses = []
    for res in request.body.resources:
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
        }
        topic = broker.image().topics.get(res.resource_name) if res.resource_type == TOPIC_RESOURCE else None
        if loggers and res.resource_type == BROKER_LOGGER_RESOURCE:
            problem = check_broker_logger_name(broker, res.resource_name) or alter_broker_loggers(
                res.configs, validate_only=request.body.validate_only
            )
            entry.update(error_code=problem[0], error_message=problem[1])
        elif res.resource_type == BROKER_RESOURCE and brokers is not None:
            # KIP-226 dynamic broker configs (broker.dynamic_config)
            refusal = check_resource_name(res.resource_name, broker.node_id, forwarded=forwarded_request.get())
            try:
                if refusal is None:
                    await brokers(res)
            except DynamicConfigError as exc:
                refusal = str(exc)
            except MetadataError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
            if refusal is not None:
                entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=refusal)
        elif loggers and res.resource_type == GROUP_RESOURCE and broker.share is not None:
            # KIP-932 share group configs (broker.coordinator.share_group; kept in this broker's memory)
            try:
                refused = broker.share.alter_group_configs(
                    res.resource_name, apply_operations({}, res.configs), request.body.validate_only
                )
            except DynamicConfigError as exc:
                refused = str(exc)
            if refused is not None:
                entry.update(error_code=ErrorCode.INVALID_CONFIG, error_message=refused)
        elif res.resource_type != TOPIC_RESOURCE:
            entry.update(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"configs of resource type {res.resource_type} cannot be altered",
            )
        elif topic is None:
            entry.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message="unknown topic")
        else:
            try:
                await alter(topic, res)
            except MetadataError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}


def handle_incremental_alter_configs(broker: Broker, request: Request) -> Any:
    return _incremental_alter_configs(broker, request)


async def _incremental_alter_configs(broker: Broker, request: Request) -> Mapping[str, Any]:
    async def apply(topic: TopicImage, res: Any) -> None:
        changes = _apply_ops(topic.configs, res.configs, broker)
        merged = {k: v for k, v in {**topic.configs, **changes}.items() if v is not None}
        _check_log_config(broker, merged)
        await broker.controller.alter_topic_configs(topic.name, changes, validate_only=request.body.validate_only)

    async def apply_broker(res: Any) -> None:
        current = broker.image().broker_configs.get(res.resource_name, {})
        changes = apply_operations(current, res.configs)
        await alter_broker_configs(broker, res.resource_name, changes, request.body.validate_only)

    return await _alter_each_topic(broker, request, apply, loggers=True, brokers=apply_broker)


async def alter_broker_configs(
    broker: Broker, resource_name: str, changes: dict[str, str | None], validate_only: bool
) -> None:
    """Check KIP-226 changes of a BROKER resource (``DynamicConfigError``: INVALID_REQUEST with
    Kafka's message), then store them through the controller (ConfigRecords)."""
    check_changes(resource_name, changes, broker.config.raw)
    await broker.controller.alter_broker_configs(resource_name, changes, validate_only=validate_only)


def _apply_ops(current: Mapping[str, str], ops: Any, broker: Broker) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    defaults = {c["name"]: c["value"] for c in describe_topic_configs(broker, "", overrides={})}
    for op in ops:
        if op.config_operation == OP_SET:
            changes[op.name] = op.value
        elif op.config_operation == OP_DELETE:
            changes[op.name] = None
        elif op.config_operation in (OP_APPEND, OP_SUBTRACT):
            base = changes.get(op.name) or current.get(op.name) or defaults.get(op.name) or ""
            items = [i for i in base.split(",") if i]
            added = [i for i in (op.value or "").split(",") if i]
            if op.config_operation == OP_APPEND:
                items += [i for i in added if i not in items]
            else:
                items = [i for i in items if i not in added]
            changes[op.name] = ",".join(items)
        else:
            raise MetadataError(ErrorCode.INVALID_REQUEST, f"config operation {op.config_operation} is unknown")
    return changes


BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2  # DescribeCluster v1+ ``endpoint_type`` (KIP-919)


def handle_describe_cluster(broker: Broker, request: Request) -> Any:
    """DescribeCluster (KIP-700): the brokers' endpoints of the listener the request came in on.

    v1+ asks for an ``endpoint_type`` (KIP-919): 1 the brokers; 2 the controllers, which the Java
    AdminClient asks for with ``bootstrap.controllers`` (``kafka-metadata-quorum
    --bootstrap-controller``). A node with the controller role answers 2 on a listener that
    serves the quorum (its controller listener, or any listener in pylog's single-listener mode)
    with the voters in effect (``controller.quorum.voters``, or the log's KIP-853 voter set) and the
    quorum leader as ``controller_id``;
    elsewhere it answers MISMATCHED_ENDPOINT_TYPE, and an unknown type UNSUPPORTED_ENDPOINT_TYPE,
    as Kafka's brokers and controllers do."""
    image = broker.image()
    listener = request.connection.listener
    wanted = request.body.endpoint_type
    if wanted == CONTROLLER_ENDPOINTS:
        return _describe_controllers(broker, listener)
    if wanted != BROKER_ENDPOINTS:
        return _describe_cluster_error(
            broker, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {wanted}", wanted
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "endpoint_type": 1,
        "cluster_id": image.cluster_id,
        "controller_id": image.controller_id,
        "brokers": [  # the endpoints of the listener the request came in on
            {"broker_id": b.node_id, "host": endpoint[0], "port": endpoint[1], "rack": b.rack}
            for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
            if (endpoint := b.endpoint(listener)) is not None
        ],
        # KIP-430: no authorizer allows every operation (with one, acl.cluster_rules replaces this)
        **(
            {"cluster_authorized_operations": ALL_CLUSTER_OPERATIONS}
            if request.body.include_cluster_authorized_operations
            else {}
        ),
    }


def _describe_controllers(broker: Broker, listener: str) -> Mapping[str, Any]:
    config = broker.config
    serves_quorum = (
        broker.raft is not None
        and config.kraft_enabled
        and "controller" in config["process.roles"]
        and broker.listener_policy.is_controller(listener)
    )
    if not serves_quorum:
        return _describe_cluster_error(
            broker,
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
            BROKER_ENDPOINTS,
        )
    assert broker.raft is not None
    voters = broker.raft.voter_endpoints()  # the voter set in effect (KIP-853: from the log)
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "endpoint_type": CONTROLLER_ENDPOINTS,
        "cluster_id": broker.image().cluster_id,
        "controller_id": broker.raft.leader_id,
        "brokers": [
            {"broker_id": voter, "host": host, "port": port, "rack": None}
            for voter, (host, port) in sorted(voters.items())
        ],
    }


def _describe_cluster_error(broker: Broker, code: int, message: str, endpoint_type: int) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "endpoint_type": endpoint_type,
        "cluster_id": broker.image().cluster_id,
        "controller_id": -1,
        "brokers": [],
    }
