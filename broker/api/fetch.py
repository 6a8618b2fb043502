"""Fetch (1): whole batches straight from segment files, with long-poll.

- Records are ``FileSlice`` s of segment files; the network layer sends them with ``sendfile``.
  Nothing is decoded. A fetch that starts mid-batch gets the whole batch (the client skips).
- Limits: ``partition_max_bytes`` per partition and ``max_bytes`` per response; the first batch
  of the first non-empty partition is returned whole even when larger (KIP-74), so a consumer
  always makes progress.
- Long-poll: with fewer than ``min_bytes`` available, the fetch waits until an append to one
  of its partitions or ``max_wait_ms``, then answers with what is there.
- Isolation: read_committed (1) reads up to the last stable offset (LSO) and gets the aborted
  transactions (producer id, first offset) that overlap the returned batches, from the segments'
  ``.txnindex``; read_uncommitted (0) reads up to the high watermark and gets a null list. Both
  see the partition's real LSO in ``last_stable_offset`` (KIP-98).
- v13+ name topics by id; an unknown id is UNKNOWN_TOPIC_ID.
- Three entry points by who asks: the KIP-595 metadata quorum (``broker.api.raft``), a follower
  replica (``replica_id`` ≥ 0, or ``replica_state`` from v15: ``ReplicaManager.read_for_follower``
  reads up to the log end, records the follower's progress and answers ``diverging_epoch`` when
  its ``last_fetched_epoch`` does not match this log, Kafka documentation §4.7 "Replication", KIP-595/KIP-320), and a
  consumer (up to the high watermark or LSO). Followers wait for appends, consumers for the
  high watermark to move.
- Tiered storage (KIP-405): a consumer's offset below the local log start but at or above the
  log start is served from the remote tier: the remote segment holding it is read in a worker
  thread (``RemoteLogManager.read_remote``: its offset index positions the read, whole batches
  come back, with the aborted transactions of its transaction index for read_committed), and
  ``log_start_offset`` is the partition's (remote) log start. A follower below the local log
  start whose offset is in the tier gets OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405 "Follower
  Replication"; it rebuilds from the tier, ``broker.replication.fetcher``).
- Fetch sessions (KIP-227) are not kept: the response's ``session_id`` is always 0, which tells
  clients to send full fetches (as a Kafka broker does when its session cache is full). A request
  for an existing incremental session gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.api.raft import handle_metadata_fetch
from broker.log.errors import LogError
from broker.log.remote.manager import RemoteLogManager
from broker.log.remote.metadata import RemoteLogSegmentMetadata
from broker.log.remote.storage import RemoteResourceNotFoundException, RemoteStorageException
from broker.quota.replication import ReplicationThrottles
from broker.raft.rpc import is_metadata_fetch
from broker.replication.replica_manager import PartitionError
from pyspark_log.wire.errors import ErrorCode

READ_COMMITTED = 1


def handle_fetch(broker: Broker, request: Request) -> Any:
    body = request.body
    if broker.raft is not None and is_metadata_fetch(request.version, body):
        return handle_metadata_fetch(broker, request)  # KIP-595 replication (broker.api.raft)
    if request.version >= 7 and body.session_id != 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "responses": []}
    replica_id = follower_id(request.version, body)
    first = _read_all(broker, request, replica_id, first_read=True)
    if first.remote:
        return _read_remote(broker, first)
    if first.bytes_read >= body.min_bytes or body.max_wait_ms <= 0 or first.has_error:
        return first.body
    return _long_poll(broker, request, replica_id, time.monotonic() + body.max_wait_ms / 1000)


def follower_id(version: int, body: Any) -> int:
    """The fetching replica's broker id, or -1 for a consumer."""
    if version >= 15:
        state = body["replica_state"]
        return int(state["replica_id"]) if state else -1
    return int(body["replica_id"])


async def _long_poll(broker: Broker, request: Request, replica_id: int, deadline: float) -> Mapping[str, Any]:
    """Wait for appends until ``min_bytes`` are there or the deadline passes.

    Each pass reads before it waits, with no await between the read and the waiter's
    registration in ``wait_for_data``: an append that lands after ``handle_fetch``'s first read
    but before this coroutine first runs (it starts on a later loop iteration) is seen here
    instead of being slept through until ``max_wait_ms``."""
    partitions = [(t, p.partition) for t, p in _wanted(broker, request) if t is not None]
    while True:
        result = _read_all(broker, request, replica_id, first_read=False)
        if result.remote:
            return await _read_remote(broker, result)
        if result.bytes_read >= request.body.min_bytes or result.has_error:
            return result.body
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            return result.body
        await broker.replicas.wait_for_data(partitions, remaining_ms, follower=replica_id >= 0)


def _wanted(broker: Broker, request: Request) -> list[tuple[str | None, Any]]:
    image = broker.image()
    out: list[tuple[str | None, Any]] = []
    for topic in request.body.topics:
        name = topic.topic if request.version < 13 else image.topic_ids.get(topic.topic_id)
        out.extend((name, part) for part in topic.partitions)
    return out


