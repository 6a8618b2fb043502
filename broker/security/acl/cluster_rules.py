"""The ACL rules of the cluster and config APIs whose checks do not fit one ``Cluster`` check
(pure): DescribeCluster's authorized operations (KIP-430), and DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs, whose resources are topics (checked on the topic) or brokers and broker
loggers (checked on the cluster) (Kafka's ``KafkaApis`` for each; Kafka documentation §7.5
"Authorization and ACLs").

Each rule takes the requester (``RequestAuth``), the request as the checks leave it (``Pending``)
and the broker's facts (``BrokerFacts``, unused here); it takes denied resources out of the
request and adds an ``Amend`` that puts them back into the response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.security.acl.binding import Operation, ResourceType
from broker.security.acl.request import (
    AUTH_FAILED_MESSAGE,
    CLUSTER_AUTH,
    TOPIC_AUTH,
    Body,
    BrokerFacts,
    Pending,
    RequestAuth,
)

# DescribeConfigs' resource type codes (Kafka's ConfigResource.Type)
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8


def describe_cluster(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """DescribeCluster's ``cluster_authorized_operations`` when asked (Kafka computes it)."""
    if not pending.body.get("include_cluster_authorized_operations"):
        return

    def amend(out: Body) -> Body:
        out["cluster_authorized_operations"] = auth.operations(ResourceType.CLUSTER, "kafka-cluster")
        return out

    pending.amends.append(amend)


def _config_rule(auth: RequestAuth, operation: Operation) -> Callable[[Any], int]:
    """The error a config resource gets (0: allowed): topics need ``operation`` on the topic,
    brokers and broker loggers on the cluster."""

    def code(resource: Any) -> int:
        if int(resource["resource_type"]) == TOPIC_RESOURCE:
            return 0 if auth.topic(operation, resource["resource_name"]) else TOPIC_AUTH
        if int(resource["resource_type"]) in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
            return 0 if auth.cluster(operation) else CLUSTER_AUTH
        return 0

    return code


def _configs(
    pending: Pending, operation: Operation, auth: RequestAuth, response_field: str, with_configs: bool
) -> None:
    code_of = _config_rule(auth, operation)
    resources = list(pending.body.get("resources") or [])
    denied = [(r, code) for r in resources if (code := code_of(r))]
    if not denied:
        return
    pending.replace(resources=[r for r in resources if not code_of(r)])
    entries = []
    for resource, code in denied:
        entry = {"error_code": code, "error_message": AUTH_FAILED_MESSAGE,
                 "resource_type": resource["resource_type"], "resource_name": resource["resource_name"]}  # fmt: skip
        if with_configs:
            entry["configs"] = []
        entries.append(entry)

    def amend(out: Body) -> Body:
        out[response_field] = list(out.get(response_field) or []) + entries
        return out

    pending.amends.append(amend)


def describe_configs(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or the cluster for a broker
    (CLUSTER_AUTHORIZATION_FAILED)."""
    _configs(pending, Operation.DESCRIBE_CONFIGS, auth, "results", True)


def alter_configs(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """ALTER_CONFIGS, as describe_configs (AlterConfigs and IncrementalAlterConfigs)."""
    _configs(pending, Operation.ALTER_CONFIGS, auth, "responses", False)
