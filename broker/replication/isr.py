"""The leader's replication decisions, pure: follower progress, the high watermark, who is in sync.

Kafka documentation §4.7 "Replication" ("Replicated Logs"), sentence by sentence:

* "followers consume messages from the leader just as a normal Kafka consumer would": a
  follower's fetch offset is its log end offset; ``on_follower_fetch`` records it.
* "the leader keeps track of the set of 'in sync' nodes": a follower is caught up when its log
  end offset reaches the leader's, or reached the leader's end as of its previous fetch
  (``last_caught_up_ms``, Kafka ``ReplicaState.updateFetchStateOrThrow``); one that has not been
  caught up for ``replica.lag.time.max.ms`` is out of sync (``out_of_sync``).
* "A message is considered committed when all in sync replicas for that partition have applied it
  to their log": the high watermark is the smallest log end offset over the ISR (``high_watermark``),
  computed over the *maximal* ISR (the committed ISR plus a member being added, or the members
  being removed while the controller has not yet confirmed), and never moves back on the leader.
* A follower out of the ISR may join again once its log end offset reaches the high watermark and
  the start of the current leader epoch (``can_join_isr``, Kafka ``isFollowerInSync``).
* The producer's ``acks``: with ``acks=all`` a produce is refused before the append when the ISR is smaller
  than ``min.insync.replicas`` (capped at the replica count, as Kafka 4.x's ``effectiveMinIsr``)
  (NOT_ENOUGH_REPLICAS), and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND
  when the ISR shrank below it while the produce waited (``acks_all_error``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from pyspark_log.wire.errors import ErrorCode

UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class FollowerState:
    """What the leader knows of one follower (reset when this broker becomes leader)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    log_start_offset: int = UNKNOWN_OFFSET  # from its fetches (Fetch v5+): what DeleteRecords waits for


def on_follower_fetch(state: FollowerState, fetch_offset: int, leader_end_offset: int, now_ms: int) -> FollowerState:
    """The follower's state after a fetch at ``fetch_offset`` when the leader's log ends at
    ``leader_end_offset``."""
    caught_up_ms = state.last_caught_up_ms
    if fetch_offset >= leader_end_offset:
        caught_up_ms = max(caught_up_ms, now_ms)
    elif fetch_offset >= state.last_fetch_leader_end_offset >= 0:
        caught_up_ms = max(caught_up_ms, state.last_fetch_ms)
    return replace(
        state,
        log_end_offset=fetch_offset,
        last_caught_up_ms=caught_up_ms,
        last_fetch_leader_end_offset=leader_end_offset,
        last_fetch_ms=now_ms,
    )


def high_watermark(
    current_hw: int, leader_id: int, leader_end_offset: int, maximal_isr: Collection[int],
    followers: Mapping[int, FollowerState],
) -> int:  # fmt: skip
    """The smallest log end offset over ``maximal_isr`` (the leader's own counted as
    ``leader_end_offset``), or ``current_hw`` when that is not larger: the leader's HW never
    moves back. A member whose end offset is unknown holds it where it is."""
    candidate = leader_end_offset
    for broker in maximal_isr:
        if broker == leader_id:
            continue
        follower = followers.get(broker)
        end = follower.log_end_offset if follower is not None else UNKNOWN_OFFSET
        if end < 0:
            return current_hw
        candidate = min(candidate, end)
    return max(current_hw, candidate)


def out_of_sync(
    isr: Collection[int], leader_id: int, leader_end_offset: int, followers: Mapping[int, FollowerState],
    *, now_ms: int, lag_time_max_ms: int,
) -> set[int]:  # fmt: skip
    """ISR followers that are neither at the leader's end nor caught up within the lag time."""
    slow = set()
    for broker in isr:
        if broker == leader_id:
            continue
        follower = followers.get(broker, FollowerState())
        if follower.log_end_offset == leader_end_offset:
            continue
        if now_ms - follower.last_caught_up_ms > lag_time_max_ms:
            slow.add(broker)
    return slow


def can_join_isr(follower: FollowerState, high_watermark_offset: int, leader_epoch_start_offset: int) -> bool:
    """Whether a follower outside the ISR has caught up enough to be added back."""
    end = follower.log_end_offset
    return end >= 0 and end >= high_watermark_offset and end >= leader_epoch_start_offset


def acks_all_error(
    isr_size: int, min_insync_replicas: int, *, after_append: bool, replica_count: int | None = None
) -> int:
    """The error of an ``acks=all`` produce for an ISR of ``isr_size`` (NONE when enough).

    With ``replica_count`` the minimum is Kafka's effective one, ``min(min.insync.replicas,
    replica_count)`` (Kafka 4.x ``Partition.effectiveMinIsr``): a partition with fewer replicas
    than ``min.insync.replicas`` takes acks=all writes once all of its replicas are in sync."""
    if replica_count is not None:
        min_insync_replicas = min(min_insync_replicas, max(replica_count, 1))
    if isr_size >= min_insync_replicas:
        return ErrorCode.NONE
    return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if after_append else ErrorCode.NOT_ENOUGH_REPLICAS
