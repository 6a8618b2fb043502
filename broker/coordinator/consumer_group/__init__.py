"""KIP-848 consumer groups (the ``consumer`` rebalance protocol): the broker computes the
assignment, members heartbeat with ConsumerGroupHeartbeat (68) and reconcile towards it.

Pure modules: ``assignors`` (uniform, range), ``reconcile`` (member epochs, revocation before
assignment), ``group`` (one group's epochs and heartbeat decisions), ``regex`` (RE2 topic
subscriptions), ``config`` (``group.consumer.*``), ``records`` (Kafka's consumer group records in
``__consumer_offsets`` and their replay). The driver, ``coordinator``, hangs off the classic group
coordinator (``GroupCoordinator.consumer``), sharing its ``__consumer_offsets`` ownership, timers
and committed offsets.
"""

from __future__ import annotations

from broker.coordinator.consumer_group.config import ConsumerGroupConfig, ConsumerGroupConfigError
from broker.coordinator.consumer_group.group import ConsumerGroup, ConsumerGroupState, HeartbeatRequest

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "ConsumerGroupConfigError",
    "ConsumerGroupState",
    "HeartbeatRequest",
]
