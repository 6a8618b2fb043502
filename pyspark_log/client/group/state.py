"""A group member's view of its membership: state, generation, member id (client side of the
classic group protocol)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

NO_GENERATION = -1


class MemberState(enum.Enum):
    UNJOINED = "unjoined"  # no generation: the next poll joins
    PREPARING_REBALANCE = "preparing-rebalance"  # JoinGroup sent
    COMPLETING_REBALANCE = "completing-rebalance"  # joined a generation; SyncGroup sent
    STABLE = "stable"  # has this generation's assignment; heartbeats


_M = MemberState
_ALLOWED: dict[MemberState, frozenset[MemberState]] = {
    _M.UNJOINED: frozenset({_M.PREPARING_REBALANCE, _M.UNJOINED}),
    _M.PREPARING_REBALANCE: frozenset({_M.COMPLETING_REBALANCE, _M.UNJOINED, _M.PREPARING_REBALANCE}),
    _M.COMPLETING_REBALANCE: frozenset({_M.STABLE, _M.PREPARING_REBALANCE, _M.UNJOINED}),
    _M.STABLE: frozenset({_M.PREPARING_REBALANCE, _M.UNJOINED}),
}


class IllegalMemberTransition(RuntimeError):
    """A move the table of ``Membership.transition_to`` does not allow: a client bug."""


@dataclass
class Membership:
    """The one owner of a member's state transitions."""

    state: MemberState = MemberState.UNJOINED
    generation_id: int = NO_GENERATION
    member_id: str = ""
    protocol: str | None = None
    leader_id: str = ""

    def transition_to(self, target: MemberState) -> None:
        """Move to ``target``; raise ``IllegalMemberTransition`` unless allowed::

            from \\ to              UNJOINED  PREPARING  COMPLETING  STABLE
            UNJOINED                  yes       yes         -          -
            PREPARING_REBALANCE       yes       yes        yes         -
            COMPLETING_REBALANCE      yes       yes         -         yes
            STABLE                    yes       yes         -          -

        UNJOINED → PREPARING: JoinGroup sent (again after MEMBER_ID_REQUIRED or a retriable
        error). PREPARING → COMPLETING: JoinGroup answered with a generation. COMPLETING →
        STABLE: SyncGroup answered with the assignment; → PREPARING: REBALANCE_IN_PROGRESS, join
        again. STABLE → PREPARING: a rebalance is needed. Any → UNJOINED: the member left, was
        fenced or lost its generation.
        """
        if target not in _ALLOWED[self.state]:
            raise IllegalMemberTransition(f"{self.state.value} -> {target.value}")
        self.state = target

    @property
    def is_stable(self) -> bool:
        return self.state is MemberState.STABLE

    @property
    def has_generation(self) -> bool:
        return self.generation_id != NO_GENERATION and bool(self.member_id)

    def join_answered(self, generation_id: int, member_id: str, protocol: str | None, leader_id: str) -> None:
        self.transition_to(MemberState.COMPLETING_REBALANCE)
        self.generation_id, self.member_id, self.protocol, self.leader_id = (
            generation_id,
            member_id,
            protocol,
            leader_id,
        )

    def reset(self, *, keep_member_id: bool = False) -> None:
        """Forget the generation (and the member id, unless kept); UNJOINED."""
        self.transition_to(MemberState.UNJOINED)
        self.generation_id, self.protocol, self.leader_id = NO_GENERATION, None, ""
        if not keep_member_id:
            self.member_id = ""
