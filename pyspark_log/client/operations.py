"""Operator admin calls: DeleteRecords and the hanging-transaction tooling of KIP-664.

Functions of an ``AsyncAdmin`` (kept out of ``admin.py``), mirroring Kafka's ``Admin``:

* ``delete_records({tp: offset})`` (``Admin.deleteRecords``; offset -1: the high watermark) →
  ``{tp: low watermark}``: DeleteRecords to each partition's leader; the leader answers once
  every live replica moved its log start offset (or REQUEST_TIMED_OUT at ``timeout_ms``);
* ``describe_producers(partitions, broker_id=None)`` → ``{tp: [ProducerState]}``: DescribeProducers
  to each leader (or to ``broker_id``, any replica);
* ``list_transactions(...)`` → ``{broker id: [TransactionListing]}``: ListTransactions to every
  broker (each coordinates its own share of ``__transaction_state``), with Kafka's state,
  producer id and (KIP-994, v1) duration filters;
* ``describe_transactions(ids)`` → ``{id: TransactionDescription}``: DescribeTransactions to each
  id's coordinator (FindCoordinator key type 1);
* ``abort_transaction(spec)`` (``Admin.abortTransaction``): WriteTxnMarkers with an ABORT marker
  for the producer to the partition's leader, which ends its open transaction there (the LSO moves
  on and read_committed readers pass it).

Retriable failures (NOT_LEADER_OR_FOLLOWER, coordinator moves, broken connections) refresh the
metadata and retry until ``timeout_ms``; per-item errors are raised as the first item's
``KafkaError`` with ``errors`` mapping every failed item (as ``AsyncAdmin`` does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark_log.client.errors import UnknownTopicOrPartitionError, UnsupportedFeatureError, error_for
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError

if TYPE_CHECKING:
    from pyspark_log.client.admin import AsyncAdmin

HIGH_WATERMARK = -1  # delete_records: everything below the high watermark
_RETRY_PER_ITEM = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One producer id as a partition replica keeps it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int  # of its last transaction marker; -1: none yet
    current_transaction_start_offset: int  # first offset of its open transaction; -1: none


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's state name: Empty, Ongoing, PrepareCommit, ...


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1: no transaction started
    topic_partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    """What ``abort_transaction`` ends: ``producer_id`` at ``producer_epoch``'s open transaction
    on ``partition``, fenced by ``coordinator_epoch`` (Kafka's ``AbortTransactionSpec``)."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


def _raise(errors: dict[Any, KafkaError]) -> None:
    if errors:
        first = next(iter(errors.values()))
        first.errors = errors  # type: ignore[attr-defined]
        raise first


def _check_item(code: int, what: str, errors: dict[Any, KafkaError], key: Any, message: str | None = None) -> bool:
    """Record a failed item; raise the retriable ones so the whole call retries. True: ok."""
    if code == ErrorCode.NONE:
        return True
    exc = error_for(code, message, context=what)
    if code in _RETRY_PER_ITEM:
        raise exc
    errors[key] = exc
    return False


async def _leaders(admin: AsyncAdmin, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
    """Partitions grouped by leader (fresh metadata); unknown ones raise, leaderless ones retry."""
    wanted = list(dict.fromkeys(partitions))
    meta = await admin.cluster.fetch_metadata(sorted({tp.topic for tp in wanted}))
    by_leader: dict[int, list[TopicPartition]] = {}
    errors: dict[Any, KafkaError] = {}
    for tp in wanted:
        topic = meta.topics.get(tp.topic)
        if topic is not None and topic.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            errors[tp] = error_for(topic.error_code, context=f"{tp}")  # not retriable: no ACL
            continue
        count = meta.partition_count(tp.topic)
        if count is None or not 0 <= tp.partition < count:
            errors[tp] = UnknownTopicOrPartitionError(f"{tp} does not exist")
            continue
        leader = meta.leader_for(tp)
        if leader is None or leader < 0:
            raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, context=f"{tp} has no leader")
        by_leader.setdefault(leader, []).append(tp)
    _raise(errors)
    return by_leader


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


# -- DeleteRecords -------------------------------------------------------------------------------


async def delete_records(
    admin: AsyncAdmin,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_ms: float | None = None,
    return_exceptions: bool = False,
) -> dict[TopicPartition, Any]:
    """Delete the records below each offset (-1: the high watermark); returns each partition's
    low watermark (the lowest log start offset among its live replicas). With
    ``return_exceptions`` a failed partition maps to its ``KafkaError`` instead of raising."""
    budget = timeout_ms or admin.default_api_timeout_ms
    done: dict[TopicPartition, int] = {}
    errors: dict[Any, KafkaError] = {}
    for tp, offset in offsets.items():
        if offset < HIGH_WATERMARK:
            errors[tp] = error_for(ErrorCode.OFFSET_OUT_OF_RANGE, context=f"delete records of {tp} before {offset}")

    async def attempt() -> None:
        pending = [tp for tp in offsets if tp not in done and tp not in errors]
        for leader, tps in (await _leaders(admin, pending)).items():
            body = {
                "topics": [
                    {
                        "name": t,
                        "partitions": [{"partition_index": p, "offset": offsets[TopicPartition(t, p)]} for p in ps],
                    }
                    for t, ps in _by_topic(tps).items()
                ],
                "timeout_ms": int(budget),
            }
            resp = await admin.cluster.send(leader, ApiKey.DELETE_RECORDS, body, timeout_ms=budget + 5000)
            for topic in resp.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    if _check_item(part.error_code, f"delete records of {tp}", errors, tp):
                        done[tp] = part.low_watermark

    if len(errors) < len(offsets):
        await admin._retrying("DeleteRecords", timeout_ms, attempt)
    if return_exceptions:
        return {tp: done.get(tp, errors.get(tp)) for tp in offsets}
    _raise(errors)
    return dict(done)


# -- DescribeProducers ---------------------------------------------------------------------------


async def describe_producers(
    admin: AsyncAdmin,
    partitions: Iterable[TopicPartition],
    *,
    broker_id: int | None = None,
    timeout_ms: float | None = None,
) -> dict[TopicPartition, list[ProducerState]]:
    """The producers each partition's leader (or replica ``broker_id``) keeps state for."""
    wanted = list(dict.fromkeys(partitions))
    found: dict[TopicPartition, list[ProducerState]] = {}
    errors: dict[Any, KafkaError] = {}

    async def attempt() -> None:
        pending = [tp for tp in wanted if tp not in found and tp not in errors]
        targets = {broker_id: pending} if broker_id is not None else await _leaders(admin, pending)
        for node, tps in targets.items():
            body = {"topics": [{"name": t, "partition_indexes": ps} for t, ps in _by_topic(tps).items()]}
            resp = await admin.cluster.send(node, ApiKey.DESCRIBE_PRODUCERS, body)
            for topic in resp.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    what = f"describe producers of {tp} on broker {node}"
                    if broker_id is not None and part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                        errors[tp] = error_for(part.error_code, part.error_message, context=what)  # no retry elsewhere
                    elif _check_item(part.error_code, what, errors, tp, part.error_message):
                        found[tp] = [
                            ProducerState(
                                p.producer_id,
                                p.producer_epoch,
                                p.last_sequence,
                                p.last_timestamp,
                                p.coordinator_epoch,
                                p.current_txn_start_offset,
                            )
                            for p in part.active_producers
                        ]

    await admin._retrying("DescribeProducers", timeout_ms, attempt)
    _raise(errors)
    return found


# -- ListTransactions / DescribeTransactions -----------------------------------------------------


async def list_transactions(
    admin: AsyncAdmin,
    *,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_filter_ms: int = -1,
    timeout_ms: float | None = None,
) -> dict[int, list[TransactionListing]]:
    """Every broker's transactions matching all filters given (``duration_filter_ms`` ≥ 0: open
    longer than that, ListTransactions v1), by coordinator id."""
    body = {
        "state_filters": list(dict.fromkeys(states)),
        "producer_id_filters": list(dict.fromkeys(producer_ids)),
        "duration_filter": duration_filter_ms,
    }

    async def attempt() -> dict[int, list[TransactionListing]]:
        meta = await admin.cluster.fetch_metadata([])
        out: dict[int, list[TransactionListing]] = {}
        for node in sorted(meta.brokers):
            conn = await admin.cluster.connection(node)
            version = conn.version_for(ApiKey.LIST_TRANSACTIONS)
            if duration_filter_ms >= 0 and version < 1:
                raise UnsupportedFeatureError(f"broker {node} does not filter transactions by duration (KIP-994)")
            resp = await conn.request(ApiKey.LIST_TRANSACTIONS, body, version=version)
            assert resp is not None
            if resp.error_code != ErrorCode.NONE:
                raise error_for(resp.error_code, context=f"list transactions on broker {node}")
            out[node] = [
                TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                for t in resp.transaction_states
            ]
        return out

    return await admin._retrying("ListTransactions", timeout_ms, attempt)


async def _txn_coordinator(admin: AsyncAdmin, transactional_id: str) -> int:
    return await admin.cluster.find_coordinator(
        1, transactional_id, context=f"find coordinator of {transactional_id!r}"
    )


async def describe_transactions(
    admin: AsyncAdmin, transactional_ids: Iterable[str], *, timeout_ms: float | None = None
) -> dict[str, TransactionDescription]:
    """Each transactional id's state as its coordinator has it (TRANSACTIONAL_ID_NOT_FOUND for an
    id it does not know)."""
    ids = list(dict.fromkeys(transactional_ids))
    found: dict[str, TransactionDescription] = {}
    errors: dict[Any, KafkaError] = {}

    async def attempt() -> None:
        for tid in [t for t in ids if t not in found and t not in errors]:
            node = await _txn_coordinator(admin, tid)
            resp = await admin.cluster.send(node, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]})
            for st in resp.transaction_states:
                if st.transactional_id == tid and _check_item(
                    st.error_code, f"describe transaction {tid!r}", errors, tid
                ):
                    found[tid] = TransactionDescription(
                        node,
                        tid,
                        st.transaction_state,
                        st.producer_id,
                        st.producer_epoch,
                        st.transaction_timeout_ms,
                        st.transaction_start_time_ms,
                        tuple(TopicPartition(t.topic, p) for t in st.topics for p in t.partitions),
                    )

    await admin._retrying("DescribeTransactions", timeout_ms, attempt)
    _raise(errors)
    return found


# -- abort (WriteTxnMarkers) ---------------------------------------------------------------------


async def abort_transaction(admin: AsyncAdmin, spec: AbortTransactionSpec, *, timeout_ms: float | None = None) -> None:
    """Write an ABORT marker for ``spec``'s producer to its partition's leader (Kafka's
    ``Admin.abortTransaction``). INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED when the
    partition has seen a newer epoch of the producer or of its coordinator."""
    tp = spec.partition
    marker = {
        "producer_id": spec.producer_id,
        "producer_epoch": spec.producer_epoch,
        "transaction_result": False,
        "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
        "coordinator_epoch": spec.coordinator_epoch,
    }

    async def attempt() -> None:
        errors: dict[Any, KafkaError] = {}
        for leader in await _leaders(admin, [tp]):
            resp = await admin.cluster.send(leader, ApiKey.WRITE_TXN_MARKERS, {"markers": [marker]})
            for result in resp.markers:
                for topic in result.topics:
                    for part in topic.partitions:
                        _check_item(
                            part.error_code, f"abort transaction of producer {spec.producer_id} on {tp}", errors, tp
                        )
        _raise(errors)

    await admin._retrying("WriteTxnMarkers", timeout_ms, attempt)