class _RemoteRead:
    """A partition entry whose records come from the remote tier (filled by ``_read_remote``)."""

    __slots__ = ("max_bytes", "max_offset", "md", "min_one", "offset", "read_committed")

    def __init__(
        self, md: RemoteLogSegmentMetadata, offset: int, max_bytes: int, max_offset: int, *,
        read_committed: bool, min_one: bool,
    ) -> None:  # fmt: skip
        self.min_one = min_one
        self.md = md
        self.offset = offset
        self.max_bytes = max_bytes
        self.max_offset = max_offset
        self.read_committed = read_committed


class _ReadPass:
    __slots__ = ("body", "bytes_read", "has_error", "remote")

    def __init__(self) -> None:
        self.body: dict[str, Any] = {}
        self.bytes_read = 0
        self.has_error = False
        self.remote: list[dict[str, Any]] = []  # entries whose "records" is a _RemoteRead


async def _read_remote(broker: Broker, result: _ReadPass) -> Mapping[str, Any]:
    """Fill the tiered entries of ``result`` from the remote tier, each in a worker thread."""
    rlm = _remote_log(broker)
    assert rlm is not None
    for entry in result.remote:
        want: _RemoteRead = entry["records"]
        try:
            data, aborted = await asyncio.to_thread(
                rlm.read_remote, want.md, want.offset, want.max_bytes, want.max_offset,
                read_committed=want.read_committed, min_one_batch=want.min_one,
            )  # fmt: skip
        except RemoteResourceNotFoundException:  # deleted by remote retention meanwhile
            entry.update(_error(entry["partition_index"], ErrorCode.OFFSET_OUT_OF_RANGE))
            continue
        except RemoteStorageException:
            entry.update(_error(entry["partition_index"], ErrorCode.KAFKA_STORAGE_ERROR))
            continue
        entry["records"] = data
        if want.read_committed:
            entry["aborted_transactions"] = _aborted(aborted)
    return result.body


def _read_all(broker: Broker, request: Request, replica_id: int, *, first_read: bool) -> _ReadPass:
    """Read every partition of the request; a follower's position is recorded on the first read
    only (``ReplicaManager.read_for_follower``)."""
    # Fields are read with [] on this path: Message attribute access costs a failed lookup first.
    body = request.body
    version = request.version
    topic_ids = broker.image().topic_ids
    read_committed = version >= 4 and body["isolation_level"] == READ_COMMITTED
    result = _ReadPass()
    budget = body["max_bytes"] if version >= 3 else 2**31 - 1
    responses = []
    for topic in body["topics"]:
        name = topic["topic"] if version < 13 else topic_ids.get(topic["topic_id"])
        partitions = []
        for part in topic["partitions"]:
            if name is None:
                partitions.append(_error(part["partition"], ErrorCode.UNKNOWN_TOPIC_ID))
                result.has_error = True
                continue
            max_bytes = max(0, min(part["partition_max_bytes"], budget))
            entry = _read_one(
                broker, name, part, max_bytes, read_committed, replica_id=replica_id,
                min_one=result.bytes_read == 0, first_read=first_read,
            )  # fmt: skip
            records = entry.get("records")
            if isinstance(records, _RemoteRead):
                result.remote.append(entry)
                size = min(max_bytes, records.md.segment_size_bytes)
            else:
                size = len(records) if records is not None else 0
            result.bytes_read += size
            budget -= size
            result.has_error |= entry["error_code"] != 0
            partitions.append(entry)
        responses.append({"topic": name or "", "topic_id": topic["topic_id"], "partitions": partitions})
    result.body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
    return result


