"""Safety invariants of partition replication, checked after every simulated event.

Each is named after the Kafka documentation sentence it checks:

* ``hw_never_decreases_within_epoch`` — Kafka documentation §4.7 "Replication" "A message is considered
committed when all
  in sync replicas for that partition have applied it to their log": what the leader once called
  committed stays committed, so the leader's high watermark never moves back while one leader
  epoch lasts (over restarts of the leader too: the epoch is the leadership).
* ``hw_within_isr_end_offsets`` — the same sentence, on the leader's view: the high watermark is at
  most the log end offset of every ISR member the leader knows the end offset of (a member that
  lost its unflushed tail in a machine crash is exempt until it leaves the ISR; see below).
* ``acks_all_on_isr_and_later_leaders`` — Kafka documentation §4.7 "Replication" "the guarantee that Kafka
offers is that a
  committed message will not be lost, as long as there is at least one in sync replica alive":
  every offset acknowledged to an ``acks=all`` producer is held, with the same record (so the same
  leader epoch), by every member of the controller's ISR and by the leader of its epoch and of
  every later epoch.
* ``replicas_agree_below_hw`` — Kafka documentation §5.4.4 "Guarantees" (no "data that appears" on one replica
only): below
  its high watermark every replica holds the same record at every offset as every other replica
  (checked against the prefix that any replica's high watermark has covered).

Faults these invariants assume (what the simulation injects): any network delay, loss and cut
link, with FIFO order per connection (TCP); heartbeats and registrations delivered twice; any number
of pauses and process crashes (a process crash keeps the page cache);
``unclean.leader.election.enable=false`` (the controller's rules). Machine crashes lose the
unflushed tail of a log: a broker that lost records that way is exempt from the ISR checks until it
leaves the ISR (the documented guarantee is about replicas that still have the data; the exemption also
covers a crashed broker the leader adds to the ISR on a fetch sent before the crash, until the
broker runs again). A committed or acknowledged record is an allowed loss, dropped from the checks
and counted in ``allowed_losses``, when every replica holding it lost it in machine crashes or when
every member of the controller's ISR lost it that way ("at least one in sync replica alive" is the
documented condition). The leader checks have no exemption: electing, or resuming leadership on, a
replica that lost an acknowledged record while an ISR member still holds it is a violation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.metadata.cluster_state import ClusterState

if TYPE_CHECKING:
    from tests.sim.replication.model import SimBroker, Simulation

_INFINITY = 1 << 62


class ReplicationInvariants:
    def __init__(self, sim: Simulation, *, stale_leaders: bool = False) -> None:
        self.sim = sim
        self.stale_leaders = stale_leaders  # also hold brokers leading by an outdated image to the leader rules
        self.disabled: set[str] = set()  # invariant names not checked (to look past a known violation)
        self.max_hw: dict[tuple[int, int], int] = {}  # (partition, leader epoch) -> highest HW seen
        self.acked: dict[int, dict[int, tuple[int, int]]] = {}  # partition -> offset -> (record id, epoch)
        self.acked_max: dict[int, int] = {}  # partition -> highest acks=all offset
        self.acks_one: dict[int, dict[int, int]] = {}  # partition -> offset -> record id (acks=1)
        self.committed: dict[int, list[int]] = {}  # partition -> record ids below some replica's HW
        self.verified: dict[tuple[int, int, int], int] = {}  # (broker, incarnation, partition) -> offset
        self.holders: dict[int, set[tuple[int, int]]] = {}  # partition -> (broker, epoch or -1) checked in full
        self.lost_in_isr: set[tuple[int, int]] = set()  # (broker, partition) lost a tail, still in the ISR
        # partition -> broker -> offset: after an allowed loss from that offset, the broker's records
        # there are the lost history until its log is cut to that offset (then it follows again)
        self.superseded: dict[int, dict[int, int]] = {}
        self.allowed_losses = 0
        self.acks_all = 0
        self.acks_one_count = 0
        self.checks = 0
        self._violation: str | None = None

    # -- hooks from the model -----------------------------------------------------------------------
    def on_ack(self, broker: SimBroker, partition: int, first: int, last: int, epoch: int, acks: int) -> None:
        hosted = broker.partitions[partition]
        records = {o: hosted.log.entries[o][1] for o in range(first, last + 1)}
        if acks == 1:
            self.acks_one_count += 1
            self.acks_one.setdefault(partition, {}).update(records)
            return
        self.acks_all += 1
        acked = self.acked.setdefault(partition, {})
        for offset, record_id in records.items():
            acked[offset] = (record_id, epoch)
        self.acked_max[partition] = max(self.acked_max.get(partition, -1), last)
        for holder in self._must_hold(partition):
            self._check_holder(holder, partition, range(first, last + 1), f"acknowledged by broker {broker.node_id}")

    def on_lost_tail(self, broker: SimBroker, partition: int, keep: int, lost: list[tuple[int, int]]) -> None:
        """A machine crash cut ``broker``'s log of ``partition`` to ``keep`` (``lost`` went)."""
        self.lost_in_isr.add((broker.node_id, partition))
        committed = self.committed.get(partition, [])
        acked = self.acked.get(partition, {})
        for index, (_, record_id) in enumerate(lost):
            offset = keep + index
            was_committed = offset < len(committed) and committed[offset] == record_id
            if not was_committed and acked.get(offset, (None,))[0] != record_id:
                continue  # this replica's record there was never committed: nothing lost
            if not self._held_by(self.sim.brokers, partition, offset, record_id):
                self._allow_loss(partition, offset, "every replica that held it lost it in machine crashes")
                break
        self._maybe_all_isr_lost(partition)

    def on_metadata(self, state: ClusterState) -> None:
        """A controller change: members that left the ISR lose their exemption; an ISR made only of
        members that lost their tails makes what none of them holds an allowed loss."""
        topic = state.topics.get("sim")
        if topic is None:
            return
        for broker, partition in list(self.lost_in_isr):
            part = topic.partitions.get(partition)
            # still down: the leader may add it on a fetch sent before the crash (the leader cannot
            # know; Kafka has the same window), so the exemption lasts until it runs again
            if (part is None or broker not in part.isr) and self.sim.brokers[broker].running:
                self.lost_in_isr.discard((broker, partition))
        for partition in topic.partitions:
            self._maybe_all_isr_lost(partition, state)

    def _maybe_all_isr_lost(self, partition: int, state: ClusterState | None = None) -> None:
        state = state or self.sim.controller.state
        topic = state.topics.get("sim")
        part = topic.partitions.get(partition) if topic is not None else None
        if part is None or not part.isr or any((m, partition) not in self.lost_in_isr for m in part.isr):
            return
        members = {m: self.sim.brokers[m] for m in part.isr}
        committed = self.committed.get(partition, [])
        acked = self.acked.get(partition, {})
        for offset in sorted({*range(len(committed)), *acked}):
            record_id = committed[offset] if offset < len(committed) else acked[offset][0]
            if not self._held_by(members, partition, offset, record_id):
                self._allow_loss(partition, offset, f"every ISR member {list(part.isr)} lost it in machine crashes")
                return

    def _allow_loss(self, partition: int, offset: int, why: str) -> None:
        self.allowed_losses += 1
        committed = self.committed.get(partition, [])
        del committed[offset:]
        acked = self.acked.get(partition, {})
        for gone in [o for o in acked if o >= offset]:
            del acked[gone]
        self.acked_max[partition] = max(acked, default=-1)
        for key in [k for k in self.verified if k[2] == partition]:
            self.verified[key] = min(self.verified[key], offset)
        superseded = self.superseded.setdefault(partition, {})
        for broker in self.sim.brokers.values():
            target = broker.disk.logs.get(partition)
            if target is not None and target.end > offset:
                superseded[broker.node_id] = min(superseded.get(broker.node_id, offset), offset)
        self.sim.trace(f"invariants: p{partition} from offset {offset} is an allowed loss: {why}")

    # -- after every event --------------------------------------------------------------------------
    def check(self) -> str | None:
        self.checks += 1
        sim = self.sim
        topic = sim.controller.state.topics.get("sim")
        if topic is None:
            return None
        for partition, part in topic.partitions.items():
            self._check_partition(partition, part.isr, part.leader, part.leader_epoch)
            if self._violation is not None:
                return self._violation
        return None

    def _fail(self, message: str) -> None:
        if message.split(" ", 1)[0].rstrip(":") in self.disabled:
            return
        if self._violation is None:
            self._violation = message

    def _leads(self, broker: SimBroker, partition: int, leader: int, leader_epoch: int) -> bool:
        """Whether ``broker`` acts as the leader of ``partition`` (see ``stale_leaders``): by default only
        the controller's current leader at the current leader epoch counts; a broker that leads by an
        older image (restarted from its local metadata log, not yet caught up) does not. Neither does
        one that does not serve yet (``ReplicaManager.serving``): it answers no produce and no read."""
        hosted = broker.partitions.get(partition) if broker.running else None
        if hosted is None or not hosted.is_leader or not broker.serving:
            return False
        return self.stale_leaders or (broker.node_id == leader and hosted.leader_epoch == leader_epoch)

    def _check_partition(self, partition: int, isr: tuple[int, ...], leader: int, leader_epoch: int) -> None:
        sim = self.sim
        changed_from: dict[int, int] = {}
        for broker in sim.brokers.values():
            target = broker.disk.logs.get(partition)
            if target is not None:
                changed_from[broker.node_id] = target.changed_from
                target.changed_from = _INFINITY
        committed = self.committed.setdefault(partition, [])
        for broker in sim.brokers.values():
            hosted = broker.partitions.get(partition) if broker.running else None
            if hosted is None:
                continue
            # replicas_agree_below_hw
            key = (broker.node_id, broker.incarnation, partition)
            start = min(self.verified.get(key, 0), changed_from.get(broker.node_id, _INFINITY))
            hw = hosted.high_watermark
            entries = hosted.log.entries
            if hw > len(entries):
                self._fail(f"replicas_agree_below_hw: broker {broker.node_id} p{partition} HW {hw} above its end")
                return
            superseded = self.superseded.get(partition, {})
            floor = superseded.get(broker.node_id)
            agreed_below = hw
            if floor is not None:
                if changed_from.get(broker.node_id, _INFINITY) <= floor or hosted.log.end <= floor:
                    del superseded[broker.node_id]  # cut back to where the lost history began
                else:
                    agreed_below = min(hw, floor)
            for offset in range(start, agreed_below):
                record_id = entries[offset][1]
                if offset < len(committed):
                    if committed[offset] != record_id:
                        self._fail(
                            f"replicas_agree_below_hw (Kafka documentation §5.4.4 'Guarantees'): "
                            f"broker {broker.node_id} p{partition} holds "
                            f"record {record_id} (epoch {entries[offset][0]}) at offset {offset} below its HW {hw}, "
                            f"another replica committed record {committed[offset]} there"
                        )
                        return
                else:
                    committed.append(record_id)
            self.verified[key] = max(start, agreed_below)
            if self._leads(broker, partition, leader, leader_epoch):
                # hw_never_decreases_within_epoch
                epoch_key = (partition, hosted.leader_epoch)
                highest = self.max_hw.get(epoch_key, -1)
                if hw < highest:
                    self._fail(
                        f"hw_never_decreases_within_epoch (Kafka documentation §4.7 'Replication'): "
                        f"leader {broker.node_id} of p{partition} "
                        f"at epoch {hosted.leader_epoch} has HW {hw}, it was {highest} in this epoch"
                    )
                    return
                self.max_hw[epoch_key] = hw
                # hw_within_isr_end_offsets
                if hosted.log.end < hw:
                    self._fail(f"hw_within_isr_end_offsets: leader {broker.node_id} p{partition} end below HW {hw}")
                    return
                for member in hosted.isr:
                    state = hosted.followers.get(member)
                    if member == broker.node_id or state is None or state.log_end_offset < 0:
                        continue
                    if (member, partition) in self.lost_in_isr:
                        continue
                    if member not in isr:
                        continue  # it already left the controller's ISR; the leader's view lags
                    if state.log_end_offset < hw:
                        self._fail(
                            f"hw_within_isr_end_offsets (Kafka documentation §4.7 'Replication'): "
                            f"leader {broker.node_id} of p{partition} "
                            f"has HW {hw} but ISR member {member} ends at {state.log_end_offset} in its view "
                            f"(ISR {list(hosted.isr)}, pending {hosted.pending_isr})"
                        )
                        return
        # acks_all_on_isr_and_later_leaders
        must = self._must_hold(partition)
        checked = self.holders.setdefault(partition, set())
        for holder in list(checked):
            if holder not in must:
                checked.discard(holder)
        acked = self.acked.get(partition)
        for holder in must:
            if holder not in checked:
                checked.add(holder)
                if acked:
                    self._check_holder(holder, partition, sorted(acked), "on joining the ISR or leading")
            elif acked and changed_from.get(holder[0], _INFINITY) <= self.acked_max.get(partition, -1):
                low = changed_from[holder[0]]
                self._check_holder(holder, partition, sorted(o for o in acked if o >= low), "after a truncation")
            if self._violation is not None:
                return

    def _must_hold(self, partition: int) -> set[tuple[int, int]]:
        """``(broker, epoch)``: epoch -1 for an ISR member (every acknowledged offset), else the
        leader epoch of a broker that leads (the acknowledged offsets of that epoch and before)."""
        sim = self.sim
        out: set[tuple[int, int]] = set()
        part = sim.controller.state.topics["sim"].partitions[partition]
        for member in part.isr:
            if (member, partition) not in self.lost_in_isr:
                out.add((member, -1))
        candidates = (
            sim.brokers.values() if self.stale_leaders else [sim.brokers[part.leader]] if part.leader >= 0 else []
        )
        for broker in candidates:
            if self._leads(broker, partition, part.leader, part.leader_epoch):
                out.add((broker.node_id, broker.partitions[partition].leader_epoch))
        return out

    def _check_holder(self, holder: tuple[int, int], partition: int, offsets: object, when: str) -> None:
        broker_id, epoch = holder
        target = self.sim.brokers[broker_id].disk.log(partition)
        acked = self.acked.get(partition, {})
        for offset in offsets:  # type: ignore[attr-defined]
            record_id, ack_epoch = acked[offset]
            if epoch >= 0 and ack_epoch > epoch:
                continue
            held = target.entries[offset][1] if offset < target.end else None
            if held != record_id:
                role = "ISR member" if epoch < 0 else f"leader at epoch {epoch}"
                self._fail(
                    f"acks_all_on_isr_and_later_leaders (Kafka documentation §4.7 'Replication'): "
                    f"offset {offset} of p{partition} "
                    f"(record {record_id}, acknowledged acks=all at epoch {ack_epoch}) is not on {role} "
                    f"broker {broker_id} ({when}); it holds {held}, its log ends at {target.end}"
                )
                return

    @staticmethod
    def _held_by(brokers: Mapping[int, SimBroker], partition: int, offset: int, record_id: int) -> bool:
        for broker in brokers.values():
            target = broker.disk.logs.get(partition)
            if target is not None and offset < target.end and target.entries[offset][1] == record_id:
                return True
        return False

    # -- figures --------------------------------------------------------------------------------------
    def acks_one_lost(self) -> int:
        """acks=1 records no replica holds at the end (allowed: Kafka documentation §5.4.4 "Guarantees" scenario 1)."""
        lost = 0
        for partition, records in self.acks_one.items():
            for offset, record_id in records.items():
                if not self._held_by(self.sim.brokers, partition, offset, record_id):
                    lost += 1
        return lost
