"""What one step of the Raft core asks the driver to do, and in which order.

Ordering contract (KIP-595 "persist before you reply"; etcd's ``msgsAfterAppend``):

1. ``StepResult.persist``, in list order, each made **durable** before the next one starts:

   * ``PersistQuorumState`` - write the quorum-state file atomically (write, fsync, rename);
   * ``TruncateLog`` / ``AppendToLog`` - mutate the local log;
   * ``FlushLog`` - fsync the log (KIP-595: *every append to the metadata log is fsynced before
     returning*);
   * ``DeleteLogPrefix`` - drop the log below a snapshot's end offset (KIP-630), durably;
   * ``InstallSnapshot`` - write a snapshot fetched with FetchSnapshot, start the log at its end.

2. only then ``StepResult.send``, in list order (messages to one destination keep their order);
3. then ``StepResult.notify`` (high-watermark changes, fatal errors) for the layer above.

If the process dies during 1, nothing of 2 may have happened: a restart rebuilds the core from what
was durable and the lost step is as if it never ran. A vote is therefore on disk before any
``VoteResponse(vote_granted=True)`` leaves, and it is never granted twice in an epoch across restarts.
The driver must apply results in step order and must not start another step of the same core before
the previous result is fully executed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.raft.log import Entry
from broker.raft.messages import ErrorCode, Message
from broker.raft.snapshot import SnapshotId


@dataclass(frozen=True, slots=True)
class QuorumStateData:
    """The quorum-state file (KIP-595 ``QuorumStateMessage``).

    ``leader_id``: last known leader, -1 if none. ``leader_epoch``: last known epoch (0 at
    bootstrap, never negative). ``voted_id``: whom this replica voted for in ``leader_epoch``, -1 if
    nobody. ``applied_offset``: the high watermark when the file was written (used by log recovery).
    ``current_voters``: the voter set.
    """

    leader_id: int
    leader_epoch: int
    voted_id: int
    applied_offset: int
    current_voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    state: QuorumStateData


@dataclass(frozen=True, slots=True)
class AppendToLog:
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Remove every entry with ``offset >= end_offset``."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class FlushLog:
    """fsync the log; every entry below ``end_offset`` (the current log end) must be durable."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class DeleteLogPrefix:
    """KIP-630: remove every entry below ``start_offset``, durably; a snapshot whose id is
    ``(start_offset, start_epoch)`` is already on disk and covers them."""

    start_offset: int
    start_epoch: int


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """KIP-630: a snapshot fetched from the leader (``data``, the whole file, already checked):
    write it as ``snapshot_id``'s file, make the log start at its end offset (entries below go),
    and load it into the state machine before any later entry is delivered."""

    snapshot_id: SnapshotId
    data: bytes


PersistEffect = PersistQuorumState | AppendToLog | TruncateLog | FlushLog | DeleteLogPrefix | InstallSnapshot


@dataclass(frozen=True, slots=True)
class Send:
    destination: int
    correlation_id: int
    message: Message


@dataclass(frozen=True, slots=True)
class HighWatermarkAdvanced:
    """Entries below ``high_watermark`` are committed (may be applied to the state machine)."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class FatalError:
    """The replica must shut down (e.g. KIP-595 cluster-id mismatch with an elected leader)."""

    error_code: ErrorCode
    reason: str


Notification = HighWatermarkAdvanced | FatalError


@dataclass(slots=True)
class StepResult:
    """Effects of one step; execute ``persist`` (durably), then ``send``, then ``notify``."""

    persist: list[PersistEffect] = field(default_factory=list)
    send: list[Send] = field(default_factory=list)
    notify: list[Notification] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.persist or self.send or self.notify)


class EffectBuffer:
    """Collects the effects of the step in progress; the core drains it into a ``StepResult``."""

    __slots__ = ("_result",)

    def __init__(self) -> None:
        self._result = StepResult()

    def persist(self, effect: PersistEffect) -> None:
        self._result.persist.append(effect)

    def send(self, destination: int, correlation_id: int, message: Message) -> None:
        self._result.send.append(Send(destination, correlation_id, message))

    def notify(self, notification: Notification) -> None:
        self._result.notify.append(notification)

    def drain(self) -> StepResult:
        result, self._result = self._result, StepResult()
        return result
