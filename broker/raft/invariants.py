"""KIP-595 safety invariants one replica checks on itself after every step of its core.

``RaftCore`` runs ``StepInvariants.after_step`` on each ``StepResult`` before returning it. The
checks are cheap (a few comparisons and one pass over the step's ``persist`` effects) and a broken
one raises ``RaftInvariantError``, an ``AssertionError`` raised explicitly (so ``python -O`` keeps
it), which the driver treats as fatal and stops the node: Kafka and etcd fail loudly on a broken
invariant rather than replicate from a corrupted state. Operating errors stay Kafka error codes.

Checked, within one incarnation of the replica (what it can see of itself):

* **monotonic epoch**: the epoch never decreases;
* **one vote per epoch**: once the replica voted in an epoch, it votes for no other candidate in it;
* **one leader per epoch**: once a leader of an epoch is known, no other replica is the leader of
  it, and a replica in the leader role names itself as the leader;
* **monotonic high watermark**, never beyond the log end offset;
* **persist before send**: a step that changes the leader, epoch or vote carries a
  ``PersistQuorumState`` of exactly the new values, and a step that changes the log end carries a
  ``FlushLog`` of the new end (the driver executes ``persist`` before ``send``).

The cluster-wide forms (one leader per epoch across replicas, the committed prefix durable on a
majority, one vote per epoch across restarts) are checked by the simulation (``tests/sim``).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.raft.effects import FlushLog, PersistQuorumState, QuorumStateData, StepResult
from broker.raft.messages import NO_LEADER, NO_VOTE


class RaftInvariantError(AssertionError):
    """A KIP-595 safety invariant of this replica is broken: the node must stop."""


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """What the checks read of the core after a step."""

    state: QuorumStateData
    is_leader: bool
    high_watermark: int
    log_end_offset: int


class StepInvariants:
    """The facts of the previous step, and the checks of the next one against them."""

    def __init__(self, local_id: int, initial: ReplicaView) -> None:
        self._local_id = local_id
        self._last = initial
        self._vote = (initial.state.leader_epoch, initial.state.voted_id)
        self._leader = (initial.state.leader_epoch, initial.state.leader_id)

    def _fail(self, what: str) -> None:
        raise RaftInvariantError(f"replica {self._local_id}: {what}")

    def after_step(self, now: ReplicaView, step: StepResult) -> None:
        """Check ``now`` (the core after the step) and ``step`` against the previous step."""
        last, state = self._last, now.state
        epoch = state.leader_epoch
        if epoch < last.state.leader_epoch:
            self._fail(f"epoch went from {last.state.leader_epoch} down to {epoch}")
        self._check_once_per_epoch(epoch, state.voted_id, NO_VOTE, "_vote", "voted for")
        self._check_once_per_epoch(epoch, state.leader_id, NO_LEADER, "_leader", "has the leader")
        if now.is_leader and state.leader_id != self._local_id:
            self._fail(f"is the leader of epoch {epoch} but names {state.leader_id} as the leader")
        if now.high_watermark < last.high_watermark:
            self._fail(f"high watermark went from {last.high_watermark} down to {now.high_watermark}")
        if now.high_watermark > now.log_end_offset:
            self._fail(f"high watermark {now.high_watermark} is beyond the log end {now.log_end_offset}")
        self._check_persisted(last, now, step)
        self._last = now

    def _check_once_per_epoch(self, epoch: int, value: int, none: int, attribute: str, what: str) -> None:
        known_epoch, known = getattr(self, attribute)
        if value == none:
            if epoch != known_epoch:
                setattr(self, attribute, (epoch, none))
            return
        if epoch == known_epoch and known not in (none, value):
            self._fail(f"{what} {known} and then {value} in epoch {epoch}")
        setattr(self, attribute, (epoch, value))

    def _check_persisted(self, last: ReplicaView, now: ReplicaView, step: StepResult) -> None:
        durable = _identity(last.state)
        flushed = last.log_end_offset
        for effect in step.persist:
            if isinstance(effect, PersistQuorumState):
                durable = _identity(effect.state)
            elif isinstance(effect, FlushLog):
                flushed = effect.end_offset
        if durable != _identity(now.state):
            self._fail(f"the step leaves quorum state {now.state} but persists {durable} (leader, epoch, vote)")
        if flushed != now.log_end_offset:
            self._fail(f"the step leaves the log end at {now.log_end_offset} but flushes it at {flushed}")


def _identity(state: QuorumStateData) -> tuple[int, int, int]:
    return state.leader_id, state.leader_epoch, state.voted_id
