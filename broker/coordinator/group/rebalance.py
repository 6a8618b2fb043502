"""Rebalances of the classic group protocol: JoinGroup and SyncGroup, the join/sync/heartbeat
timers, and member removal. ``GroupCoordinator`` (``coordinator.py``) owns one ``Rebalancer``;
the rules are listed in that module's docstring.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker.coordinator.group.group import (
    Group,
    GroupState,
    JoinCallback,
    JoinResult,
    Member,
    SyncCallback,
    SyncResult,
)
from broker.coordinator.group.manager import GroupConfig, GroupManager
from broker.coordinator.group.store import StoreError
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

S = GroupState


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


class Rebalancer:
    """Drives groups through rebalances; shares the cache and timers of ``manager``."""

    def __init__(
        self, config: GroupConfig, manager: GroupManager, clock_ms: Callable[[], int], rng: random.Random | None
    ) -> None:
        self.config = config
        self.manager = manager
        self._clock_ms = clock_ms
        self._rng = rng or random.Random()
        manager.on_group_loaded = self._on_group_loaded

    def _on_group_loaded(self, group: Group) -> None:
        for member in group.members.values():
            self.schedule_heartbeat(group, member, member.session_timeout_ms)

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    # -- timers --------------------------------------------------------------------------------

    def schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int) -> None:
        gid, mid = group.group_id, member.member_id
        self.manager.timers.schedule(
            ("heartbeat", gid, mid), self._clock_ms() + timeout_ms, lambda: self._on_heartbeat_expired(gid, mid)
        )

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self.manager.groups.get(group_id)
        if group is None or group.is_(S.DEAD) or not group.has(member_id):
            return
        member = group.get(member_id)
        if member.is_new or not (member.is_awaiting_join or member.is_awaiting_sync):
            log.info("member %s of group %s failed (session timeout); removing it", member_id, group_id)
            self.remove_member_and_update_group(group, member)

    def _on_pending_member_expired(self, group_id: str, member_id: str) -> None:
        group = self.manager.groups.get(group_id)
        if group is not None and member_id in group.pending_members:
            group.remove(member_id)
            if group.is_(S.PREPARING_REBALANCE):
                self.try_complete_join(group)

    # -- validation ----------------------------------------------------------------------------

    @staticmethod
    def validate_member(group: Group, member_id: str, instance_id: str | None) -> int | None:
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("member %s of static instance %s is fenced by %s", member_id, instance_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.config.max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or group.num_awaiting_join < limit
        return group.has(member_id) or group.size < limit

    # -- JoinGroup -----------------------------------------------------------------------------

    def join_group(self, req: JoinRequest, callback: JoinCallback) -> None:
        error = self.manager.status(req.group_id)
        if error is not None:
            callback(JoinResult(error, req.member_id))
            return
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            callback(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
            return
        unknown = req.member_id == ""
        group = self.manager.groups.get(req.group_id)
        if group is None:
            if not unknown:
                callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
                return
            group = self.manager.groups[req.group_id] = Group(req.group_id)
        if not self._accept_joining_member(group, req.member_id):
            if group.has(req.member_id):
                self.remove_member_and_update_group(group, group.get(req.member_id))
            callback(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
        elif unknown:
            self._new_member_join(group, req, callback)
        else:
            self._current_member_join(group, req, callback)
        if group.is_(S.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def _new_member_join(self, group: Group, req: JoinRequest, callback: JoinCallback) -> None:
        if group.is_(S.DEAD):
            callback(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, ""))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
            return
        new_id = self._new_member_id(req.group_instance_id or req.client_id)
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None:
                self._update_static_member(group, old_id, new_id, req, callback)
            else:
                self._add_member_and_rebalance(group, new_id, req, callback)
        elif req.require_known_member_id:
            group.pending_members.add(new_id)
            gid = group.group_id
            self.manager.timers.schedule(
                ("heartbeat", gid, new_id),
                self._clock_ms() + req.session_timeout_ms,
                lambda: self._on_pending_member_expired(gid, new_id),
            )
            callback(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, new_id, req, callback)

    def _current_member_join(self, group: Group, req: JoinRequest, callback: JoinCallback) -> None:
        member_id = req.member_id
        if group.is_(S.DEAD):
            callback(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            if req.group_instance_id is not None:  # a pending member id is never a static member's
                callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            self._add_member_and_rebalance(group, member_id, req, callback)
            return
        error = self.validate_member(group, member_id, req.group_instance_id)
        if error is not None:
            callback(JoinResult(error, member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, callback)
        elif state is S.COMPLETING_REBALANCE:
            if member.matches(req.protocols):  # a retry of a join whose answer got lost
                members = group.current_member_metadata() if group.is_leader(member_id) else ()
                callback(self._join_result(group, member_id, members))
            else:
                self._update_member_and_rebalance(group, member, req, callback)
        elif state is S.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, callback)
            else:
                callback(self._join_result(group, member_id, ()))
        else:
            log.warning("member %s rejoins group %s in state %s", member_id, group.group_id, state.value)
            callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def _join_result(
        group: Group, member_id: str, members: tuple[tuple[str, str | None, bytes], ...], leader: str | None = None
    ) -> JoinResult:
        return JoinResult(
            ErrorCode.NONE,
            member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            (group.leader_id if leader is None else leader) or "",
            members,
        )

    def _add_member_and_rebalance(self, group: Group, member_id: str, req: JoinRequest, callback: JoinCallback) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            [(n, bytes(m)) for n, m in req.protocols],
            is_new=True,
        )
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        self.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"adding member {member_id}")

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest, callback: JoinCallback
    ) -> None:
        member.rebalance_timeout_ms, member.session_timeout_ms = req.rebalance_timeout_ms, req.session_timeout_ms
        group.update_member(member, req.protocols, callback)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoins")

    def _update_static_member(
        self, group: Group, old_id: str, new_id: str, req: JoinRequest, callback: JoinCallback
    ) -> None:
        assert req.group_instance_id is not None
        instance_id = req.group_instance_id
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.manager.timers.cancel(("heartbeat", group.group_id, old_id))
        self.schedule_heartbeat(group, member, member.session_timeout_ms)
        old_protocols = list(member.protocols)
        group.update_member(member, req.protocols, callback)
        if group.is_(S.STABLE):
            if group.protocol_name == group.select_protocol():
                log.info(
                    "static member %s of group %s rejoins as %s: no rebalance", instance_id, group.group_id, new_id
                )
                try:
                    self.manager.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                except StoreError as exc:
                    group.update_member(member, old_protocols, None)
                    group.replace_static_member(instance_id, new_id, old_id)
                    self.manager.timers.cancel(("heartbeat", group.group_id, new_id))
                    self.schedule_heartbeat(group, member, member.session_timeout_ms)
                    callback(JoinResult(exc.code, "", group.generation_id, group.protocol_type, group.protocol_name,
                                        current_leader or ""))  # fmt: skip
                    return
                # The old leader id keeps the rejoined member from computing an assignment a
                # Stable group would not hand out.
                group.invoke_join(member, self._join_result(group, new_id, (), leader=current_leader))
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changes the protocol")
        elif group.is_(S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"static member {instance_id} rejoins during CompletingRebalance")
        else:
            assert group.is_(S.PREPARING_REBALANCE), f"a known static member in a {group.state.value} group"

    # -- rebalance -----------------------------------------------------------------------------

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        """Start a rebalance of a Stable group now (a consumer group downgraded to this classic
        group: its members rejoin)."""
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.manager.timers.cancel(("sync", group.group_id))
        group.pending_sync_members.clear()
        initial = group.is_(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE)
        log.info("preparing to rebalance group %s (generation %s): %s", group.group_id, group.generation_id, reason)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            self._schedule_join(group)
            self.try_complete_join(group)

    def _schedule_join(self, group: Group) -> None:
        gid = group.group_id
        self.manager.timers.schedule(
            ("join", gid), self._clock_ms() + group.rebalance_timeout_ms, lambda: self._complete_join(gid)
        )
        group.initial_join = False

    def _schedule_initial_join(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        gid = group.group_id

        def expire() -> None:
            current = self.manager.groups.get(gid)
            if current is None:
                return
            if current.new_member_added and remaining_ms > 0:
                current.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(current, next_delay, max(remaining_ms - delay_ms, 0))
            else:
                self._complete_join(gid)

        self.manager.timers.schedule(("join", gid), self._clock_ms() + delay_ms, expire)
        group.initial_join = True

    def try_complete_join(self, group: Group) -> None:
        """Complete the rebalance now if every member rejoined (never during the initial delay)."""
        if (
            group.is_(S.PREPARING_REBALANCE)
            and not group.initial_join
            and ("join", group.group_id) in self.manager.timers
            and group.has_all_members_joined()
        ):
            self._complete_join(group.group_id)

    def _complete_join(self, group_id: str) -> None:
        group = self.manager.groups.get(group_id)
        if group is None or not group.is_(S.PREPARING_REBALANCE):
            return
        self.manager.timers.cancel(("join", group_id))
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("removing member %s of group %s: it did not rejoin in time", member.member_id, group_id)
                self._forget_member(group, member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s could not complete its rebalance: no member rejoined", group_id)
            self._schedule_join(group)
            return
        group.init_next_generation(self._clock_ms())
        if group.is_(S.EMPTY):
            log.info("group %s is empty (generation %s)", group_id, group.generation_id)
            try:
                self.manager.store_group(group, {})
            except StoreError as exc:
                log.warning("storing empty group %s failed: %s", group_id, exc)
            return
        log.info("group %s generation %s: %d member(s)", group_id, group.generation_id, group.size)
        for member in list(group.members.values()):
            members = group.current_member_metadata() if group.is_leader(member.member_id) else ()
            group.invoke_join(member, self._join_result(group, member.member_id, members))
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.manager.timers.schedule(
            ("sync", group_id),
            self._clock_ms() + group.rebalance_timeout_ms,
            lambda: self._on_sync_expired(group_id, generation),
        )

    def _on_sync_expired(self, group_id: str, generation: int) -> None:
        group = self.manager.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                if group.has(member_id):
                    self._forget_member(group, group.get(member_id))
            self._prepare_rebalance(group, f"members {missing} sent no SyncGroup in time")

    def _forget_member(self, group: Group, member: Member) -> None:
        group.invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self.manager.timers.cancel(("heartbeat", group.group_id, member.member_id))

    def remove_member_and_update_group(self, group: Group, member: Member) -> None:
        group.invoke_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        self._forget_member(group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_(S.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def _propagate_assignment_error(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: int) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.invoke_sync(member, result):
                self.schedule_heartbeat(group, member, member.session_timeout_ms)

    # -- SyncGroup -----------------------------------------------------------------------------

    def sync_group(  # noqa: PLR0917 - the fields of SyncGroup
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        error = self.manager.status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # the rebalance's state is lost: rejoin
            return
        if error is not None:
            callback(SyncResult(error))
            return
        group = self.manager.groups.get(group_id)
        if group is None:
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if group.is_(S.DEAD):
            callback(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        error = self.validate_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is None and (
            (protocol_type is not None and protocol_type != group.protocol_type)
            or (protocol_name is not None and protocol_name != group.protocol_name)
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            callback(SyncResult(error))
            return
        member = group.get(member_id)
        if group.is_(S.EMPTY):
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(S.PREPARING_REBALANCE):
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.sync_callback is not None:
                group.invoke_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_callback = callback
            self._received_sync(group, member_id)
            if group.is_leader(member_id):
                self._complete_sync(group, assignments)
        else:  # Stable: hand out the current assignment
            self._received_sync(group, member_id)
            callback(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self.schedule_heartbeat(group, member, member.session_timeout_ms)

    def _received_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.manager.timers.cancel(("sync", group.group_id))

    def _complete_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
        missing = [mid for mid in group.members if mid not in assignments]
        if missing:
            log.warning("group %s: the leader gave no assignment to %s", group.group_id, missing)
        try:
            self.manager.store_group(group, assignment)
        except StoreError as exc:
            self._propagate_assignment_error(group, exc.code)
            self._maybe_prepare_rebalance(group, f"storing the assignment failed: {exc}")
            return
        for mid, member in group.members.items():
            member.assignment = assignment[mid]
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(S.STABLE)
