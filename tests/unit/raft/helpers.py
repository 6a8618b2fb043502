"""Building cores in a given role and reading their step results, for the KIP-595 rule tests."""

from __future__ import annotations

import random
from collections.abc import Sequence

from broker.raft.config import RaftConfig
from broker.raft.core import RaftCore
from broker.raft.effects import PersistQuorumState, QuorumStateData, Send, StepResult
from broker.raft.log import Entry
from broker.raft.messages import (
    NO_LEADER,
    NO_VOTE,
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Inbound,
    Message,
    VoteRequest,
    VoteResponse,
)

CLUSTER = "test-cluster"


def log_of(*epochs: int, payload: bytes = b"x") -> list[Entry]:
    """Entries at offsets 0.. with the given epochs."""
    return [Entry(offset, epoch, payload + b"%d" % offset) for offset, epoch in enumerate(epochs)]


def state(
    epoch: int, leader: int = NO_LEADER, voted: int = NO_VOTE, voters: Sequence[int] = (1, 2, 3)
) -> QuorumStateData:
    return QuorumStateData(leader, epoch, voted, 0, tuple(voters))


def make_core(
    node_id: int = 1,
    voters: Sequence[int] = (1, 2, 3),
    *,
    stored: QuorumStateData | None = None,
    log: Sequence[Entry] = (),
    cluster_id: str | None = CLUSTER,
    seed: int = 0,
    now_ms: int = 0,
    **config: int,
) -> tuple[RaftCore, StepResult]:
    core = RaftCore(
        RaftConfig(node_id=node_id, voters=frozenset(voters), **config),
        stored_state=stored,
        log_entries=log,
        cluster_id=cluster_id,
        rng=random.Random(seed),
        now_ms=now_ms,
    )
    return core, core.start(now_ms)


def sends(result: StepResult, kind: type | None = None) -> list[Send]:
    return [s for s in result.send if kind is None or isinstance(s.message, kind)]


def messages(result: StepResult, kind: type) -> list[Message]:
    return [s.message for s in result.send if isinstance(s.message, kind)]


def persisted(result: StepResult) -> list[QuorumStateData]:
    return [e.state for e in result.persist if isinstance(e, PersistQuorumState)]


def deliver(core: RaftCore, source: int, message: Message, now_ms: int, correlation_id: int = 7) -> StepResult:
    return core.handle(Inbound(source, correlation_id, message), now_ms)


def reply(core: RaftCore, request: Send, response: Message, now_ms: int) -> StepResult:
    """Answer one of the core's requests (same correlation id)."""
    return core.handle(Inbound(request.destination, request.correlation_id, response), now_ms)


def elect(core: RaftCore, now_ms: int) -> StepResult:
    """Drive a voter through its election timeout and a unanimous vote to leadership."""
    result = core.tick(now_ms + 10_000)
    assert core.role == "candidate", core.role
    for request in sends(result, VoteRequest):
        result = reply(core, request, VoteResponse(0, NO_LEADER, core.epoch, True), now_ms + 10_000)
        if core.is_leader:
            return result
    raise AssertionError("not elected")


def follow(core: RaftCore, leader: int, epoch: int, now_ms: int) -> StepResult:
    result = deliver(core, leader, BeginQuorumEpochRequest(CLUSTER, leader, epoch), now_ms)
    assert core.role in ("follower", "observer")
    assert core.leader_id == leader
    return result


def fetch(replica: int, epoch: int, fetch_offset: int, last_fetched_epoch: int, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(CLUSTER, replica, max_wait_ms, epoch, fetch_offset, last_fetched_epoch)


def fetch_response(result: StepResult) -> FetchResponse:
    (response,) = messages(result, FetchResponse)
    assert isinstance(response, FetchResponse)
    return response
