"""Quota entities, the quota keys each accepts, and the precedence list (Kafka documentation §4.9 "Quotas").

Quotas apply to (user, client-id), user, or
client-id groups; a connection gets the most specific quota that matches it.

An entity is a tuple of ``(entity_type, entity_name)`` pairs sorted by type, as Kafka's
ClientQuotaRecord and AlterClientQuotas carry it; ``entity_name`` None is the *default* entity of
that type (``/config/clients/<default>``). Types: ``user``, ``client-id`` (client quotas, which
may be combined) and ``ip`` (KIP-612 connection-creation quota, alone).

The precedence list (Kafka documentation §4.9 "Quotas"), most specific first::

  1. /config/users/<user>/clients/<client-id>
  2. /config/users/<user>/clients/<default>
  3. /config/users/<user>
  4. /config/users/<default>/clients/<client-id>
  5. /config/users/<default>/clients/<default>
  6. /config/users/<default>
  7. /config/clients/<client-id>
  8. /config/clients/<default>

The quota is looked up per key (``producer_byte_rate`` may come from level 7 while
``consumer_byte_rate`` comes from level 8), as Kafka keeps one quota manager per quota type.
The *group* that shares the quota is named by the matched level's types with the connection's
actual names: a default quota gives every client id its own quota of that size (by default each distinct
client group gets a fixed bytes/sec quota), while all connections of one group share it
(all connections of a quota group share the group's quota).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
ANONYMOUS = "ANONYMOUS"  # the user principal of unauthenticated connections (KafkaPrincipal.ANONYMOUS)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
CLIENT_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
IP_KEYS = (CONNECTION_CREATION_RATE,)
_WHOLE_NUMBER_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONNECTION_CREATION_RATE})

Entity = tuple[tuple[str, str | None], ...]
QuotaTable = Mapping[Entity, Mapping[str, float]]


class InvalidQuotaError(ValueError):
    """An entity or quota value Kafka would answer with INVALID_REQUEST; the message says why."""


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The canonical entity for ``pairs``; raises InvalidQuotaError for unknown or repeated types,
    an ``ip`` combined with anything, or an empty entity."""
    entity = tuple(sorted(pairs, key=lambda p: p[0]))
    types = [t for t, _ in entity]
    if not entity:
        raise InvalidQuotaError("a quota entity needs at least one entity type")
    for entity_type in types:
        if entity_type not in ENTITY_TYPES:
            raise InvalidQuotaError(f"unknown quota entity type {entity_type!r}: use user, client-id or ip")
    if len(set(types)) != len(types):
        raise InvalidQuotaError(f"entity type repeated in {entity!r}")
    if IP in types and len(types) > 1:
        raise InvalidQuotaError("an ip quota entity cannot be combined with user or client-id")
    return entity


def validate_quota(entity: Entity, key: str, value: float) -> None:
    """Raise InvalidQuotaError unless ``key`` is a quota of ``entity``'s kind and ``value`` fits."""
    allowed = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    if key not in allowed:
        raise InvalidQuotaError(f"invalid configuration key {key!r} for entity {describe_entity(entity)}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuotaError(f"{key} must be a positive number, got {value}")
    if key in _WHOLE_NUMBER_KEYS and value != math.floor(value):
        raise InvalidQuotaError(f"{key} must be a whole number, got {value}")


def describe_entity(entity: Entity) -> str:
    """``user 'alice', client-id <default>`` style, for messages and the CLI."""
    return ", ".join(f"{t} {'<default>' if n is None else repr(n)}" for t, n in entity)


def precedence(user: str, client_id: str) -> list[Entity]:
    """The 8 entities (Kafka documentation §4.9 "Quotas") a connection of (``user``, ``client_id``) matches,
    most specific first."""
    return [
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    ]


@dataclass(frozen=True, slots=True)
class QuotaGroup:
    """The group whose connections share one quota: Kafka's metric tags ``user`` and
    ``client-id`` ("" for a part the matched entity does not name)."""

    user: str
    client_id: str


@dataclass(frozen=True, slots=True)
class QuotaMatch:
    group: QuotaGroup
    bound: float | None  # None: no quota for this key
    entity: Entity | None  # the configured entity that matched


def resolve(table: QuotaTable, key: str, user: str, client_id: str) -> QuotaMatch:
    """The most specific quota for ``key`` among the entities the connection matches. Without any
    match the group is the client id alone (Kafka's tags when no quota applies)."""
    for entity in precedence(user, client_id):
        values = table.get(entity)
        if values is not None and key in values:
            types = {t for t, _ in entity}
            group = QuotaGroup(user if USER in types else "", client_id if CLIENT_ID in types else "")
            return QuotaMatch(group, values[key], entity)
    return QuotaMatch(QuotaGroup("", client_id), None, None)


def filter_entities(
    table: QuotaTable, components: Iterable[tuple[str, int, str | None]], *, strict: bool
) -> list[tuple[Entity, Mapping[str, float]]]:
    """DescribeClientQuotas: the entities matching every component ``(entity_type, match_type,
    match)``: match_type 0 = exactly the name ``match``, 1 = the default entity, 2 = any entity of
    that type. ``strict``: the entity has no other types. Raises InvalidQuotaError for a bad filter."""
    wanted: dict[str, tuple[int, str | None]] = {}
    for entity_type, match_type, match in components:
        if entity_type not in ENTITY_TYPES:
            raise InvalidQuotaError(f"unknown quota entity type {entity_type!r} in the filter")
        if entity_type in wanted:
            raise InvalidQuotaError(f"entity type {entity_type!r} appears twice in the filter")
        if match_type not in (0, 1, 2):
            raise InvalidQuotaError(f"unknown match type {match_type} for {entity_type!r}")
        if match_type == 0 and match is None:
            raise InvalidQuotaError(f"an exact match of {entity_type!r} needs a name")
        wanted[entity_type] = (match_type, match)
    found = []
    for entity, values in table.items():
        names = dict(entity)
        if strict and set(names) != set(wanted):
            continue
        ok = True
        for entity_type, (match_type, match) in wanted.items():
            if entity_type not in names:
                ok = False
            elif match_type == 0:
                ok = names[entity_type] == match
            elif match_type == 1:
                ok = names[entity_type] is None
            if not ok:
                break
        if ok and values:
            found.append((entity, values))
    return sorted(found, key=lambda item: [(t, n or "") for t, n in item[0]])
