"""KIP-595 Raft: the pure core (no I/O), its effects and messages.

Public API: ``RaftCore`` (driven with ``start``/``handle``/``tick``/``append``/``resign``), the
``StepResult`` it returns (execute ``persist`` durably, then ``send``, then ``notify``), the message
dataclasses, ``RaftConfig`` and the log model. Running it: ``driver.RaftDriver`` (sockets, timers,
files), ``store`` (quorum-state file, metadata log), ``rpc`` (wire mapping), ``transport`` (peer
connections), ``bootstrap`` (``process.roles`` and the voters from ``server.properties``).
"""

from broker.raft.config import RaftConfig, RaftConfigError, VoterEndpoint, parse_quorum_voters
from broker.raft.core import AppendResult, NotLeaderError, RaftCore
from broker.raft.effects import (
    AppendToLog,
    FatalError,
    FlushLog,
    HighWatermarkAdvanced,
    PersistQuorumState,
    QuorumStateData,
    Send,
    StepResult,
    TruncateLog,
)
from broker.raft.log import Entry, LeaderChange, OffsetAndEpoch, RaftLog
from broker.raft.messages import ErrorCode, Inbound
from broker.raft.state import IllegalTransitionError, QuorumState

__all__ = [
    "AppendResult",
    "AppendToLog",
    "Entry",
    "ErrorCode",
    "FatalError",
    "FlushLog",
    "HighWatermarkAdvanced",
    "IllegalTransitionError",
    "Inbound",
    "LeaderChange",
    "NotLeaderError",
    "OffsetAndEpoch",
    "PersistQuorumState",
    "QuorumState",
    "QuorumStateData",
    "RaftConfig",
    "RaftConfigError",
    "RaftCore",
    "RaftLog",
    "Send",
    "StepResult",
    "TruncateLog",
    "VoterEndpoint",
    "parse_quorum_voters",
]
