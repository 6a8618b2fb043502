"""``ReplicaState``: the pure state machine of one replica of a partition (no log, no I/O, no clock).

Kafka documentation §4.7 "Replication": each partition has one leader and zero or more followers;
the leader tracks the "in sync" set, a message is committed once every in-sync replica has it
(the high watermark), and followers fetch from the leader as consumers do. This class holds what a
replica decides about that, the way ``broker/raft/core.py`` holds the Raft decisions: its driver
(``broker.replication.partition.Partition`` on a real log, ``tests/sim/replication`` on a simulated
one) performs the log I/O and feeds the results in; the decisions come back as return values.

Events in (each takes the log positions it needs as arguments):

* image changes: ``become_leader``, ``become_follower``, ``update_from_image``;
* leader appends: ``on_leader_append`` (the log end moved);
* follower appends and truncations: ``on_follower_append``, ``on_truncate``, ``on_restart``;
* follower fetch positions: ``record_follower_fetch`` (leader), ``follower_learns`` (follower);
* ticks: ``isr_check`` (the lag check every half of ``replica.lag.time.max.ms``);
* AlterPartition answers: ``on_isr_answer``.

The acks=all judgement is here too: ``acks_all_refusal`` before an append, ``acks_status`` for a
waiting ``DelayedProduce``.

Effects out: ``maybe_advance_high_watermark`` (Kafka's ``Partition.maybeIncrementLeaderHW``) and
the event methods return whether the high watermark moved (the driver then completes the delayed
operations waiting on it, ``broker.replication.purgatory``); ``follower_learns`` returns the log
start offset to delete up to; ``on_truncate`` the new high watermark; ``isr_expansion`` and
``isr_check`` return an AlterPartition proposal (KIP-497), which ``propose_isr`` records as
pending (the high watermark counts the "maximal ISR", the committed ISR plus the proposal, until
the metadata shows the controller's decision).

Threading: none; the driver calls it from one thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from broker.metadata.image import PartitionImage
from broker.replication.isr import (
    UNKNOWN_OFFSET,
    FollowerState,
    acks_all_error,
    can_join_isr,
    high_watermark,
    on_follower_fetch,
    out_of_sync,
)
from broker.replication.leader_epoch import LeaderEpochCache
from pyspark_log.wire.errors import ErrorCode

# AlterPartition answers that settle a proposal as not applied (the others leave its outcome open)
ISR_REFUSED = frozenset(
    {
        ErrorCode.INELIGIBLE_REPLICA,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)


class ReplicaState:
    """One replica's role, ISR view, followers' progress, high watermark and leader epochs on broker
    ``node_id`` (see the module docstring)."""

    __slots__ = (
        "epochs",
        "followers",
        "high_watermark",
        "isr_in_flight",
        "isr_retry_at_ms",
        "leader_epoch_start_offset",
        "leader_high_watermark",
        "node_id",
        "pending_isr",
        "role",
    )

    def __init__(self, node_id: int, epochs: LeaderEpochCache, high_watermark_offset: int) -> None:
        self.node_id = node_id
        self.epochs = epochs
        self.high_watermark = high_watermark_offset
        self.role: PartitionImage | None = None  # the metadata's view; None until it names this broker
        self.pending_isr: tuple[int, ...] | None = None  # asked of the controller, not yet confirmed
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = 0
        self.leader_high_watermark = 0  # as a follower: the leader's, from its last fetch response
        self.isr_in_flight = False  # an AlterPartition of this replica is awaiting its answer
        self.isr_retry_at_ms = 0  # no proposal before this (after an answer of unknown outcome)

    # -- role ----------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.role is not None and self.role.leader == self.node_id

    @property
    def leader_epoch(self) -> int:
        return self.role.leader_epoch if self.role is not None else -1

    @property
    def isr(self) -> tuple[int, ...]:
        return self.role.isr if self.role is not None else ()

    @property
    def maximal_isr(self) -> set[int]:
        return set(self.isr) | set(self.pending_isr or ())

    def become_leader(self, image: PartitionImage, now_ms: int, log_end: int, *, record_epoch: bool = True) -> bool:
        """Lead at ``image.leader_epoch``: the epoch begins at ``log_end``; every follower's progress
        is unknown until its next fetch (ISR members count as caught up now). Returns False when
        already leading at that epoch (then only the ISR may change). ``record_epoch`` False: the
        role is taken from a metadata image not yet caught up (a restart replaying its metadata
        log), so the epoch goes into the cache only once the broker serves (``record_epoch``): a
        leadership lost long ago must not claim an epoch at a log end that, after a machine crash,
        may lie below the data it once had."""
        if self.is_leader and self.role is not None and self.role.leader_epoch == image.leader_epoch:
            self.update_from_image(image, log_end)
            return False
        self.role = image
        self.pending_isr = None
        if record_epoch:
            self.epochs.assign(image.leader_epoch, log_end)
        self.leader_epoch_start_offset = log_end
        self.followers = {
            b: FollowerState(last_caught_up_ms=now_ms if b in image.isr else 0)
            for b in image.replicas
            if b != self.node_id
        }
        self.maybe_advance_high_watermark(log_end)
        return True

    def record_epoch(self, log_end: int) -> None:
        """A leader whose epoch was not recorded at ``become_leader``: it begins at ``log_end``
        (nothing was appended since: a broker that does not serve yet takes no writes)."""
        if self.is_leader and self.role is not None:
            self.epochs.assign(self.role.leader_epoch, log_end)

    def become_follower(self, image: PartitionImage) -> bool:
        """Follow ``image.leader`` (-1: no leader for now). Returns False when nothing about the
        leadership changed."""
        was = self.role
        self.role = image
        self.pending_isr = None
        self.followers = {}
        return was is None or was.leader != image.leader or was.leader_epoch != image.leader_epoch

    def update_from_image(self, image: PartitionImage, log_end: int) -> None:
        """Same leader and epoch: take the ISR and partition epoch the metadata now shows (an older
        partition epoch than ours is a stale view and is ignored)."""
        if self.role is None or image.partition_epoch < self.role.partition_epoch:
            return
        if image.partition_epoch > self.role.partition_epoch:
            self.pending_isr = None  # the controller decided on what was proposed
        self.role = image
        if self.is_leader:
            self.maybe_advance_high_watermark(log_end)

    # -- log changes ---------------------------------------------------------------------------
    def on_leader_append(self, log_end: int) -> bool:
        """The leader appended up to ``log_end``; True when the high watermark moved (a leader alone
        in its ISR)."""
        return self.maybe_advance_high_watermark(log_end)

    def on_follower_append(self, batch_epochs: Iterable[tuple[int, int]]) -> None:
        """The follower appended the leader's batches, ``(partitionLeaderEpoch, base offset)`` each:
        learn the epochs that begin in them."""
        for epoch, base_offset in batch_epochs:
            if epoch > self.epochs.latest_epoch:
                self.epochs.assign(epoch, base_offset)

    def on_truncate(self, log_end: int) -> int:
        """The log was cut to end at ``log_end``: the epoch cache follows, and the high watermark
        follows down if it was above; returns the high watermark."""
        self.epochs.truncate_from_end(log_end)
        self.high_watermark = min(self.high_watermark, log_end)
        return self.high_watermark

    def on_restart(self, offset: int) -> None:
        """The log was emptied and starts at ``offset`` (a follower below the leader's log start)."""
        self.epochs.clear()
        self.high_watermark = offset

    def follower_learns(self, leader_high_watermark: int, leader_log_start_offset: int, log_start: int,
                        log_end: int) -> int | None:  # fmt: skip
        """A follower's high watermark is the leader's, capped at its own log end; its log start
        offset follows the leader's, capped at that high watermark (as Kafka's fetcher raises it
        with ``maybeIncrementLogStartOffset`` after the high watermark). Returns the log start
        offset to delete the records before, or None."""
        self.leader_high_watermark = leader_high_watermark
        self.high_watermark = max(log_start, min(leader_high_watermark, log_end))
        new_start = min(leader_log_start_offset, self.high_watermark)
        return new_start if new_start > log_start else None

    # -- leader: followers and the high watermark ------------------------------------------------
    def record_follower_fetch(
        self, replica_id: int, fetch_offset: int, log_end: int, now_ms: int, log_start_offset: int = UNKNOWN_OFFSET
    ) -> bool:
        """A follower fetched at ``fetch_offset`` while this leader's log ends at ``log_end``;
        ``log_start_offset`` is the one its request carried (Fetch v5+, -1 when unknown). True when
        the high watermark moved."""
        state = on_follower_fetch(self.followers.get(replica_id, FollowerState()), fetch_offset, log_end, now_ms)
        if log_start_offset >= 0:
            state = replace(state, log_start_offset=log_start_offset)
        self.followers[replica_id] = state
        return self.maybe_advance_high_watermark(log_end)

    def maybe_advance_high_watermark(self, log_end: int) -> bool:
        """The leader's high watermark: the smallest log end offset over the maximal ISR, never
        moving back (Kafka's ``Partition.maybeIncrementLeaderHW``). True when it moved."""
        if not self.is_leader:
            return False
        new = high_watermark(self.high_watermark, self.node_id, log_end, self.maximal_isr, self.followers)
        if new == self.high_watermark:
            return False
        self.high_watermark = new
        return True

    # -- leader: acks=all (Kafka documentation §4.7 "Replication", the producer's acks) --------------
    def acks_all_refusal(self, min_insync_replicas: int) -> int:
        """Before an acks=all append: NOT_ENOUGH_REPLICAS when the ISR is smaller than the effective
        ``min.insync.replicas`` (capped at the replica count, Kafka 4.x ``effectiveMinIsr``), else NONE."""
        replicas = len(self.role.replicas) if self.role is not None else 1
        return acks_all_error(len(self.isr), min_insync_replicas, after_append=False, replica_count=replicas)

    def acks_status(self, required_offset: int, min_insync_replicas: int) -> int | None:
        """An acks=all append ending before ``required_offset`` (Kafka's ``DelayedProduce`` check):
        None while the high watermark is below it, else the code to answer — NONE,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank meanwhile) or NOT_LEADER_OR_FOLLOWER."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return None
        replicas = len(self.role.replicas) if self.role is not None else 1
        return acks_all_error(len(self.isr), min_insync_replicas, after_append=True, replica_count=replicas)

    # -- leader: ISR changes (AlterPartition proposals, KIP-497) -----------------------------------
    def isr_expansion(self, replica_id: int, now_ms: int) -> tuple[int, ...] | None:
        """After a fetch of ``replica_id``: the ISR to propose when that follower caught up (Kafka's
        ``Partition.maybeExpandIsr``), or None."""
        if replica_id in self.isr or self.pending_isr is not None:
            return None
        state = self.followers.get(replica_id)
        if state is None or not can_join_isr(state, self.high_watermark, self.leader_epoch_start_offset):
            return None
        return (*self.isr, replica_id) if self.may_propose(now_ms) else None

    def isr_check(self, now_ms: int, log_end: int, lag_time_max_ms: int) -> tuple[tuple[int, ...], str] | None:
        """The periodic check (Kafka's ``Partition.maybeShrinkIsr``): ``(ISR, kind)`` to propose —
        the pending one again once its retry time came (kind "retry"), or the ISR without the
        followers not caught up for ``lag_time_max_ms`` ("shrink") — or None."""
        if not self.is_leader:
            return None
        if self.pending_isr is not None:
            if self.isr_retry_at_ms <= now_ms:
                return self.pending_isr, "retry"
            return None
        slow = out_of_sync(
            self.isr, self.node_id, log_end, self.followers, now_ms=now_ms, lag_time_max_ms=lag_time_max_ms
        )
        if not slow:
            return None
        return tuple(b for b in self.isr if b not in slow), "shrink"

    def may_propose(self, now_ms: int) -> bool:
        return self.role is not None and not self.isr_in_flight and self.isr_retry_at_ms <= now_ms

    def propose_isr(self, new_isr: tuple[int, ...]) -> None:
        """An AlterPartition asking for ``new_isr`` is sent: it counts in the maximal ISR now."""
        self.pending_isr = new_isr
        self.isr_in_flight = True

    def on_isr_answer(self, new_isr: tuple[int, ...], code: int, now_ms: int, backoff_ms: int, log_end: int) -> bool:
        """The AlterPartition for ``new_isr`` was answered ``code``: a refusal drops the proposal; an
        unknown outcome (no controller, a timeout, a lost answer, a stale view) keeps it in the
        maximal ISR, to propose again after ``backoff_ms``, until the metadata shows a newer
        partition epoch (``update_from_image``). True when the high watermark moved."""
        self.isr_in_flight = False
        if code in ISR_REFUSED and self.pending_isr == new_isr:
            self.pending_isr = None  # refused for good: the ISR stays what the metadata says
        elif code != ErrorCode.NONE:
            self.isr_retry_at_ms = now_ms + backoff_ms
        else:
            self.isr_retry_at_ms = 0
        return self.maybe_advance_high_watermark(log_end)


class ReplicaStateFields:
    """The core's fields as read-only properties of its driver (``Partition`` on a real log, the
    simulation's ``SimPartition``): a driver holds its ``ReplicaState`` in ``state`` and reads
    through these, so the two drivers expose the same fields the same way."""

    state: ReplicaState

    @property
    def epochs(self) -> LeaderEpochCache:
        return self.state.epochs

    @property
    def high_watermark(self) -> int:
        return self.state.high_watermark

    @property
    def role(self) -> PartitionImage | None:
        return self.state.role

    @property
    def pending_isr(self) -> tuple[int, ...] | None:
        return self.state.pending_isr

    @property
    def followers(self) -> dict[int, FollowerState]:
        return self.state.followers

    @property
    def leader_epoch_start_offset(self) -> int:
        return self.state.leader_epoch_start_offset

    @property
    def leader_high_watermark(self) -> int:
        return self.state.leader_high_watermark

    @property
    def is_leader(self) -> bool:
        return self.state.is_leader

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr

    @property
    def maximal_isr(self) -> set[int]:
        return self.state.maximal_isr
