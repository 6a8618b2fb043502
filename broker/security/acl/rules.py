"""Applies an API's checks (``checks.CHECKS``) to one request (pure): the table's kinds here, the
named rules (``checks.Rule``) by name from the modules that hold them, split by what they decide
(``topic_rules``, ``group_rules``, ``transaction_rules``, ``cluster_rules``). The API layer
(``broker.api.authz``) calls ``apply`` before the handler runs (Kafka documentation §7.5
"Authorization and ACLs"; Kafka's ``KafkaApis`` authorizes each request before handling it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from broker.security.acl import cluster_rules, group_rules, topic_rules, transaction_rules
from broker.security.acl.checks import Check, Cluster, Named, Rule, Topics
from broker.security.acl.request import BrokerFacts, Denied, Pending, RequestAuth, error_body, filter_topics
from pyspark_log.wire.errors import ErrorCode

RuleFunction = Callable[[RequestAuth, Pending, BrokerFacts], None]
RULES: dict[str, RuleFunction] = {
    "produce_transactional": transaction_rules.produce_transactional,
    "produce_create": topic_rules.produce_create,
    "fetch": topic_rules.fetch,
    "offset_for_leader_epoch": topic_rules.offset_for_leader_epoch,
    "metadata": topic_rules.metadata,
    "find_coordinator": group_rules.find_coordinator,
    "describe_cluster": cluster_rules.describe_cluster,
    "offset_fetch": group_rules.offset_fetch,
    "describe_groups": group_rules.describe_groups,
    "consumer_group_heartbeat": group_rules.consumer_group_heartbeat,
    "consumer_group_describe": group_rules.consumer_group_describe,
    "list_groups": group_rules.list_groups,
    "delete_groups": group_rules.delete_groups,
    "init_producer_id": transaction_rules.init_producer_id,
    "add_partitions_to_txn": transaction_rules.add_partitions_to_txn,
    "describe_transactions": transaction_rules.describe_transactions,
    "list_transactions": transaction_rules.list_transactions,
    "create_topics": topic_rules.create_topics,
    "delete_topics": topic_rules.delete_topics,
    "create_partitions": topic_rules.create_partitions,
    "describe_configs": cluster_rules.describe_configs,
    "alter_configs": cluster_rules.alter_configs,
}


def apply(checks: Sequence[Check], auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """Apply ``checks`` in order: raises ``Denied`` with the response when one refuses the whole
    request; otherwise leaves in ``pending`` what the handler may run on and the amendments to
    its response."""
    for check in checks:
        _apply_one(check, auth, pending, broker)


def _apply_one(check: Check, auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    if isinstance(check, Cluster):
        if not auth.cluster(check.operation):
            raise Denied(error_body(pending.api_key, pending.version, pending.body,
                                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED))  # fmt: skip
    elif isinstance(check, Named):
        name = pending.body.get(check.field)
        if name is not None and not auth.allowed(check.operation, check.resource_type, name):
            raise Denied(error_body(pending.api_key, pending.version, pending.body, check.code))
    elif isinstance(check, Topics):
        filter_topics(pending, auth, check.shape, check.code, lambda name: auth.topic(check.operation, name))
    elif isinstance(check, Rule):
        RULES[check.name](auth, pending, broker)
    else:  # pragma: no cover - the table holds only these kinds
        raise TypeError(check)
