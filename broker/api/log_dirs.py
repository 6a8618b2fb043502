"""DescribeLogDirs (35): every ``log.dirs`` entry of this broker with the partitions it holds;
AlterReplicaLogDirs (34): move replicas between them (KIP-113).

As Kafka 3.7's ``ReplicaManager.describeLogDirs``:

- one result per configured dir, ``log_dir`` its absolute path;
- an offline dir (``broker.log.dir_health``) answers KAFKA_STORAGE_ERROR with no topics and no
  space figures; an online one error 0, its partitions, and (v4, KIP-827) the filesystem's total
  and usable bytes;
- ``partition_size`` is the sum of the partition's segment (``.log``) file sizes, ``offset_lag``
  ``max(high watermark - log end offset, 0)`` (0 on a leader and on a caught-up follower; -1 when
  the partition has no replica state here), ``is_future_key`` false; a partition moving into the
  dir (AlterReplicaLogDirs) is listed there too with ``is_future_key`` true and ``offset_lag`` the
  current log's end offset minus the copy's (Kafka's ``getLogEndOffsetLag``);
- ``topics`` null describes every partition; otherwise only the named ones (unknown ones are
  left out, as Kafka does).

The filesystem figures come from ``statvfs`` in a worker thread (slow on a network filesystem).

AlterReplicaLogDirs needs ALTER on the CLUSTER (``broker.security.acl.checks``: every partition
CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka's ``handleAlterReplicaLogDirsRequest``); each
partition's answer is ``broker.replication.log_dir_mover.LogDirMover.alter``'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.api.context import Broker, Request
from broker.log.dir_health import disk_space
from broker.log.errors import KafkaStorageError
from pyspark_log.wire.errors import ErrorCode

INVALID_OFFSET_LAG = -1


def wanted_partitions(topics: Any) -> set[tuple[str, int]] | None:
    """The request's ``topics`` as a set of (topic, partition); None for all."""
    if topics is None:
        return None
    return {(t.topic, p) for t in topics for p in t.partitions}


def describe_dir(broker: Broker, directory: Path, wanted: set[tuple[str, int]] | None) -> dict[str, Any]:
    """One ``results`` entry without the space figures (pure: reads the log manager's memory)."""
    logs = broker.logs
    state = logs.dir_states[directory]
    path = str(directory.absolute())
    if state.offline:
        return {"error_code": KafkaStorageError.code, "log_dir": path, "topics": []}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    members = [(lg, False) for lg in logs.logs_in(directory)] + [(lg, True) for lg in logs.futures_in(directory)]
    for current, is_future in sorted(members, key=lambda m: (m[0].topic, m[0].partition, m[1])):
        if wanted is not None and (current.topic, current.partition) not in wanted:
            continue
        if is_future:
            source = logs.get_log(current.topic, current.partition)
            lag = INVALID_OFFSET_LAG if source is None else source.log_end_offset - current.log_end_offset
        else:
            hw = broker.replicas.high_watermark_of(current.topic, current.partition)
            lag = INVALID_OFFSET_LAG if hw is None else max(hw - current.log_end_offset, 0)
        by_topic.setdefault(current.topic, []).append(
            {
                "partition_index": current.partition,
                "partition_size": current.size_bytes,
                "offset_lag": lag,
                "is_future_key": is_future,
            }
        )
    topics = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    return {"error_code": ErrorCode.NONE, "log_dir": path, "topics": topics}


async def handle_describe_log_dirs(broker: Broker, request: Request) -> Mapping[str, Any]:
    wanted = wanted_partitions(request.body.topics)
    results = [describe_dir(broker, d, wanted) for d in broker.logs.log_dirs]
    if request.version >= 4:
        online = [Path(r["log_dir"]) for r in results if r["error_code"] == ErrorCode.NONE]
        spaces = await asyncio.to_thread(lambda: [disk_space(d) for d in online])
        space_of = dict(zip(map(str, online), spaces, strict=True))
        for result in results:
            result["total_bytes"], result["usable_bytes"] = space_of.get(result["log_dir"], (-1, -1))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def handle_alter_replica_log_dirs(broker: Broker, request: Request) -> Mapping[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for target in request.body.dirs:
        for topic in target.topics:
            for partition in topic.partitions:
                mover = broker.log_dir_mover
                code = (
                    ErrorCode.KAFKA_STORAGE_ERROR if mover is None else mover.alter(topic.name, partition, target.path)
                )
                by_topic.setdefault(topic.name, []).append({"partition_index": partition, "error_code": code})
    results = [{"topic_name": name, "partitions": parts} for name, parts in by_topic.items()]
    return {"throttle_time_ms": 0, "results": results}
