"""Safety invariants of KIP-595, checked by the simulation after every event and effect.

* **single leader**: at most one leader per epoch, over the whole run;
* **monotonic epoch**: a replica's epoch never decreases (within one disk lineage);
* **persist before send**: once a step's ``persist`` effects are executed, the durable quorum-state
  file says what the core's role implies and the durable log equals the core's log, before any
  message of the step leaves; a granted vote is on disk when the VoteResponse is sent;
* **one vote per epoch**: a replica (lineage) grants at most one candidate per epoch, across restarts;
* **monotonic high watermark**: within one incarnation of a replica, and the committed prefix
  observed cluster-wide only ever grows;
* **committed data**: every replica's entries below its high watermark equal the committed prefix,
  a committed entry is never truncated, and a majority of voters hold the committed prefix durably
  (KIP-630: below a replica's log start, its durable snapshot holds it);
* **snapshots** (KIP-630): a snapshot, written locally or fetched from the leader, holds exactly
  the committed data payloads below its end offset (``check_snapshot``), and a log prefix is only
  deleted below a durable snapshot (``SimDisk``).

What one replica can see of itself (epoch, vote and leader per epoch, high watermark, persist before
send) the core also checks after every step (``broker.raft.invariants``), stopping the node; a
violation it finds fails the run like these (``Cluster._step``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from broker.raft.core import RaftCore
from broker.raft.effects import PersistEffect, Send, TruncateLog
from broker.raft.log import Entry, VotersRecord
from broker.raft.messages import VoteResponse
from broker.raft.snapshot import SnapshotId, decode_snapshot
from tests.sim.disk import SimDisk


class InvariantViolation(AssertionError):
    pass


class NodeView(Protocol):
    node_id: int
    disk: SimDisk
    core: RaftCore | None
    incarnation: int


class Invariants:
    def __init__(self, nodes: Mapping[int, NodeView], voters: frozenset[int]) -> None:
        self._nodes = nodes
        self._voters = sorted(voters)
        self._majority = len(voters) // 2 + 1
        self.leaders_by_epoch: dict[int, int] = {}
        self._votes: dict[tuple[int, int, int], int] = {}  # (node, lineage, epoch) -> candidate
        self._epochs: dict[tuple[int, int], int] = {}  # (node, lineage) -> last epoch
        self._high_watermarks: dict[tuple[int, int], int] = {}  # (node, incarnation) -> hw
        self.committed: list[Entry] = []
        self._verified: dict[tuple[int, int], int] = {}  # (node, incarnation) -> prefix checked
        self._durable_agree: dict[int, int] = {}
        self.check_majority = True

    def _fail(self, message: str) -> None:
        raise InvariantViolation(message)

    # -- per effect ------------------------------------------------------------------------------
    def before_persist(self, node: NodeView, effect: PersistEffect) -> None:
        """A committed entry is never truncated."""
        if isinstance(effect, TruncateLog):
            log = node.disk.volatile_log
            start = node.disk.log_start
            for offset in range(effect.end_offset, min(start + len(log), len(self.committed))):
                if log[offset - start] == self.committed[offset]:
                    self._fail(
                        f"node {node.node_id} truncates to {effect.end_offset}, "
                        f"removing committed entry {self.committed[offset]}"
                    )

    def after_persist(self, node: NodeView) -> None:
        """Persist before send: the durable state matches the core before the step's sends."""
        core = node.core
        assert core is not None
        stored = node.disk.quorum_state
        expected = core.quorum_state_data()
        if stored is None or (stored.leader_id, stored.leader_epoch, stored.voted_id) != (
            expected.leader_id,
            expected.leader_epoch,
            expected.voted_id,
        ):
            self._fail(f"node {node.node_id}: quorum state on disk {stored} but the core is at {expected}")
        durable = node.disk.durable_log
        end = core.log.end_offset
        if node.disk.durable_end != end or (durable and durable[-1] != core.log.entry(end - 1)):
            self._fail(f"node {node.node_id}: log end {end} not durable (disk has {node.disk.durable_end})")
        if node.disk.log_start != core.log.start_offset:
            self._fail(f"node {node.node_id}: log start {core.log.start_offset}, on disk {node.disk.log_start}")
        key = (node.node_id, node.disk.lineage)
        if core.epoch < self._epochs.get(key, 0):
            self._fail(f"node {node.node_id}: epoch went from {self._epochs[key]} down to {core.epoch}")
        self._epochs[key] = core.epoch

    def on_send(self, node: NodeView, send: Send) -> None:
        message = send.message
        if isinstance(message, VoteResponse) and message.vote_granted:
            self._record_vote(node, message.leader_epoch, send.destination)
            stored = node.disk.quorum_state
            if stored is None or stored.voted_id != send.destination or stored.leader_epoch != message.leader_epoch:
                self._fail(f"node {node.node_id} grants {send.destination} a vote not on disk ({stored})")

    def _record_vote(self, node: NodeView, epoch: int, candidate: int) -> None:
        key = (node.node_id, node.disk.lineage, epoch)
        previous = self._votes.setdefault(key, candidate)
        if previous != candidate:
            self._fail(f"node {node.node_id} voted for {previous} and {candidate} in epoch {epoch}")

    def on_restart(self, node: NodeView) -> None:
        self._verified.pop((node.node_id, node.incarnation), None)

    # -- after every event -----------------------------------------------------------------------
    def check(self) -> None:
        for node in self._nodes.values():
            core = node.core
            if core is None:
                continue
            epoch = core.epoch
            if core.is_leader:
                leader = self.leaders_by_epoch.setdefault(epoch, node.node_id)
                if leader != node.node_id:
                    self._fail(f"two leaders in epoch {epoch}: {leader} and {node.node_id}")
            if core.role == "candidate" or core.is_leader:
                self._record_vote(node, epoch, node.node_id)
            self._check_high_watermark(node, core)
        if self.check_majority:
            self._check_majority_holds_committed()

    def _check_high_watermark(self, node: NodeView, core: RaftCore) -> None:
        key = (node.node_id, node.incarnation)
        hw = core.high_watermark
        previous = self._high_watermarks.get(key, 0)
        if hw < previous:
            self._fail(f"node {node.node_id}: high watermark went from {previous} down to {hw}")
        self._high_watermarks[key] = hw
        verified = self._verified.get(key, 0)
        if hw <= verified:
            return
        entries = core.log.entries()
        start = core.log.start_offset
        if hw > core.log.end_offset:
            self._fail(f"node {node.node_id}: high watermark {hw} beyond log end {core.log.end_offset}")
        committed = self.committed
        if len(committed) < start:
            self._fail(f"node {node.node_id}: log starts at {start}, beyond the {len(committed)} committed entries")
        for offset in range(max(verified, start), min(hw, len(committed))):
            if entries[offset - start] != committed[offset]:
                self._fail(
                    f"node {node.node_id}: committed offset {offset} is {entries[offset - start]} "
                    f"but was committed as {committed[offset]}"
                )
        if hw > len(committed):
            committed.extend(entries[len(committed) - start : hw - start])
        self._verified[key] = hw

    def check_snapshot(self, node: NodeView, snapshot_id: SnapshotId, data: bytes) -> None:
        """A snapshot holds exactly the committed data payloads below its end offset, and the
        voter set in effect there (KIP-853: the last VotersRecord below its end, if any)."""
        end = snapshot_id.end_offset
        if node.core is not None:
            self._check_high_watermark(node, node.core)  # the step that moved it is not checked yet
        if end > len(self.committed):
            self._fail(f"node {node.node_id}: snapshot {snapshot_id} beyond the committed prefix {len(self.committed)}")
        snapshot = decode_snapshot(snapshot_id, data)
        expected = [e.payload for e in self.committed[:end] if isinstance(e.payload, bytes)]
        if list(snapshot.records) != expected:
            self._fail(f"node {node.node_id}: snapshot {snapshot_id} does not hold the committed data")
        if self.committed[end - 1].epoch != snapshot_id.epoch:
            self._fail(f"node {node.node_id}: snapshot {snapshot_id} epoch is not that of entry {end - 1}")
        voters = [e.payload for e in self.committed[:end] if isinstance(e.payload, VotersRecord)]
        carried = {v.voter_id for v in snapshot.voters.voters} if snapshot.voters is not None else None
        if (voters[-1].ids if voters else None) != (frozenset(carried) if carried is not None else None):
            self._fail(f"node {node.node_id}: snapshot {snapshot_id} voters {carried} are not the log's")

    def _voter_sets(self) -> list[frozenset[int]]:
        """KIP-853: the voter set of the last committed VotersRecord (else the initial one), and
        the set each running leader counts (a newer, appended VotersRecord takes effect at once)."""
        sets = [frozenset(self._voters)]
        for entry in reversed(self.committed):
            if isinstance(entry.payload, VotersRecord):
                sets = [entry.payload.ids]
                break
        for node in self._nodes.values():
            core = node.core
            if core is not None and core.is_leader:
                sets.append(core.voters)
        return sets

    def _check_majority_holds_committed(self) -> None:
        committed = self.committed
        target = len(committed)
        held: set[int] = set()
        voter_sets = self._voter_sets()
        for voter in sorted(set().union(*voter_sets)):
            disk = self._nodes[voter].disk
            agree = min(self._durable_agree.get(voter, 0), disk.take_changed_from())
            base = disk.log_start  # below it, the durable snapshot holds the data (check_snapshot)
            agree = max(agree, base)
            durable = disk.durable_log
            limit = min(base + len(durable), target)
            while agree < limit and durable[agree - base] == committed[agree]:
                agree += 1
            self._durable_agree[voter] = agree
            if agree >= target:
                held.add(voter)
        if not any(len(held & voters) >= len(voters) // 2 + 1 for voters in voter_sets):
            self._fail(f"committed prefix of {target} entries is durable on voters {sorted(held)} only")
