"""The ACL rules of the transactional APIs whose checks do not fit one ``Named`` check (pure):
transactional Produce, InitProducerId (transactional and idempotent producers, KIP-679),
AddPartitionsToTxn (a producer, or a broker verifying, KIP-890), DescribeTransactions and
ListTransactions (KIP-664) (Kafka's ``KafkaApis`` for each, cited per function; Kafka
documentation §7.5 "Authorization and ACLs").

Each rule takes the requester (``RequestAuth``), the request as the checks leave it (``Pending``)
and what it needs of the broker (``BrokerFacts``); it raises ``Denied`` to refuse the whole
request, or takes denied transactional ids out of the request and adds an ``Amend`` that puts
them back into the response.
"""

from __future__ import annotations

from broker.security.acl.binding import Operation, ResourceType
from broker.security.acl.checks import ADD_PARTITIONS, PRODUCE
from broker.security.acl.request import (
    CLUSTER_AUTH,
    TOPIC_AUTH,
    TXN_AUTH,
    Body,
    BrokerFacts,
    Denied,
    Pending,
    RequestAuth,
    deny_all_topics,
)
from pyspark_log.wire.errors import ErrorCode


def produce_transactional(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """Transactional records need WRITE on the transactional id: else every partition is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's handleProduceRequest)."""
    body = pending.body
    if not broker.has_transactional_batch(body):
        return
    txn_id = body.get("transactional_id")
    if txn_id is None or not auth.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        if body.get("acks") == 0:
            raise Denied(None)  # acks=0: no response; the records are dropped
        raise Denied(deny_all_topics(pending, auth, PRODUCE, TXN_AUTH))


def init_producer_id(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """A transactional producer needs WRITE on its transactional id; an idempotent one
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679, Kafka 3.0+)."""
    txn_id = pending.body.get("transactional_id")
    if txn_id is not None:
        if not auth.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            raise Denied({"error_code": TXN_AUTH, "producer_id": -1, "producer_epoch": -1})
        return
    if auth.cluster(Operation.IDEMPOTENT_WRITE):
        return
    if auth.authorizer.authorize_by_resource_type(auth.principal, auth.host, Operation.WRITE, ResourceType.TOPIC):
        return
    raise Denied({"error_code": CLUSTER_AUTH, "producer_id": -1, "producer_epoch": -1})


def add_partitions_to_txn(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """v0-3 (a producer): WRITE on the transactional id, WRITE on every topic; any denied topic is
    TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED. v4 (a broker verifying):
    CLUSTER_ACTION."""
    body = pending.body
    if pending.version >= 4:
        if not auth.cluster(Operation.CLUSTER_ACTION):
            raise Denied({"error_code": CLUSTER_AUTH})
        return
    if not auth.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body["v3_and_below_transactional_id"]):
        raise Denied(deny_all_topics(pending, auth, ADD_PARTITIONS, TXN_AUTH))
    topics = body.get("v3_and_below_topics") or []
    denied = {t["name"] for t in topics if not auth.topic(Operation.WRITE, t["name"])}
    if denied:
        raise Denied({"results_by_topic_v3_and_below": [
            {"name": t["name"], "results_by_partition": [
                {"partition_index": p,
                 "partition_error_code": TOPIC_AUTH if t["name"] in denied else ErrorCode.OPERATION_NOT_ATTEMPTED}
                for p in t["partitions"]]}
            for t in topics
        ]})  # fmt: skip


def describe_transactions(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """DESCRIBE per transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    ids = list(pending.body.get("transactional_ids") or [])
    denied = [i for i in ids if not auth.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, i)]
    if not denied:
        return
    pending.replace(transactional_ids=[i for i in ids if i not in denied])
    entries = [{"error_code": TXN_AUTH, "transactional_id": i, "transaction_state": "", "transaction_timeout_ms": 0,
                "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}
               for i in denied]  # fmt: skip

    def amend(out: Body) -> Body:
        out["transaction_states"] = list(out.get("transaction_states") or []) + entries
        return out

    pending.amends.append(amend)


def list_transactions(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """Only the transactional ids one may DESCRIBE are listed."""

    def amend(out: Body) -> Body:
        out["transaction_states"] = [
            t for t in out.get("transaction_states") or []
            if auth.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"])
        ]  # fmt: skip
        return out

    pending.amends.append(amend)