def _read_one(
    broker: Broker, topic: str, part: Any, max_bytes: int, read_committed: bool, *, replica_id: int, min_one: bool,
    first_read: bool = True,
) -> dict:  # fmt: skip
    partition = part["partition"]
    try:
        if replica_id >= 0:
            moved = _moved_to_tier(broker, topic, part)
            if moved is not None:
                return moved
            read = broker.replicas.read_for_follower(
                replica_id, topic, partition, part["fetch_offset"], max_bytes,
                current_leader_epoch=part["current_leader_epoch"], last_fetched_epoch=part["last_fetched_epoch"],
                min_one_batch=min_one, log_start_offset=part["log_start_offset"], record_position=first_read,
            )  # fmt: skip
        else:
            tiered = _tiered(broker, topic, part, max_bytes, read_committed, min_one=min_one)
            if tiered is not None:
                return tiered
            read = broker.replicas.read(
                topic, partition, part["fetch_offset"], max_bytes, read_committed=read_committed,
                current_leader_epoch=part["current_leader_epoch"], min_one_batch=min_one,
            )  # fmt: skip
    except PartitionError as exc:
        return _error(partition, exc.code)
    except LogError as exc:
        entry = _error(partition, exc.code)
        hosted = broker.replicas.get_partition(topic, partition)
        if hosted is not None:
            # a follower out of range learns where the leader's log starts and ends from these
            entry["high_watermark"] = hosted.log.log_end_offset if replica_id >= 0 else hosted.high_watermark
            entry["log_start_offset"] = hosted.log.log_start_offset
            rlm = _remote_log(broker)
            if replica_id < 0 and rlm is not None:
                entry["log_start_offset"] = rlm.log_start_offset(topic, partition, hosted.log)
        return entry
    records = read.records
    throttles = broker.replication_throttles
    if replica_id >= 0 and throttles is not None and throttles.leader_throttled(topic, partition):
        records = _leader_throttle(broker, throttles, topic, partition, replica_id=replica_id, records=records)
    log_start = read.log_start_offset
    rlm = _remote_log(broker)
    if replica_id < 0 and rlm is not None:
        hosted = broker.replicas.get_partition(topic, partition)
        if hosted is not None:
            log_start = rlm.log_start_offset(topic, partition, hosted.log)
    entry = {
        "partition_index": partition,
        "error_code": 0,
        "high_watermark": read.high_watermark,
        "last_stable_offset": read.last_stable_offset,
        "log_start_offset": log_start,
        "aborted_transactions": _aborted(read.aborted_transactions) if read_committed else None,
        "preferred_read_replica": -1,
        "records": records,
    }
    if read.diverging_epoch is not None:
        entry["diverging_epoch"] = {"epoch": read.diverging_epoch[0], "end_offset": read.diverging_epoch[1]}
    return entry


def _remote_log(broker: Broker) -> RemoteLogManager | None:
    return getattr(broker, "remote_log", None)  # unit tests' stand-in brokers have none


def _moved_to_tier(broker: Broker, topic: str, part: Any) -> dict[str, Any] | None:
    """KIP-405: a follower below this leader's local log start whose offset is in the tier gets
    OFFSET_MOVED_TO_TIERED_STORAGE with the local log start and the log end (it restarts there
    and rebuilds from the tier, ``broker.replication.fetcher``)."""
    rlm = _remote_log(broker)
    hosted = broker.replicas.get_partition(topic, part["partition"]) if rlm is not None else None
    if rlm is None or hosted is None or not hosted.is_leader:
        return None
    if not rlm.moved_to_tier(topic, part["partition"], hosted.log, part["fetch_offset"]):
        return None
    entry = _error(part["partition"], ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE)
    entry["high_watermark"] = hosted.log.log_end_offset
    entry["log_start_offset"] = hosted.log.log_start_offset
    return entry


def _tiered(
    broker: Broker, topic: str, part: Any, max_bytes: int, read_committed: bool, *, min_one: bool
) -> dict | None:
    """A consumer entry to be read from the remote tier (records a ``_RemoteRead``), or None
    when the offset is not below the local log start of a tiered partition led here. Raises
    PartitionError (not the leader, fenced epoch) as a local read would."""
    rlm = _remote_log(broker)
    offset = part["fetch_offset"]
    if rlm is None:
        return None
    hosted = broker.replicas.get_partition(topic, part["partition"])
    if hosted is None or not hosted.is_leader or offset >= hosted.log.log_start_offset:
        return None
    target = broker.replicas.leader_log(topic, part["partition"], part["current_leader_epoch"])
    if not target.config.remote_storage_enable:
        return None
    log_start = rlm.log_start_offset(topic, part["partition"], target)
    md = rlm.segment_for(topic, part["partition"], offset) if offset >= log_start else None
    if md is None:
        return None  # not in the tier: the local read answers OFFSET_OUT_OF_RANGE
    lso = hosted.last_stable_offset()
    return {
        "partition_index": part["partition"],
        "error_code": 0,
        "high_watermark": hosted.high_watermark,
        "last_stable_offset": lso,
        "log_start_offset": log_start,
        "aborted_transactions": [] if read_committed else None,
        "preferred_read_replica": -1,
        "records": _RemoteRead(
            md,
            offset,
            max_bytes,
            lso if read_committed else hosted.high_watermark,
            read_committed=read_committed,
            min_one=min_one,
        ),
    }


def _leader_throttle(
    broker: Broker, throttles: ReplicationThrottles, topic: str, partition: int, *, replica_id: int, records: Any
) -> Any:
    """A throttled partition's records for a follower (``broker.quota.replication``): none while
    the leader's rate is over its bound and the follower is not in the ISR (its fetch position
    still counted), else the records, whose bytes are recorded."""
    hosted = broker.replicas.get_partition(topic, partition)
    in_sync = hosted is not None and replica_id in hosted.isr
    if throttles.leader_holds_back(topic, partition, in_sync):
        return b""
    throttles.leader.record(len(records) if records is not None else 0)
    return records


def _aborted(aborted: list[Any] | None) -> list[dict[str, int]]:
    if not aborted:
        return []
    return [{"producer_id": txn.producer_id, "first_offset": txn.first_offset} for txn in aborted]


def _error(partition: int, code: int) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "records": b"",
    }
