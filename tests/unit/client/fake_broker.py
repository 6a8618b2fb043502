"""An in-memory Kafka cluster for client unit tests: real wire codec, no sockets, no processes.

``FakeCluster.connector`` plugs into the client's ``connector=`` seam: each connection gets an
``asyncio.StreamReader`` the fake feeds responses into and a writer whose ``write`` decodes
request frames with ``pyspark_log.wire`` and answers them like a (very small) broker would.
Tests steer it through plain attributes: ``produce_errors`` (codes to answer next, per
partition), ``leaders`` (partition -> node), ``api_versions`` (advertised ranges), ``requests``
(every decoded request, for assertions), ``refuse`` (nodes whose connects fail).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from pyspark_log.records.batch import decode_records
from pyspark_log.records.header import iter_batch_headers, set_base_offset
from pyspark_log.wire import ApiKey, ErrorCode, decode_request, encode_response
from pyspark_log.wire.versions import SUPPORTED_VERSIONS


@dataclass
class PartitionLog:
    batches: list[bytes] = field(default_factory=list)  # base offsets rewritten
    next_offset: int = 0
    log_start: int = 0


class FakeCluster:
    def __init__(
        self, nodes: int = 1, *, topics: dict[str, int] | None = None, auto_create_partitions: int = 3
    ) -> None:
        self.nodes = list(range(nodes))
        self.topics: dict[str, int] = dict(topics or {})
        self.logs: dict[tuple[str, int], PartitionLog] = defaultdict(PartitionLog)
        self.leaders: dict[tuple[str, int], int] = {}
        self.auto_create_partitions = auto_create_partitions
        self.api_versions: dict[int, tuple[int, int]] = dict(SUPPORTED_VERSIONS)
        self.api_versions.pop(ApiKey.INIT_PRODUCER_ID, None)
        self.max_api_versions_version = 3
        self.produce_errors: dict[tuple[str, int], deque[int]] = defaultdict(deque)
        self.requests: list[tuple[int, int, Any]] = []
        self.refuse: set[int] = set()
        self.drop_next_produce = 0
        self.response_delay_s = 0.0
        self.connections = 0
        self.auto_create = True
        self.committed: dict[tuple[str, str, int], int] = {}
        self.coordinator = 0
        self.coordinator_errors: deque[int] = deque()

    def leader(self, topic: str, partition: int) -> int:
        return self.leaders.get((topic, partition), partition % len(self.nodes))

    async def connector(self, host: str, port: int) -> tuple[asyncio.StreamReader, FakeWriter]:
        node = port - 9092
        if node in self.refuse or node not in self.nodes:
            raise ConnectionRefusedError(f"node {node} refuses")
        self.connections += 1
        reader = asyncio.StreamReader()
        return reader, FakeWriter(self, node, reader)

    def append(self, topic: str, partition: int, batch: bytes) -> None:
        """Append one encoded batch as a produce would (its base offset rewritten)."""
        plog = self.logs[(topic, partition)]
        buf = bytearray(batch)
        set_base_offset(buf, 0, plog.next_offset)
        plog.batches.append(bytes(buf))
        plog.next_offset += next(iter_batch_headers(buf))[1].last_offset_delta + 1

    def records(self, topic: str, partition: int) -> list[Any]:
        out = []
        for batch in self.logs[(topic, partition)].batches:
            out.extend(decode_records(batch)[1])
        return out

    # -- request handlers ------------------------------------------------------------------------

    def handle(self, node: int, api_key: int, version: int, req: Any) -> dict[str, Any] | None:
        self.requests.append((api_key, version, req))
        handler = getattr(self, f"_h_{ApiKey(api_key).name.lower()}")
        return handler(node, version, req)

    def _h_api_versions(self, node: int, version: int, req: Any) -> dict[str, Any]:
        keys = [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(self.api_versions.items())
        ]
        return {"error_code": 0, "api_keys": keys}

    def _h_metadata(self, node: int, version: int, req: Any) -> dict[str, Any]:
        names = list(self.topics) if req.topics is None else [t.name for t in req.topics]
        topics = []
        for name in names:
            if name not in self.topics:
                if req.allow_auto_topic_creation and self.auto_create:
                    self.topics[name] = self.auto_create_partitions
                    topics.append({"name": name, "error_code": ErrorCode.LEADER_NOT_AVAILABLE, "partitions": []})
                else:
                    topics.append({"name": name, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "partitions": []})
                continue
            parts = [
                {
                    "partition_index": p,
                    "error_code": 0,
                    "leader_id": self.leader(name, p),
                    "leader_epoch": 0,
                    "replica_nodes": [self.leader(name, p)],
                    "isr_nodes": [self.leader(name, p)],
                }
                for p in range(self.topics[name])
            ]
            topics.append({"name": name, "error_code": 0, "partitions": parts})
        brokers = [{"node_id": n, "host": "fake", "port": 9092 + n} for n in self.nodes]
        return {"brokers": brokers, "cluster_id": "fake-cluster", "controller_id": 0, "topics": topics}

    def _h_produce(self, node: int, version: int, req: Any) -> dict[str, Any] | None:
        responses = []
        for topic in req.topic_data:
            parts = []
            for pd in topic.partition_data:
                key = (topic.name, pd.index)
                queued = self.produce_errors.get(key)
                if queued:
                    parts.append({"index": pd.index, "error_code": queued.popleft(), "base_offset": -1})
                    continue
                if topic.name not in self.topics or pd.index >= self.topics[topic.name]:
                    parts.append(
                        {"index": pd.index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "base_offset": -1}
                    )
                    continue
                if self.leader(topic.name, pd.index) != node:
                    parts.append({"index": pd.index, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "base_offset": -1})
                    continue
                plog = self.logs[key]
                buf = bytearray(bytes(pd.records))
                base = plog.next_offset
                for pos, header in list(iter_batch_headers(buf)):
                    set_base_offset(buf, pos, plog.next_offset)
                    plog.batches.append(bytes(buf[pos : pos + header.size]))
                    plog.next_offset += header.last_offset_delta + 1
                parts.append({"index": pd.index, "error_code": 0, "base_offset": base})
            responses.append({"name": topic.name, "partition_responses": parts})
        if self.drop_next_produce:
            self.drop_next_produce -= 1
            return {"__drop__": True}
        if req.acks == 0:
            return None
        return {"responses": responses}

    def _h_fetch(self, node: int, version: int, req: Any) -> dict[str, Any]:
        responses = []
        for topic in req.topics:
            parts = []
            for p in topic.partitions:
                key = (topic.topic, p.partition)
                plog = self.logs[key]
                entry: dict[str, Any] = {
                    "partition_index": p.partition,
                    "high_watermark": plog.next_offset,
                    "last_stable_offset": plog.next_offset,
                    "log_start_offset": plog.log_start,
                    "aborted_transactions": None,
                }
                if topic.topic not in self.topics:
                    entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif not plog.log_start <= p.fetch_offset <= plog.next_offset:
                    entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    chunks, size = [], 0
                    for batch in plog.batches:
                        header = next(iter_batch_headers(batch))[1]
                        if header.last_offset < p.fetch_offset:
                            continue
                        if chunks and size + len(batch) > p.partition_max_bytes:
                            break
                        chunks.append(batch)
                        size += len(batch)
                    entry["error_code"] = 0
                    entry["records"] = b"".join(chunks)
                parts.append(entry)
            responses.append({"topic": topic.topic, "partitions": parts})
        return {"throttle_time_ms": 0, "error_code": 0, "responses": responses}

    def _h_list_offsets(self, node: int, version: int, req: Any) -> dict[str, Any]:
        topics = []
        for topic in req.topics:
            parts = []
            for p in topic.partitions:
                plog = self.logs[(topic.name, p.partition_index)]
                offset, ts = -1, -1
                if p.timestamp == -1:
                    offset = plog.next_offset
                elif p.timestamp == -2:
                    offset = plog.log_start
                else:
                    for rec in self.records(topic.name, p.partition_index):
                        if rec.timestamp >= p.timestamp:
                            offset, ts = rec.offset, rec.timestamp
                            break
                parts.append({"partition_index": p.partition_index, "error_code": 0, "offset": offset, "timestamp": ts})
            topics.append({"name": topic.name, "partitions": parts})
        return {"topics": topics}

    def _h_create_topics(self, node: int, version: int, req: Any) -> dict[str, Any]:
        out = []
        for t in req.topics:
            if t.name in self.topics:
                out.append({"name": t.name, "error_code": ErrorCode.TOPIC_ALREADY_EXISTS, "error_message": "exists"})
                continue
            if not req.validate_only:
                self.topics[t.name] = t.num_partitions if t.num_partitions > 0 else 1
            out.append({"name": t.name, "error_code": 0, "error_message": None})
        return {"topics": out}

    def _h_delete_topics(self, node: int, version: int, req: Any) -> dict[str, Any]:
        names = [t.name for t in req.topics] if version >= 6 else list(req.topic_names)
        out = []
        for name in names:
            code = 0 if self.topics.pop(name, None) is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            out.append({"name": name, "error_code": code})
        return {"responses": out}

    def _h_find_coordinator(self, node: int, version: int, req: Any) -> dict[str, Any]:
        code = self.coordinator_errors.popleft() if self.coordinator_errors else 0
        return {"error_code": code, "node_id": self.coordinator, "host": "fake", "port": 9092 + self.coordinator}

    def _h_offset_commit(self, node: int, version: int, req: Any) -> dict[str, Any]:
        code = ErrorCode.NOT_COORDINATOR if node != self.coordinator else 0
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if not code:
                    self.committed[(req.group_id, t.name, p.partition_index)] = p.committed_offset
                parts.append({"partition_index": p.partition_index, "error_code": code})
            topics.append({"name": t.name, "partitions": parts})
        return {"topics": topics}

    def _h_offset_fetch(self, node: int, version: int, req: Any) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for (group, topic, part), offset in sorted(self.committed.items()):
            if group == req.group_id:
                by_topic[topic].append(
                    {"partition_index": part, "committed_offset": offset, "metadata": "", "error_code": 0}
                )
        return {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()], "error_code": 0}


class FakeWriter:
    """Decodes request frames as they are written and feeds responses to the reader."""

    def __init__(self, cluster: FakeCluster, node: int, reader: asyncio.StreamReader) -> None:
        self.cluster = cluster
        self.node = node
        self.reader = reader
        self.buf = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("closed")
        self.buf += data
        while len(self.buf) >= 4:
            size = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + size:
                return
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            self._answer(frame)

    def _answer(self, frame: bytes) -> None:
        api_key, version = int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")
        if api_key == ApiKey.API_VERSIONS and version > self.cluster.max_api_versions_version:
            corr = int.from_bytes(frame[4:8], "big")
            keys = [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(self.cluster.api_versions.items())
            ]
            keys = [
                k
                if k["api_key"] != ApiKey.API_VERSIONS
                else {**k, "max_version": self.cluster.max_api_versions_version}
                for k in keys
            ]
            self._reply(
                encode_response(api_key, 0, corr, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": keys})
            )
            return
        header, req = decode_request(frame)
        body = self.cluster.handle(self.node, header.api_key, header.api_version, req)
        if body is None:
            return
        if body.get("__drop__"):
            self.close()
            return
        self._reply(encode_response(header.api_key, header.api_version, header.correlation_id, body))

    def _reply(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        delay = self.cluster.response_delay_s
        if delay:
            loop.call_later(delay, self._feed, data)
        else:
            loop.call_soon(self._feed, data)

    def _feed(self, data: bytes) -> None:
        if not self.closed:
            self.reader.feed_data(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.reader.feed_eof()
