"""Consumer-group membership for the consumer: ``subscribe`` with a ``group.id``.

Modules: ``assignors`` (range, roundrobin, cooperative-sticky), ``state`` (the member's state
machine), ``link`` (finding and talking to the group coordinator), ``requests`` (request bodies
and answer handling), ``subscription`` (topics or pattern, the rebalance listener),
``member`` (``GroupMemberBase``: the settings, offset commits/fetches, auto-commit, revocation and
shutdown both memberships share), ``membership`` (``ConsumerGroup``: the rebalance flow driven by
``poll``, heartbeats, auto-commit), ``consumer_member`` (``ConsumerProtocolGroup``:
``group.protocol=consumer``, KIP-848).
"""

from pyspark_log.client.group.assignors import (
    Assignor,
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
)
from pyspark_log.client.group.subscription import ConsumerRebalanceListener

__all__ = [
    "Assignor",
    "ConsumerRebalanceListener",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
]
