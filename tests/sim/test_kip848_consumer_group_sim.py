"""Seeded simulation of a KIP-848 consumer group: the real pure core (``ConsumerGroup``) driven by
simulated members that join, leave, crash, heartbeat late, lose responses, revoke slowly and
sometimes omit their owned partitions, while topics grow and new topics match a regex.

Invariants checked after every event (KIP-848 "Reconciliation": a partition is given to a new
owner only after its previous owner revoked it; "Member Epoch"):

* no partition is consumed by two members at once (clients' owned sets are disjoint, counting a
  crashed member until the coordinator expired it);
* the coordinator's owner map is exactly the members' assigned and revoking partitions;
* member epoch <= assignment epoch <= group epoch.

Liveness: once the faults stop and every live member heartbeats promptly, the group reaches
Stable with every subscribed partition owned by exactly one member, balanced (uniform).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from broker.coordinator.consumer_group.config import ConsumerGroupConfig
from broker.coordinator.consumer_group.group import (
    ConsumerGroup,
    ConsumerGroupState,
    HeartbeatError,
    HeartbeatRequest,
)
from pyspark_log.wire.errors import ErrorCode
from tests.sim.seeds import ci_seeds, run_seeds

CONFIG = ConsumerGroupConfig(session_timeout_ms=3000, min_session_timeout_ms=1000, heartbeat_interval_ms=500,
                             min_heartbeat_interval_ms=100)  # fmt: skip
TP = tuple[str, int]


class Violation(AssertionError):
    pass


@dataclass
class Client:
    """A consumer as the protocol sees it: its member id, epoch and the partitions it consumes."""

    member_id: str
    regex: bool
    epoch: int = 0
    owned: set[TP] = field(default_factory=set)
    to_revoke: set[TP] = field(default_factory=set)  # told to give up, not yet done (slow revocation)
    joined: bool = False
    crashed: bool = False
    last_beat_ms: int = 0


def owned_map(parts: set[TP]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for t, p in parts:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def scenario(seed: int) -> None:
    rng = random.Random(seed)
    group = ConsumerGroup("g")
    topics: dict[str, tuple[object, int]] = {"t": (uuid.uuid4(), rng.randint(1, 8))}
    clients: dict[str, Client] = {}
    now = 0
    counter = 0
    expired: set[str] = set()
    last_seen: dict[str, int] = {}  # the driver's session timers: member id -> last heartbeat

    def check(event: str) -> None:
        seen: dict[TP, str] = {}
        for c in clients.values():
            if c.member_id in expired or not c.joined:
                continue
            for tp in c.owned:
                if tp in seen:
                    raise Violation(f"seed={seed} after {event}: {tp} consumed by {seen[tp]} and {c.member_id}")
                seen[tp] = c.member_id
        expected: dict[TP, str] = {}
        for m in group.members.values():
            for parts in (m.assignment.assigned, m.assignment.pending_revocation):
                for t, ps in parts.items():
                    for p in ps:
                        assert (t, p) not in expected, f"seed={seed}: {(t, p)} held twice on the coordinator"
                        expected[(t, p)] = m.member_id
        assert group.owners == expected, f"seed={seed} after {event}: owner map drifted"
        assert group.assignment_epoch <= group.group_epoch
        for m in group.members.values():
            assert m.member_epoch <= group.assignment_epoch or m.member_epoch == -2, f"seed={seed}: epoch ahead"

    def heartbeat(c: Client, *, prompt: bool) -> None:
        # a slow member finishes revoking only sometimes
        if c.to_revoke and (prompt or rng.random() < 0.5):
            c.owned -= c.to_revoke
            c.to_revoke.clear()
        if not c.joined:
            req = HeartbeatRequest(
                c.member_id, 0, rebalance_timeout_ms=5000, owned={},
                subscribed_topic_names=None if c.regex else ("t",),
                subscribed_topic_regex="t|new-.*" if c.regex else None,
            )  # fmt: skip
        else:
            report = owned_map(c.owned) if prompt or rng.random() < 0.8 else None
            req = HeartbeatRequest(c.member_id, c.epoch, owned=report)
        try:
            out = group.heartbeat(req, topics, CONFIG, now, full_request=not c.joined)
        except HeartbeatError as exc:
            if exc.code not in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                raise Violation(f"seed={seed}: unexpected {exc}") from exc
            c.owned.clear()  # abandon everything and rejoin
            c.to_revoke.clear()
            c.joined, c.epoch = False, 0
            expired.discard(c.member_id)
            return
        c.last_beat_ms = now
        last_seen[out.member_id] = now
        if not prompt and rng.random() < 0.1:
            return  # the response is lost
        c.joined, c.epoch = True, out.member_epoch
        if out.assignment is not None:
            given = {(t, p) for t, ps in out.assignment.items() for p in ps}
            c.to_revoke |= c.owned - given
            c.owned |= given
            if prompt:
                c.owned -= c.to_revoke
                c.to_revoke.clear()

    for step in range(rng.randint(150, 400)):
        now += rng.randint(10, 400)
        roll = rng.random()
        live = [c for c in clients.values() if not c.crashed]
        if roll < 0.08 and len(clients) < 6:
            counter += 1
            c = Client(f"m{counter}", regex=rng.random() < 0.3)
            clients[c.member_id] = c
            heartbeat(c, prompt=False)
            event = f"join {c.member_id}"
        elif roll < 0.12 and live:
            c = rng.choice(live)
            if c.joined:
                try:
                    group.heartbeat(HeartbeatRequest(c.member_id, -1), topics, CONFIG, now, full_request=False)
                except HeartbeatError:
                    pass
            del clients[c.member_id]
            event = f"leave {c.member_id}"
        elif roll < 0.15 and live:
            c = rng.choice(live)
            c.crashed = True
            event = f"crash {c.member_id}"
        elif roll < 0.17:
            tid, count = topics["t"]
            topics["t"] = (tid, count + 1)
            event = "t grows"
        elif roll < 0.19:
            topics[f"new-{step}"] = (uuid.uuid4(), rng.randint(1, 3))
            event = "new topic"
        elif live:
            c = rng.choice(live)
            heartbeat(c, prompt=False)
            event = f"heartbeat {c.member_id}"
        else:
            continue
        # the driver's session timer: members silent for the session timeout are fenced
        for member_id in list(group.members):
            if now - last_seen.get(member_id, now) > CONFIG.session_timeout_ms:
                group.expire_member(member_id)
                expired.add(member_id)
                if member_id in clients and clients[member_id].crashed:
                    del clients[member_id]
        check(event)

    # quiescence: no faults, crashed members expire, everyone heartbeats promptly
    now += CONFIG.session_timeout_ms + 1
    for c in list(clients.values()):
        if c.crashed:
            del clients[c.member_id]
    for member_id in list(group.members):
        if member_id not in clients:  # crashed, or left without the coordinator hearing it
            group.expire_member(member_id)
    for _ in range(30):
        for c in list(clients.values()):
            heartbeat(c, prompt=True)
            check("settle")
    if not clients:
        assert group.state is ConsumerGroupState.EMPTY
        return
    assert group.state is ConsumerGroupState.STABLE, f"seed={seed}: {group.state} after settling"
    wanted = set()
    for c in clients.values():
        names = {t for t in topics if t == "t" or (c.regex and t.startswith("new-"))}
        wanted |= {(t, p) for t in names for p in range(topics[t][1])}
    got = [tp for c in clients.values() for tp in c.owned]
    assert sorted(got) == sorted(wanted), f"seed={seed}: partitions not covered exactly once"
    if not any(c.regex for c in clients.values()) or all(c.regex for c in clients.values()):
        sizes = [len(c.owned) for c in clients.values()]
        assert max(sizes) - min(sizes) <= 1, f"seed={seed}: unbalanced {sizes}"


@ci_seeds(40)
def test_kip848_group_simulation(seeds: list[int]) -> None:
    run_seeds(seeds, scenario)
