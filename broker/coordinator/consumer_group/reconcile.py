"""KIP-848 reconciliation of a member's current assignment towards its target assignment.

Pure (no clock, no I/O). KIP-848 "Reconciliation" / Kafka's ``CurrentAssignmentBuilder``: a member
moves from its current assignment to the target one in steps, and a partition is given to a new
owner only once its previous owner has revoked it.

States (``MemberState``), and the one function that moves between them (``reconcile``):

=========================  =====================================================================
STABLE                     the member has its whole target assignment at the target epoch; when
                           the target epoch moves past its epoch it reconciles again
UNREVOKED_PARTITIONS       it must give up ``pending_revocation`` first; its epoch stays until a
                           heartbeat reports owned partitions without them (no report: still owned)
UNRELEASED_PARTITIONS      it is at the target epoch but some target partitions are still owned
                           by others; each heartbeat re-checks and adds the freed ones
=========================  =====================================================================

``compute_next`` is the step: kept = current ∩ target; revoked = current − target; if anything is
revoked the member keeps only ``kept`` at its current epoch (UNREVOKED_PARTITIONS); otherwise it
gets ``kept`` plus the new partitions nobody else owns, at the target epoch (UNRELEASED_PARTITIONS
if some new ones are still owned elsewhere, STABLE if not).

Each owned partition (assigned or pending revocation) also keeps its **assignment epoch**, the
member epoch at which the member got it (KIP-1251 "Assignment epochs for consumer groups", Kafka
4.3): a kept partition keeps its epoch, a new one gets the target epoch. An offset commit naming an
older member epoch is then still the owner's when ``assignment epoch <= its epoch <= member epoch``.
A partition without a recorded epoch (from an assignment record written without them, as Kafka 4.1
writes it, or converted from a classic member) counts as assigned at the member's epoch.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Partitions = dict[str, frozenset[int]]  # topic -> partitions (never an empty set)
AssignmentEpochs = dict[tuple[str, int], int]  # (topic, partition) -> the member epoch it came at


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True)
class MemberAssignment:
    """A member's reconciliation state: its epochs, what it may use and what it must give up."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    assigned_at: AssignmentEpochs = field(default_factory=dict)

    def assignment_epoch(self, topic: str, partition: int) -> int | None:
        """The epoch at which the member got ``topic``/``partition`` (KIP-1251); None when it owns
        it neither as assigned nor as pending revocation."""
        if partition in self.assigned.get(topic, ()) or partition in self.pending_revocation.get(topic, ()):
            return self.assigned_at.get((topic, partition), self.member_epoch)
        return None


def normalize(parts: Mapping[str, frozenset[int] | set[int]]) -> Partitions:
    return {t: frozenset(ps) for t, ps in parts.items() if ps}


def contains_any(owned: Mapping[str, frozenset[int]], parts: Mapping[str, frozenset[int]]) -> bool:
    return any(owned.get(t, frozenset()) & ps for t, ps in parts.items())


def is_subset(small: Mapping[str, frozenset[int]], big: Mapping[str, frozenset[int]]) -> bool:
    return all(ps <= big.get(t, frozenset()) for t, ps in small.items())


def reconcile(
    member: MemberAssignment,
    target_epoch: int,
    target: Mapping[str, frozenset[int]],
    owned_elsewhere: Callable[[str, int], bool],
    reported_owned: Mapping[str, frozenset[int]] | None,
) -> MemberAssignment:
    """The member's next state for target assignment ``target`` at ``target_epoch``.

    ``owned_elsewhere(topic, partition)``: another member has it assigned or pending revocation.
    ``reported_owned``: the partitions the member's heartbeat says it owns (None: not sent).
    """
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if reported_owned is None or contains_any(reported_owned, member.pending_revocation):
            return member  # still owns (or did not say it gave up) partitions it must revoke
        return compute_next(member, target_epoch, target, owned_elsewhere)
    if member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    return compute_next(member, target_epoch, target, owned_elsewhere)


def compute_next(
    member: MemberAssignment,
    target_epoch: int,
    target: Mapping[str, frozenset[int]],
    owned_elsewhere: Callable[[str, int], bool],
) -> MemberAssignment:
    """One reconciliation step (see the module docstring)."""
    kept: dict[str, set[int]] = {}
    revoked: dict[str, set[int]] = {}
    new_free: dict[str, set[int]] = {}
    unreleased = False
    for topic in set(member.assigned) | set(target):
        current = member.assigned.get(topic, frozenset())
        wanted = target.get(topic, frozenset())
        kept[topic] = set(current & wanted)
        revoked[topic] = set(current - wanted)
        free = {p for p in wanted - current if not owned_elsewhere(topic, p)}
        unreleased = unreleased or len(free) < len(wanted - current)
        new_free[topic] = free
    held = {  # what the member keeps or revokes came at its recorded epoch
        (t, p): member.assigned_at.get((t, p), member.member_epoch)
        for parts in (kept, revoked)
        for t, ps in parts.items()
        for p in ps
    }
    if any(revoked.values()):
        return MemberAssignment(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=normalize(kept),
            pending_revocation=normalize(revoked),
            assigned_at=held,
        )
    assigned = normalize({t: kept[t] | new_free[t] for t in kept})
    epoch_moves = target_epoch != member.member_epoch
    return MemberAssignment(
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch if epoch_moves else member.previous_member_epoch,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned=assigned,
        pending_revocation={},
        assigned_at=held | {(t, p): target_epoch for t, ps in new_free.items() for p in ps},
    )
