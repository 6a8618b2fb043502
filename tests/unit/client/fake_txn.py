"""``FakeTxnCluster``: the in-memory fake cluster plus a small model of Kafka's producer state and
transaction coordinator (KIP-98), for the client's idempotence and transaction unit tests.

Produce checks per (partition, producer id): an older epoch is INVALID_PRODUCER_EPOCH, a newer
one must start at sequence 0, a batch among the last five is a duplicate (answered with its
original offset, not written), a gap is OUT_OF_ORDER_SEQUENCE_NUMBER. Transactional batches need
their partition added first (else INVALID_TXN_STATE). EndTxn writes COMMIT/ABORT control batches
and records aborted ranges, which Fetch returns under read_committed (stopping at the LSO).
Steering: ``produce_errors`` (inherited), ``txn_errors[api_key]`` (codes to answer next),
``drop_next_produce`` (append, then drop the connection: the client must retry).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from pyspark_log.records.control import ControlType, encode_control_batch
from pyspark_log.records.header import iter_batch_headers, set_base_offset
from pyspark_log.wire import ApiKey, ErrorCode

from .fake_broker import FakeCluster


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=5))  # first, last, offset

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


@dataclass
class TxnEntry:
    producer_id: int
    epoch: int
    state: str = "Empty"  # Empty, Ongoing, CompleteCommit, CompleteAbort
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    pending_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)


class FakeTxnCluster(FakeCluster):
    def __init__(self, nodes: int = 1, **kwargs: Any) -> None:
        super().__init__(nodes, **kwargs)
        for key in (
            ApiKey.INIT_PRODUCER_ID,
            ApiKey.ADD_PARTITIONS_TO_TXN,
            ApiKey.ADD_OFFSETS_TO_TXN,
            ApiKey.END_TXN,
            ApiKey.TXN_OFFSET_COMMIT,
        ):
            self.api_versions[key] = (0, 4 if key == ApiKey.INIT_PRODUCER_ID else 3)
        self.next_producer_id = 1000
        self.producers: dict[tuple[str, int], dict[int, ProducerEntry]] = defaultdict(dict)
        self.txns: dict[str, TxnEntry] = {}
        self.txn_errors: dict[int, deque[int]] = defaultdict(deque)
        self.open_txn_first_offset: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
        self.aborted: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)  # (pid, first offset)
        self.duplicates = 0

    def _queued(self, api: int) -> int:
        q = self.txn_errors.get(api)
        return q.popleft() if q else 0

    # -- idempotent produce ------------------------------------------------------------------------

    def _h_produce(self, node: int, version: int, req: Any) -> dict[str, Any] | None:
        responses = []
        for topic in req.topic_data:
            parts = []
            for pd in topic.partition_data:
                parts.append({"index": pd.index, **self._produce_partition(node, topic.name, pd, req)})
            responses.append({"name": topic.name, "partition_responses": parts})
        if self.drop_next_produce:
            self.drop_next_produce -= 1
            return {"__drop__": True}
        if req.acks == 0:
            return None
        return {"responses": responses}

    def _produce_partition(self, node: int, topic: str, pd: Any, req: Any) -> dict[str, Any]:
        key = (topic, pd.index)
        queued = self.produce_errors.get(key)
        if queued:
            return {"error_code": queued.popleft(), "base_offset": -1, "log_start_offset": 0}
        if topic not in self.topics or pd.index >= self.topics[topic]:
            return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "base_offset": -1}
        if self.leader(topic, pd.index) != node:
            return {"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "base_offset": -1}
        buf = bytearray(bytes(pd.records))
        ((_, header),) = list(iter_batch_headers(buf))
        plog = self.logs[key]
        pid = header.producer_id
        if pid >= 0:
            state = self.producers[key].get(pid)
            first, last = header.base_sequence, header.base_sequence + header.last_offset_delta
            if state is not None:
                if header.producer_epoch < state.epoch:
                    return {"error_code": ErrorCode.INVALID_PRODUCER_EPOCH, "base_offset": -1}
                if header.producer_epoch == state.epoch:
                    for f, lst, off in state.batches:
                        if (f, lst) == (first, last):
                            self.duplicates += 1
                            return {"error_code": 0, "base_offset": off}
                    if first != state.last_seq + 1:
                        return {"error_code": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "base_offset": -1}
                elif first != 0:
                    return {"error_code": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "base_offset": -1}
            elif first != 0:
                return {"error_code": ErrorCode.UNKNOWN_PRODUCER_ID, "base_offset": -1, "log_start_offset": 0}
            if header.is_transactional:
                txn = next((t for t in self.txns.values() if t.producer_id == pid), None)
                if txn is None or key not in txn.partitions or txn.epoch != header.producer_epoch:
                    return {"error_code": ErrorCode.INVALID_TXN_STATE, "base_offset": -1}
                self.open_txn_first_offset[key].setdefault(pid, plog.next_offset)
            if state is None or header.producer_epoch != state.epoch:
                state = self.producers[key][pid] = ProducerEntry(header.producer_epoch)
            state.batches.append((first, last, plog.next_offset))
        base = plog.next_offset
        set_base_offset(buf, 0, base)
        plog.batches.append(bytes(buf))
        plog.next_offset += header.last_offset_delta + 1
        return {"error_code": 0, "base_offset": base}

    # -- read_committed fetch ----------------------------------------------------------------------

    def lso(self, key: tuple[str, int]) -> int:
        open_offsets = self.open_txn_first_offset.get(key) or {}
        return min(open_offsets.values(), default=self.logs[key].next_offset)

    def _h_fetch(self, node: int, version: int, req: Any) -> dict[str, Any]:
        resp = super()._h_fetch(node, version, req)
        if req.isolation_level != 1:
            return resp
        for topic in resp["responses"]:
            for part in topic["partitions"]:
                key = (topic["topic"], part["partition_index"])
                lso = self.lso(key)
                part["last_stable_offset"] = lso
                if part.get("error_code") or not part.get("records"):
                    continue
                kept = [
                    batch
                    for _, batch in _split(part["records"])
                    if next(iter_batch_headers(batch))[1].base_offset < lso
                ]
                part["records"] = b"".join(kept)
                part["aborted_transactions"] = [
                    {"producer_id": pid, "first_offset": first} for pid, first in self.aborted[key] if first < lso
                ]
        return resp

    def _h_list_offsets(self, node: int, version: int, req: Any) -> dict[str, Any]:
        resp = super()._h_list_offsets(node, version, req)
        if getattr(req, "isolation_level", 0) == 1:
            for topic, asked in zip(resp["topics"], req.topics, strict=True):
                for part, p in zip(topic["partitions"], asked.partitions, strict=True):
                    if p.timestamp == -1:
                        part["offset"] = self.lso((topic["name"], part["partition_index"]))
        return resp

    # -- transaction coordinator -------------------------------------------------------------------

    def _h_init_producer_id(self, node: int, version: int, req: Any) -> dict[str, Any]:
        code = self._queued(ApiKey.INIT_PRODUCER_ID)
        if code:
            return {"error_code": code, "producer_id": -1, "producer_epoch": -1}
        tid = req.transactional_id
        if tid is None:
            self.next_producer_id += 1
            return {"error_code": 0, "producer_id": self.next_producer_id, "producer_epoch": 0}
        txn = self.txns.get(tid)
        if txn is None:
            self.next_producer_id += 1
            txn = self.txns[tid] = TxnEntry(self.next_producer_id, 0)
            return {"error_code": 0, "producer_id": txn.producer_id, "producer_epoch": 0}
        if (
            version >= 3
            and req.producer_id >= 0
            and (req.producer_id, req.producer_epoch)
            != (
                txn.producer_id,
                txn.epoch,
            )
        ):
            return {"error_code": ErrorCode.PRODUCER_FENCED, "producer_id": -1, "producer_epoch": -1}
        if txn.state == "Ongoing":
            self._complete(txn, commit=False)
        txn.epoch += 1
        return {"error_code": 0, "producer_id": txn.producer_id, "producer_epoch": txn.epoch}

    def _check_txn(self, tid: str, pid: int, epoch: int) -> tuple[TxnEntry | None, int]:
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != pid:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != txn.epoch:
            return None, ErrorCode.PRODUCER_FENCED
        return txn, 0

    def _h_add_partitions_to_txn(self, node: int, version: int, req: Any) -> dict[str, Any]:
        txn, code = self._check_txn(
            req.v3_and_below_transactional_id, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch
        )
        code = self._queued(ApiKey.ADD_PARTITIONS_TO_TXN) or code
        if txn is not None and not code:
            txn.state = "Ongoing"
            for t in req.v3_and_below_topics:
                txn.partitions.update((t.name, p) for p in t.partitions)
        results = [
            {
                "name": t.name,
                "results_by_partition": [{"partition_index": p, "partition_error_code": code} for p in t.partitions],
            }
            for t in req.v3_and_below_topics
        ]
        return {"results_by_topic_v3_and_below": results}

    def _h_add_offsets_to_txn(self, node: int, version: int, req: Any) -> dict[str, Any]:
        txn, code = self._check_txn(req.transactional_id, req.producer_id, req.producer_epoch)
        code = self._queued(ApiKey.ADD_OFFSETS_TO_TXN) or code
        if txn is not None and not code:
            txn.state = "Ongoing"
            txn.groups.add(req.group_id)
        return {"error_code": code}

    def _h_txn_offset_commit(self, node: int, version: int, req: Any) -> dict[str, Any]:
        txn, code = self._check_txn(req.transactional_id, req.producer_id, req.producer_epoch)
        code = self._queued(ApiKey.TXN_OFFSET_COMMIT) or code
        topics = []
        for t in req.topics:
            for p in t.partitions:
                if txn is not None and not code:
                    txn.pending_offsets[(req.group_id, t.name, p.partition_index)] = p.committed_offset
            topics.append(
                {
                    "name": t.name,
                    "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
                }
            )
        return {"topics": topics}

    def _h_end_txn(self, node: int, version: int, req: Any) -> dict[str, Any]:
        code = self._queued(ApiKey.END_TXN)
        if code:
            return {"error_code": code}
        txn, code = self._check_txn(req.transactional_id, req.producer_id, req.producer_epoch)
        if txn is None:
            return {"error_code": code}
        if txn.state in ("CompleteCommit", "CompleteAbort"):
            done = (txn.state == "CompleteCommit") == req.committed
            return {"error_code": 0 if done else ErrorCode.INVALID_TXN_STATE}
        if txn.state != "Ongoing":
            return {"error_code": ErrorCode.INVALID_TXN_STATE}
        self._complete(txn, commit=req.committed)
        return {"error_code": 0}

    def _complete(self, txn: TxnEntry, *, commit: bool) -> None:
        kind = ControlType.COMMIT if commit else ControlType.ABORT
        for key in sorted(txn.partitions):
            first = self.open_txn_first_offset[key].pop(txn.producer_id, None)
            if not commit and first is not None:
                self.aborted[key].append((txn.producer_id, first))
            self.append(key[0], key[1], encode_control_batch(kind, txn.producer_id, txn.epoch, 0, 0))
        if commit:
            self.committed.update(txn.pending_offsets)
        txn.pending_offsets.clear()
        txn.partitions.clear()
        txn.groups.clear()
        txn.state = "CompleteCommit" if commit else "CompleteAbort"


def _split(buf: bytes) -> list[tuple[int, bytes]]:
    return [(pos, bytes(buf[pos : pos + h.size])) for pos, h in iter_batch_headers(buf)]
