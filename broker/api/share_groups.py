"""KIP-932 share groups: ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
ShareAcknowledge (79), DescribeShareGroupOffsets (90) and AlterShareGroupOffsets (91), at Kafka
4.1.1's versions (``pyspark_log.wire.schemas.share_groups``), and the persister RPCs the share
coordinator serves to other brokers: Initialize/Read/Write/DeleteShareGroupState (83-86) and
ReadShareGroupStateSummary (87), v0 (``pyspark_log.wire.schemas.share_state``).

The handlers map topic ids to names with the metadata image and call the share-group driver
(``broker.coordinator.share_group.manager``), which decides everything. ShareFetch, as Kafka's:
acknowledgements in the request are applied first (their outcome in ``acknowledge_error_code``),
then records are acquired from every partition of the member's share session, up to
``max_records``; with none available it waits up to ``max_wait_ms`` for new data. The first
ShareFetch creates ``__share_group_state`` (``share.coordinator.state.topic.*``) if missing.
Share groups are served whenever the broker runs its group coordinator: pylog reports the
``share.version`` feature at level 1 (Kafka 4.1.1's production default), docs/compatibility.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Handler, Request
from broker.coordinator.share_group.coordinator import ShareCoordinator, StateKey, StateResult
from broker.coordinator.share_group.manager import FetchedPartition, ShareGroups
from broker.coordinator.share_group.partition import StateBatch
from broker.coordinator.share_group.records import SHARE_STATE_TOPIC
from broker.metadata.image import MetadataImage
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
NOT_REQUESTED_OPERATIONS = -(2**31)
STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}


def _client_host(request: Request) -> str:
    return "/" + request.connection.peer.rsplit(":", 1)[0].strip("[]")


def _leader(image: MetadataImage, topic: str, partition: int) -> dict[str, int]:
    t = image.topics.get(topic)
    part = t.partitions.get(partition) if t is not None else None
    if part is None:
        return {"leader_id": -1, "leader_epoch": -1}
    return {"leader_id": part.leader, "leader_epoch": part.leader_epoch}


# -- ShareGroupHeartbeat, ShareGroupDescribe ---------------------------------------------------------


def handle_share_group_heartbeat(broker: Broker, request: Request) -> Any:
    body = request.body
    share = broker.share
    if share is None:
        return _heartbeat_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    subscribed = tuple(body.subscribed_topic_names) if body.subscribed_topic_names is not None else None
    code, message, outcome = share.heartbeat(
        body.group_id, body.member_id or "", body.member_epoch, subscribed,
        rack_id=body.rack_id, client_id=request.header.client_id or "", client_host=_client_host(request),
    )  # fmt: skip
    if code != ErrorCode.NONE or outcome is None:
        return _heartbeat_error(code, message)
    assignment = None
    if outcome.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": share.topics[t][0], "partitions": sorted(ps)}
                for t, ps in sorted(outcome.assignment.items())
                if t in share.topics
            ]
        }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": outcome.member_id,
        "member_epoch": outcome.member_epoch,
        "heartbeat_interval_ms": int(share.group_config(body.group_id, "share.heartbeat.interval.ms")),
        "assignment": assignment,
    }


def _heartbeat_error(code: int, message: str | None = None) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def handle_share_group_describe(broker: Broker, request: Request) -> Any:
    body = request.body
    share = broker.share
    operations = GROUP_AUTHORIZED_OPERATIONS if body.include_authorized_operations else NOT_REQUESTED_OPERATIONS
    groups = []
    for group_id in body.group_ids:
        entry: dict[str, Any] = {
            "error_code": 0, "error_message": None, "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": [], "authorized_operations": operations,
        }  # fmt: skip
        if share is None:
            entry["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            groups.append(entry)
            continue
        error = share.manager.status(group_id)
        group = share.get(group_id) if error is None else None
        if error is not None:
            entry["error_code"] = error
        elif group is None:
            entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
            entry["error_message"] = f"Group {group_id} not found."
        else:
            entry.update(
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.group_epoch,
                assignor_name="simple",
                members=[
                    {
                        "member_id": m.member_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "assignment": {
                            "topic_partitions": [
                                {"topic_id": share.topics[t][0], "topic_name": t, "partitions": sorted(ps)}
                                for t, ps in sorted(m.assignment.items())
                                if t in share.topics
                            ]
                        },
                    }
                    for m in group.members.values()
                ],
            )
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}


# -- ShareFetch, ShareAcknowledge ----------------------------------------------------------------


def _acks(part: Any) -> list[tuple[int, int, list[int]]]:
    return [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in part.acknowledgement_batches]


def _top_error(code: int, message: str | None, *, fetch: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": [], "node_endpoints": [],
    }  # fmt: skip
    if fetch:
        out["acquisition_lock_timeout_ms"] = 0
    return out


def handle_share_fetch(broker: Broker, request: Request) -> Any:
    share = broker.share
    if share is None:
        return _top_error(ErrorCode.UNKNOWN_SERVER_ERROR, "share groups are not served", fetch=True)
    return _create_state_topic_then(broker, request, share)


async def _create_state_topic_then(broker: Broker, request: Request, share: ShareGroups) -> Mapping[str, Any]:
    if SHARE_STATE_TOPIC not in broker.image().topics and broker.groups is not None:
        await ensure_share_state_topic(broker, share)
    return await _share_fetch(broker, request, share)


async def ensure_share_state_topic(broker: Broker, share: ShareGroups) -> None:
    """Create ``__share_group_state`` unless it exists (a concurrent creation is success)."""
    from broker.api.find_coordinator import _capped_replication
    from broker.controller.errors import MetadataError

    config = share.config
    replication = _capped_replication(broker, SHARE_STATE_TOPIC, config.state_topic_replication_factor)
    configs = {
        **STATE_TOPIC_CONFIGS,
        "min.insync.replicas": str(min(config.state_topic_min_isr, replication)),
        "segment.bytes": str(config.state_topic_segment_bytes),
    }
    try:
        await broker.controller.create_topic(SHARE_STATE_TOPIC, config.state_topic_partitions, replication, configs)
        log.info("created %s with %d partition(s)", SHARE_STATE_TOPIC, config.state_topic_partitions)
    except MetadataError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("cannot create %s: %s", SHARE_STATE_TOPIC, exc.message)
    deadline = time.monotonic() + 5.0  # the metadata image names its leaders soon after
    while time.monotonic() < deadline:
        topic = broker.image().topics.get(SHARE_STATE_TOPIC)
        led = [p for p, part in topic.partitions.items() if part.leader == broker.node_id] if topic else []
        if (
            topic is not None
            and all(p.leader >= 0 for p in topic.partitions.values())
            and all(broker.replicas.get_partition(SHARE_STATE_TOPIC, p) is not None for p in led)
        ):
            return
        await asyncio.sleep(0.05)  # the controller's image reaches this broker's replica manager


async def _share_fetch(broker: Broker, request: Request, share: ShareGroups) -> Mapping[str, Any]:
    body = request.body
    if not body.group_id:
        return _top_error(ErrorCode.INVALID_REQUEST, "The request must contain a group id.", fetch=True)
    if not body.member_id:
        return _top_error(ErrorCode.INVALID_REQUEST, "The request must contain a member id.", fetch=True)
    image = broker.image()
    epoch = body.share_session_epoch
    code, message, session = share.open_session(body.group_id, body.member_id, epoch)
    if code != ErrorCode.NONE or session is None:
        return _top_error(code, message, fetch=True)
    # the partitions named in the request join the session; acknowledgements go first
    ack_results: dict[tuple[str, int], tuple[int, str | None]] = {}
    unknown: dict[uuid.UUID, list[int]] = {}
    for topic in body.topics:
        name = image.topic_ids.get(topic.topic_id)
        for part in topic.partitions:
            if name is None:
                unknown.setdefault(topic.topic_id, []).append(part.partition_index)
                continue
            if (name, part.partition_index) not in session.partitions:  # an admin may have reset it
                await share.revalidate((body.group_id, name, part.partition_index))
            session.partitions.add((name, part.partition_index))
            if part.acknowledgement_batches:
                ack_results[(name, part.partition_index)] = await share.acknowledge(
                    (body.group_id, name, part.partition_index), body.member_id, _acks(part)
                )
    for forgotten in body.forgotten_topics_data:
        name = image.topic_ids.get(forgotten.topic_id)
        for p in forgotten.partitions:
            if name is not None:
                session.partitions.discard((name, p))
    if epoch == -1:  # the final fetch: acknowledge, release the rest, close the session
        share.close_session(session)
        return _fetch_response(
            broker, share, body.group_id, {k: FetchedPartition() for k in ack_results}, ack_results, unknown
        )
    wanted = sorted(session.partitions)
    first = await _acquire(share, body, wanted)
    if any(f.acquired for f in first.values()) or body.max_wait_ms <= 0 or not wanted:
        return _fetch_response(broker, share, body.group_id, first, ack_results, unknown)
    return await _long_poll(
        broker, share, body, wanted, ack_results, unknown, time.monotonic() + body.max_wait_ms / 1000
    )


async def _acquire(
    share: ShareGroups, body: Any, wanted: list[tuple[str, int]]
) -> dict[tuple[str, int], FetchedPartition]:
    out: dict[tuple[str, int], FetchedPartition] = {}
    budget_records = body.max_records if body.max_records > 0 else 500
    budget_bytes = body.max_bytes if body.max_bytes > 0 else 2**31 - 1
    for topic, partition in wanted:
        if budget_records <= 0:
            out[(topic, partition)] = FetchedPartition()
            continue
        fetched = await share.fetch((body.group_id, topic, partition), body.member_id, budget_bytes, budget_records)
        out[(topic, partition)] = fetched
        budget_records -= sum(a.last_offset - a.first_offset + 1 for a in fetched.acquired)
        budget_bytes = max(1, budget_bytes - len(fetched.records or b""))
    return out


async def _long_poll(  # noqa: PLR0917
    broker: Broker, share: ShareGroups, body: Any, wanted: list[tuple[str, int]],
    acks: dict[tuple[str, int], tuple[int, str | None]], unknown: dict[uuid.UUID, list[int]], deadline: float,
) -> Mapping[str, Any]:  # fmt: skip
    """Wait for appends to the session's partitions (or the deadline), then acquire again. A
    released or expired record is seen at the next wake-up (at most ``max_wait_ms`` later)."""
    while True:
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        step = min(remaining_ms, 500)  # released / expired records are picked up within this
        if step > 0:
            await broker.replicas.wait_for_data(wanted, step)
        result = await _acquire(share, body, wanted)
        if any(f.acquired for f in result.values()) or remaining_ms <= 0 or time.monotonic() >= deadline:
            return _fetch_response(broker, share, body.group_id, result, acks, unknown)


def _fetch_response(  # noqa: PLR0917
    broker: Broker, share: ShareGroups, group_id: str, fetched: Mapping[tuple[str, int], FetchedPartition],
    acks: Mapping[tuple[str, int], tuple[int, str | None]], unknown: Mapping[uuid.UUID, list[int]],
) -> dict[str, Any]:  # fmt: skip
    image = broker.image()
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in sorted(set(fetched) | set(acks)):
        f = fetched.get((topic, partition), FetchedPartition())
        ack_code, ack_message = acks.get((topic, partition), (ErrorCode.NONE, None))
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "error_code": f.error,
                "error_message": f.message,
                "acknowledge_error_code": ack_code,
                "acknowledge_error_message": ack_message,
                "current_leader": _leader(image, topic, partition),
                "records": f.records or b"",  # Kafka sends empty records, never null (librdkafka refuses -1)
                "acquired_records": [
                    {"first_offset": a.first_offset, "last_offset": a.last_offset, "delivery_count": a.delivery_count}
                    for a in f.acquired
                ],
            }
        )
    responses = [
        {"topic_id": share.topics[t][0] if t in share.topics else uuid.UUID(int=0), "partitions": parts}
        for t, parts in by_topic.items()
    ]
    for topic_id, partitions in unknown.items():
        responses.append(
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                        "error_message": None,
                        "acknowledge_error_code": 0,
                        "acknowledge_error_message": None,
                        "current_leader": {"leader_id": -1, "leader_epoch": -1},
                        "records": b"",
                        "acquired_records": [],
                    }
                    for p in partitions
                ],
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "acquisition_lock_timeout_ms": share.lock_duration_ms(group_id),
        "responses": responses,
        "node_endpoints": [],
    }


def handle_share_acknowledge(broker: Broker, request: Request) -> Any:
    share = broker.share
    if share is None:
        return _top_error(ErrorCode.UNKNOWN_SERVER_ERROR, "share groups are not served", fetch=False)
    return _share_acknowledge(broker, request, share)


async def _share_acknowledge(broker: Broker, request: Request, share: ShareGroups) -> Mapping[str, Any]:
    body = request.body
    if not body.group_id or not body.member_id:
        return _top_error(
            ErrorCode.INVALID_REQUEST, "The request must contain a group id and a member id.", fetch=False
        )
    epoch = body.share_session_epoch
    if epoch == 0:
        return _top_error(
            ErrorCode.INVALID_SHARE_SESSION_EPOCH, "A share acknowledge request cannot open a share session.",
            fetch=False,
        )  # fmt: skip
    code, message, session = share.open_session(body.group_id, body.member_id, epoch)
    if code != ErrorCode.NONE or session is None:
        return _top_error(code, message, fetch=False)
    image = broker.image()
    responses = []
    for topic in body.topics:
        name = image.topic_ids.get(topic.topic_id)
        parts = []
        for part in topic.partitions:
            if name is None:
                result: tuple[int, str | None] = (ErrorCode.UNKNOWN_TOPIC_ID, None)
                leader = {"leader_id": -1, "leader_epoch": -1}
            else:
                result = await share.acknowledge(
                    (body.group_id, name, part.partition_index), body.member_id, _acks(part)
                )
                leader = _leader(image, name, part.partition_index)
            parts.append(
                {
                    "partition_index": part.partition_index,
                    "error_code": result[0],
                    "error_message": result[1],
                    "current_leader": leader,
                }
            )
        responses.append({"topic_id": topic.topic_id, "partitions": parts})
    if epoch == -1:
        share.close_session(session)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses, "node_endpoints": []}


# -- DescribeShareGroupOffsets, AlterShareGroupOffsets ----------------------------------------------


async def handle_describe_share_group_offsets(broker: Broker, request: Request) -> Any:
    share = broker.share
    image = broker.image()
    groups = []
    for g in request.body.groups:
        entry: dict[str, Any] = {"group_id": g.group_id, "topics": [], "error_code": 0, "error_message": None}
        if share is None:
            entry["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            groups.append(entry)
            continue
        error = share.manager.status(g.group_id)
        if error is not None:
            entry["error_code"] = error
            groups.append(entry)
            continue
        group = share.get(g.group_id)
        if g.topics is None:
            names = sorted(group.subscribed_topics()) if group is not None else []
            names += sorted(set(share.initialized.get(g.group_id, {})) - set(names))
            wanted = [(n, list(range(len(image.topics[n].partitions)))) for n in names if n in image.topics]
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
        for name, partitions in wanted:
            topic = image.topics.get(name)
            rows = []
            for p in partitions:
                if topic is None or p not in topic.partitions:
                    rows.append(_offset_row(p, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                start = await share.start_offset((g.group_id, name, p))
                rows.append(_offset_row(p, -1 if start is None else start, ErrorCode.NONE))
            entry["topics"].append(
                {"topic_name": name, "topic_id": topic.topic_id if topic else uuid.UUID(int=0), "partitions": rows}
            )
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}


def _offset_row(partition: int, start: int, code: int) -> dict[str, Any]:
    return {"partition_index": partition, "start_offset": start, "leader_epoch": -1, "error_code": code,
            "error_message": None}  # fmt: skip


async def handle_alter_share_group_offsets(broker: Broker, request: Request) -> Any:
    body = request.body
    share = broker.share
    image = broker.image()

    def answer(code: int, message: str | None = None, responses: list[Any] | None = None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": responses or []}

    if share is None:
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if SHARE_STATE_TOPIC not in image.topics and broker.groups is not None:
        await ensure_share_state_topic(broker, share)
    error = share.manager.status(body.group_id)
    if error is not None:
        return answer(error)
    group = share.groups.get(body.group_id)
    if group is not None and group.members:
        return answer(ErrorCode.NON_EMPTY_GROUP, f"The group {body.group_id} is not empty.")
    if group is None and share._other_kind(body.group_id):
        return answer(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {body.group_id} is not a share group.")
    responses = []
    for t in body.topics:
        topic = image.topics.get(t.topic_name)
        rows = []
        for p in t.partitions:
            if topic is None or p.partition_index not in topic.partitions:
                code: int = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                code = await share.alter_offset((body.group_id, t.topic_name, p.partition_index), p.start_offset)
            rows.append({"partition_index": p.partition_index, "error_code": code, "error_message": None})
        responses.append(
            {"topic_name": t.topic_name, "topic_id": topic.topic_id if topic else uuid.UUID(int=0), "partitions": rows}
        )
    return answer(ErrorCode.NONE, None, responses)


# -- the persister RPCs (the share coordinator's side) ----------------------------------------------


def _persister_handler(api: ApiKey) -> Handler:
    """InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
    DeleteShareGroupState (86), ReadShareGroupStateSummary (87): each partition of the request
    goes to this broker's share coordinator (``broker.coordinator.share_group.coordinator``)."""

    async def handle(broker: Broker, request: Request) -> Mapping[str, Any]:
        share = broker.share
        body = request.body
        results = []
        for topic in body.topics:
            rows = []
            for p in topic.partitions:
                key = (body.group_id, topic.topic_id, p.partition)
                if share is None or share.coordinator is None:
                    result = StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, "share groups are not served")
                else:
                    result = await _coordinator_call(share.coordinator, api, key, p)
                rows.append(_persister_row(api, p.partition, result))
            results.append({"topic_id": topic.topic_id, "partitions": rows})
        return {"results": results}

    return handle


