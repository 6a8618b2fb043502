"""Kafka's ACL enum codes, as DescribeAcls/CreateAcls/DeleteAcls (29-31) and the metadata
``AccessControlEntryRecord`` carry them: one table for the broker's authorizer and the client's
admin types (names as Kafka's admin API spells them: ``ResourceType``, ``PatternType``,
``AclOperation``, ``AclPermissionType``). ``UNKNOWN`` and ``ANY`` (and ``MATCH`` for patterns)
appear in filters only."""

from __future__ import annotations

from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, exact name
    MATCH = 2  # filters only: every pattern that would apply to the name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name in Kafka
