"""KIP-853 voter sets outside the Raft core: directory ids, ``id@host:port:dir`` lists, the
bootstrap checkpoint that ``storage format`` writes, and ``controller.quorum.bootstrap.servers``.

The bootstrap checkpoint. ``kafka-storage format --standalone`` or ``--initial-controllers``
writes the first voter set into the metadata log directory as the KIP-630 snapshot of offset 0,
epoch 0 (``00000000000000000000-0000000000.checkpoint``), as Kafka 4.1 does: control records
only, each in a control batch of its own, with partitionLeaderEpoch 0::

    offset 0   SnapshotHeader   (control type 3)
    offset 1   KRaftVersion     (control type 5): kraft.version 1
    offset 2   KRaftVoters      (control type 6): the VotersRecord (id, directory id, CONTROLLER endpoint)
    offset 3   SnapshotFooter   (control type 4)

(Kafka puts the first three records in one batch; ``kafka-dump-log --cluster-metadata-decoder``
reads either.) pylog's log holds no snapshot of it: the first leader appends the VotersRecord to
the log after its LeaderChange record (``RaftCore``), which is how the set reaches every replica
and observer.

This module is pure but for ``read_bootstrap_checkpoint`` (one file read); the storage tool
(``broker.storage``) writes the file.

A directory id is a Kafka ``Uuid`` (16 bytes), written as base64url without padding (22
characters), the form of ``directory.id`` in ``meta.properties``.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from broker.raft.config import RaftConfigError, VoterEndpoint
from broker.raft.log import VoterSpec, VotersRecord
from pyspark_log.records.batch import decode_records
from pyspark_log.records.control import (
    ControlMessage,
    ControlType,
    Endpoint,
    KRaftVersion,
    SnapshotFooter,
    SnapshotHeader,
    Voter,
    Voters,
    encode_control_batch,
    to_control_record,
)
from pyspark_log.records.errors import RecordError
from pyspark_log.records.header import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

BOOTSTRAP_CHECKPOINT = "00000000000000000000-0000000000.checkpoint"
CONTROLLER_LISTENER = "CONTROLLER"
ZERO_DIRECTORY_ID = bytes(16)
_DYNAMIC_VOTER = re.compile(r"^(\d+)@(\[[^\]]+\]|[^:@]+):(\d+):([A-Za-z0-9_-]{22})$")


class VotersFileError(ValueError):
    """A bootstrap checkpoint that cannot be read, or a malformed voter string."""


def directory_id_bytes(text: str) -> bytes:
    """``directory.id`` (base64url, 22 characters) as the 16 bytes of the Uuid."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise VotersFileError(f"{text!r} is not a directory id (a base64url Uuid)") from None
    if len(raw) != 16:
        raise VotersFileError(f"{text!r} is not a directory id (a base64url Uuid)")
    return raw


def directory_id_text(raw: bytes) -> str:
    """The 16 bytes of a Uuid as Kafka prints them (base64url, no padding)."""
    return base64.urlsafe_b64encode(bytes(raw)).decode("ascii").rstrip("=")


def parse_initial_controllers(value: str) -> VotersRecord:
    """``--initial-controllers 1@host:9093:DIR,2@...`` as a VotersRecord (Kafka's
    ``DynamicVoter.parse``); VotersFileError naming the bad entry."""
    specs: list[VoterSpec] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        if "@" not in entry:
            raise VotersFileError("No @ found in dynamic voter string.")
        match = _DYNAMIC_VOTER.match(entry)
        if match is None:
            raise VotersFileError(f"Invalid dynamic voter string {entry!r}: expected id@hostname:port:directory")
        voter_id, host, port = int(match[1]), match[2].strip("[]"), int(match[3])
        if not 0 < port < 65536:
            raise VotersFileError(f"Invalid port in dynamic voter string {entry!r}")
        if any(s.voter_id == voter_id for s in specs):
            raise VotersFileError(f"Node id {voter_id} was specified more than once in the initial controllers")
        specs.append(VoterSpec(voter_id, directory_id_bytes(match[4]), host, port))
    if not specs:
        raise VotersFileError("No initial controllers were given.")
    return VotersRecord(tuple(specs))


def parse_bootstrap_servers(value: str) -> dict[int, VoterEndpoint]:
    """``controller.quorum.bootstrap.servers`` (``host:port,...``) as endpoints under Kafka's
    negative ids for bootstrap servers (-2, -3, ...), so they never collide with a node id."""
    servers: dict[int, VoterEndpoint] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        host, colon, port_text = item.rpartition(":")
        if not colon or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise RaftConfigError(f"controller.quorum.bootstrap.servers: {item!r} is not of the form host:port")
        pseudo_id = -2 - len(servers)
        servers[pseudo_id] = VoterEndpoint(pseudo_id, host.strip("[]"), int(port_text))
    return servers


def encode_bootstrap_checkpoint(voters: VotersRecord, timestamp_ms: int) -> bytes:
    """The bytes of the bootstrap checkpoint (layout in the module docstring)."""
    messages: tuple[tuple[ControlType, ControlMessage], ...] = (
        (ControlType.SNAPSHOT_HEADER, SnapshotHeader(timestamp_ms)),
        (ControlType.KRAFT_VERSION, KRaftVersion(1)),
        (ControlType.KRAFT_VOTERS, Voters(tuple(_voter(v) for v in voters.voters), 0)),
        (ControlType.SNAPSHOT_FOOTER, SnapshotFooter()),
    )
    return b"".join(
        encode_control_batch(
            kind, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, 0, timestamp_ms, base_offset=offset, message=message,
            partition_leader_epoch=0,
        )
        for offset, (kind, message) in enumerate(messages)
    )  # fmt: skip


def _voter(spec: VoterSpec) -> Voter:
    endpoints = (Endpoint(CONTROLLER_LISTENER, spec.host, spec.port),) if spec.port else ()
    return Voter(spec.voter_id, spec.directory_id, endpoints, 0, 1)


def read_bootstrap_checkpoint(metadata_dir: Path) -> VotersRecord | None:
    """The VotersRecord of the bootstrap checkpoint, None when there is no such file (or it holds
    no VotersRecord); VotersFileError when it is corrupt."""
    path = metadata_dir / BOOTSTRAP_CHECKPOINT
    if not path.exists():
        return None
    try:
        data = path.read_bytes()
        pos, found = 0, None
        while pos < len(data):
            header, records = decode_records(data, pos)
            if header.is_control:
                for record in records:
                    message = to_control_record(record).message
                    if isinstance(message, Voters):
                        found = message
            pos += header.size
    except (OSError, RecordError) as exc:
        raise VotersFileError(f"{path} is not a readable bootstrap checkpoint: {exc}") from None
    if found is None:
        return None
    specs = []
    for voter in found.voters:
        endpoint = voter.endpoints[0] if voter.endpoints else Endpoint("", "", 0)
        specs.append(VoterSpec(voter.voter_id, bytes(voter.directory_id), endpoint.host, endpoint.port))
    return VotersRecord(tuple(specs))
