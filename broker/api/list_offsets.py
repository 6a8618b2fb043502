"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3), or the first offset with a
timestamp at or after T. Latest is the high watermark, or the last stable offset for
read_committed (v2+). v0 answers with ``old_style_offsets``. No match for a timestamp: -1.

Tiered storage (KIP-405, KIP-1005): earliest (-2) is the partition's log start, in the remote
tier when it holds older data; earliest-local (-4) the local log start offset; latest-tiered
(-5) the last offset copied to the tier, -1 (epoch -1) when none or the topic is not tiered, as
Kafka's ``UnifiedLog.fetchOffsetByTimestamp``. A timestamp older than the local log's records is
looked up in the tier's segments below the local log start, in a worker thread (Kafka's
``RemoteLogManager.findOffsetByTimestamp``); the local log answers when they hold none."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.log.errors import LogError
from broker.log.log import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from broker.log.remote.storage import RemoteStorageException
from broker.replication.replica_manager import PartitionError

READ_COMMITTED = 1
LATEST_TIERED_TIMESTAMP = -5  # KIP-1005


def handle_list_offsets(broker: Broker, request: Request) -> Any:
    body = request.body
    read_committed = request.version >= 2 and body.isolation_level == READ_COMMITTED
    topics = []
    for topic in body.topics:
        partitions = [_one(broker, request.version, topic.name, p, read_committed) for p in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    response = {"throttle_time_ms": 0, "topics": topics}
    pending = [p for t in topics for p in t["partitions"] if "_tiered" in p]
    if pending:
        return _look_up_tiered(response, pending)
    return response


async def _look_up_tiered(response: Mapping[str, Any], pending: list[dict[str, Any]]) -> Mapping[str, Any]:
    """Answer the timestamp lookups the tier may hold (each in a worker thread); the local
    answer already in the entry stands when the tier has none or fails."""
    for entry in pending:
        rlm, topic, index, target, timestamp_ms, version = entry.pop("_tiered")
        try:
            found = await asyncio.to_thread(rlm.offset_for_timestamp, topic, index, target, timestamp_ms)
        except RemoteStorageException:
            found = None
        if found is not None:
            epoch = rlm.epoch_for_offset(topic, index, found[0])
            entry.clear()
            entry.update(_entry(version, index, found[0], found[1], epoch))
    return response


def _one(broker: Broker, version: int, topic: str, part: Any, read_committed: bool) -> dict[str, Any]:
    index = part.partition_index
    try:
        log = broker.replicas.leader_log(topic, index, part.current_leader_epoch)
        leader_epoch = broker.image().topics[topic].partitions[index].leader_epoch
        rm = broker.replicas
        last_fetchable = rm.last_stable_offset(log) if read_committed else rm.high_watermark(log)
        found: tuple[int, int] | None
        if part.timestamp == LATEST_TIMESTAMP:
            found = (last_fetchable, -1)
        elif part.timestamp == EARLIEST_TIMESTAMP:
            rlm = getattr(broker, "remote_log", None)
            found = (rlm.log_start_offset(topic, index, log) if rlm is not None else log.log_start_offset, -1)
        elif part.timestamp == EARLIEST_LOCAL_TIMESTAMP:
            found = (log.log_start_offset, -1)
        elif part.timestamp == LATEST_TIERED_TIMESTAMP:
            rlm = getattr(broker, "remote_log", None)
            tiered = (
                rlm.highest_tiered_offset(topic, index) if rlm is not None and log.config.remote_storage_enable else -1
            )
            if tiered < 0:
                return _entry(version, index, -1, -1, -1)
            found = (tiered, -1)
            leader_epoch = broker.replicas.get_partition(topic, index).epochs.epoch_for_offset(tiered)  # type: ignore[union-attr]
        else:
            found = log.fetch_offset_by_timestamp(part.timestamp)
            if found is not None and found[0] >= last_fetchable:
                found = None  # as Kafka: only offsets a consumer of this isolation level may fetch
            rlm = getattr(broker, "remote_log", None)
            if (
                part.timestamp >= 0
                and rlm is not None
                and rlm.tiered_timestamp_candidate(topic, index, log, part.timestamp)
            ):
                offset, timestamp = found if found is not None else (-1, -1)
                entry = _entry(version, index, offset, timestamp, leader_epoch if found is not None else None)
                entry["_tiered"] = (rlm, topic, index, log, part.timestamp, version)  # handle_list_offsets
                return entry
    except (PartitionError, LogError) as exc:
        return {"partition_index": index, "error_code": exc.code, "old_style_offsets": []}
    offset, timestamp = found if found is not None else (-1, -1)
    return _entry(version, index, offset, timestamp, leader_epoch if found is not None else None)


def _entry(version: int, index: int, offset: int, timestamp: int, leader_epoch: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": index, "error_code": 0, "timestamp": timestamp, "offset": offset}
    if leader_epoch is not None:
        entry["leader_epoch"] = leader_epoch
    if version == 0:
        entry["old_style_offsets"] = [offset] if offset >= 0 else []
    return entry