async def _coordinator_call(coordinator: ShareCoordinator, api: ApiKey, key: StateKey, p: Any) -> StateResult:
    if api == ApiKey.INITIALIZE_SHARE_GROUP_STATE:
        return await coordinator.initialize(key, p.state_epoch, p.start_offset)
    if api == ApiKey.READ_SHARE_GROUP_STATE:
        return coordinator.read(key, p.leader_epoch)
    if api == ApiKey.WRITE_SHARE_GROUP_STATE:
        batches = [
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
        ]
        return await coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches)
    if api == ApiKey.DELETE_SHARE_GROUP_STATE:
        return await coordinator.delete(key)
    return coordinator.summary(key)


def _persister_row(api: ApiKey, partition: int, result: StateResult) -> dict[str, Any]:
    row: dict[str, Any] = {"partition": partition, "error_code": result.code, "error_message": result.message}
    state = result.state
    if api == ApiKey.READ_SHARE_GROUP_STATE:
        row.update(
            state_epoch=state.state_epoch if state else -1, start_offset=state.start_offset if state else -1,
            state_batches=[b.__dict__ for b in state.batches] if state else [],
        )  # fmt: skip
    elif api == ApiKey.READ_SHARE_GROUP_STATE_SUMMARY:
        row.update(
            state_epoch=state.state_epoch if state else -1, leader_epoch=state.leader_epoch if state else -1,
            start_offset=state.start_offset if state else -1,
        )  # fmt: skip
    return row


HANDLERS: dict[int, Handler] = {
    **{
        api: _persister_handler(api)
        for api in (
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            ApiKey.READ_SHARE_GROUP_STATE,
            ApiKey.WRITE_SHARE_GROUP_STATE,
            ApiKey.DELETE_SHARE_GROUP_STATE,
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        )
    },
    ApiKey.SHARE_GROUP_HEARTBEAT: handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: handle_share_group_describe,
    ApiKey.SHARE_FETCH: handle_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: handle_share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: handle_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: handle_alter_share_group_offsets,
}
