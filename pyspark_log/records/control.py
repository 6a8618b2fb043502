"""Control batches and control records (Kafka documentation §5.3.1 "Record Batch" "Control Batches"; KIP-98,
KIP-595, KIP-853).

A control batch has attributes bit 5 (isControlBatch) set and holds control records, which are
never handed to applications. Transaction markers additionally set bit 4 (isTransactional) and
carry the producer's id and epoch; KRaft's records carry producerId -1.

Record key, all types (big-endian; Kafka ``ControlRecordType``)::

    version: int16   always 0 (readers parse newer versions as 0, reject negative ones)
    type:    int16   0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, 3 SNAPSHOT_HEADER, 4 SNAPSHOT_FOOTER,
                     5 KRAFT_VERSION, 6 KRAFT_VOTERS

Record value by type:

* ABORT / COMMIT (``EndTransactionMarker``), fixed layout: ``version: int16 (0)``,
  ``coordinatorEpoch: int32``; readers need at least these 6 bytes.
* The KRaft types use Kafka's flexible ("compact") message encoding, version 0, where an array
  is ``uvarint(length + 1)`` then its elements, a string ``uvarint(bytes + 1)`` then UTF-8,
  and every struct ends with tagged fields ``uvarint(count)`` then ``[tag uvarint, size
  uvarint, bytes]`` (we write none and skip any we read):

  - LEADER_CHANGE (``LeaderChangeMessage.json``): ``Version int16, LeaderId int32,
    Voters [VoterId int32 + tags], GrantingVoters [VoterId int32 + tags], tags``
  - SNAPSHOT_HEADER: ``Version int16, LastContainedLogTimestamp int64, tags``
  - SNAPSHOT_FOOTER: ``Version int16, tags``
  - KRAFT_VERSION: ``Version int16, KRaftVersion int16, tags``
  - KRAFT_VOTERS (``VotersRecord.json``): ``Version int16, Voters [VoterId int32,
    VoterDirectoryId uuid(16), Endpoints [Name string, Host string, Port uint16, tags],
    KRaftVersionFeature {MinSupportedVersion int16, MaxSupportedVersion int16, tags}, tags], tags``

Note: Kafka documentation §5.3.1 "Record Batch" lists only ABORT and COMMIT; the KRaft type numbers follow Kafka's
``ControlRecordType`` enum.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.header import (
    HEADER_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    BatchHeader,
)
from pyspark_log.records.record import Record, read_record
from pyspark_log.records.varint import read_uvarint, write_uvarint


class ControlType(IntEnum):
    """The ``type`` field of a control record key."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_KEY_VERSION = 0
CONTROL_KEY = struct.Struct(">hh")  # version, type
END_TXN_MARKER_VERSION = 0
END_TXN_MARKER = struct.Struct(">hi")  # version, coordinatorEpoch
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UUID_BYTES = 16

_ABORT_KEY = CONTROL_KEY.pack(CONTROL_KEY_VERSION, ControlType.ABORT)


# --- messages -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """Value of an ABORT or COMMIT record: the transaction coordinator's epoch."""

    kind: ControlType
    coordinator_epoch: int
    version: int = END_TXN_MARKER_VERSION


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """KIP-595 LeaderChangeMessage, written by a newly elected KRaft leader."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]
    version: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    last_contained_log_timestamp: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotFooter:
    version: int = 0


@dataclass(frozen=True, slots=True)
class KRaftVersion:
    kraft_version: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    voter_id: int
    directory_id: bytes  # 16 bytes (a UUID)
    endpoints: tuple[Endpoint, ...]
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class Voters:
    voters: tuple[Voter, ...]
    version: int = 0


ControlMessage = EndTxnMarker | LeaderChange | SnapshotHeader | SnapshotFooter | KRaftVersion | Voters

_MESSAGE_TYPES: dict[type, ControlType] = {
    LeaderChange: ControlType.LEADER_CHANGE,
    SnapshotHeader: ControlType.SNAPSHOT_HEADER,
    SnapshotFooter: ControlType.SNAPSHOT_FOOTER,
    KRaftVersion: ControlType.KRAFT_VERSION,
    Voters: ControlType.KRAFT_VOTERS,
}


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A decoded control record: where it sits, its type id and its parsed value.

    ``kind`` is the raw type id (an unknown id is kept, and ``message`` is then None, as
    Kafka's UNKNOWN type is ignored rather than rejected).
    """

    offset: int
    timestamp: int
    kind: int
    message: ControlMessage | None


# --- keys ---------------------------------------------------------------------------------------


def encode_control_key(kind: int) -> bytes:
    """The 4-byte key of a control record of type ``kind``."""
    return CONTROL_KEY.pack(CONTROL_KEY_VERSION, kind)


def decode_control_key(key: bytes | None) -> int:
    """The type id in a control record key (version > 0 is read as version 0, like Kafka)."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes")
    version, kind = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return int(kind)


# --- flexible-encoding helpers ------------------------------------------------------------------


def _write_compact_int32s(out: bytearray, values: Sequence[int]) -> None:
    write_uvarint(out, len(values) + 1)
    for v in values:
        out += _INT32.pack(v)
        out.append(0)  # no tagged fields


def _write_compact_string(out: bytearray, text: str) -> None:
    data = text.encode()
    write_uvarint(out, len(data) + 1)
    out += data


class _Reader:
    """Cursor over a flexible-version message value; every read is bounds-checked."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptRecordError("control record value is truncated")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, st: struct.Struct) -> int:
        return int(st.unpack(self.take(st.size))[0])

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos)
        return value

    def array_length(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptRecordError("null array in control record value")
        if n > len(self.buf) - self.pos:
            raise CorruptRecordError("array length overruns control record value")
        return n

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptRecordError("null string in control record value")
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("control record string is not UTF-8") from exc

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())

    def int32s(self) -> tuple[int, ...]:
        out = []
        for _ in range(self.array_length()):
            out.append(self.unpack(_INT32))
            self.skip_tags()
        return tuple(out)


# --- values -------------------------------------------------------------------------------------


def control_type_of(message: ControlMessage) -> ControlType:
    """The key type that goes with ``message``."""
    if isinstance(message, EndTxnMarker):
        return message.kind
    return _MESSAGE_TYPES[type(message)]


def encode_control_value(message: ControlMessage) -> bytes:
    """Serialise a control record value (layouts in the module docstring)."""
    if isinstance(message, EndTxnMarker):
        if message.kind not in (ControlType.ABORT, ControlType.COMMIT):
            raise ValueError(f"an end-transaction marker is ABORT or COMMIT, not {message.kind!r}")
        return END_TXN_MARKER.pack(message.version, message.coordinator_epoch)
    out = bytearray(_INT16.pack(message.version))
    if isinstance(message, LeaderChange):
        out += _INT32.pack(message.leader_id)
        _write_compact_int32s(out, message.voters)
        _write_compact_int32s(out, message.granting_voters)
    elif isinstance(message, SnapshotHeader):
        out += _INT64.pack(message.last_contained_log_timestamp)
    elif isinstance(message, KRaftVersion):
        out += _INT16.pack(message.kraft_version)
    elif isinstance(message, Voters):
        write_uvarint(out, len(message.voters) + 1)
        for voter in message.voters:
            if len(voter.directory_id) != _UUID_BYTES:
                raise ValueError("a voter's directory id is 16 bytes")
            out += _INT32.pack(voter.voter_id)
            out += voter.directory_id
            write_uvarint(out, len(voter.endpoints) + 1)
            for endpoint in voter.endpoints:
                _write_compact_string(out, endpoint.name)
                _write_compact_string(out, endpoint.host)
                out += _UINT16.pack(endpoint.port)
                out.append(0)
            out += _INT16.pack(voter.min_supported_version)
            out += _INT16.pack(voter.max_supported_version)
            out.append(0)  # KRaftVersionFeature tags
            out.append(0)  # Voter tags
    elif not isinstance(message, SnapshotFooter):
        raise TypeError(f"not a control message: {message!r}")
    out.append(0)  # top-level tagged fields
    return bytes(out)


def decode_control_value(kind: int, value: bytes | None) -> ControlMessage | None:
    """Parse the value of a control record of type ``kind``; None for an unknown type."""
    if kind not in ControlType._value2member_map_:
        return None
    if value is None:
        raise CorruptRecordError(f"control record of type {kind} has a null value")
    if kind in (ControlType.ABORT, ControlType.COMMIT):
        if len(value) < END_TXN_MARKER.size:
            raise CorruptRecordError(f"end-transaction marker value of {len(value)} bytes, needs 6")
        version, epoch = END_TXN_MARKER.unpack_from(value)
        if version < 0:
            raise CorruptRecordError(f"invalid end-transaction marker version {version}")
        return EndTxnMarker(ControlType(kind), epoch, version)
    r = _Reader(value)
    version = r.unpack(_INT16)
    message: ControlMessage
    if kind == ControlType.LEADER_CHANGE:
        leader_id = r.unpack(_INT32)
        voters = r.int32s()
        message = LeaderChange(leader_id, voters, r.int32s(), version)
    elif kind == ControlType.SNAPSHOT_HEADER:
        message = SnapshotHeader(r.unpack(_INT64), version)
    elif kind == ControlType.SNAPSHOT_FOOTER:
        message = SnapshotFooter(version)
    elif kind == ControlType.KRAFT_VERSION:
        message = KRaftVersion(r.unpack(_INT16), version)
    else:
        message = Voters(_read_voters(r), version)
    r.skip_tags()
    if r.pos != len(value):
        raise CorruptRecordError(f"{len(value) - r.pos} unexpected bytes after a control record value")
    return message


def _read_voters(r: _Reader) -> tuple[Voter, ...]:
    voters = []
    for _ in range(r.array_length()):
        voter_id = r.unpack(_INT32)
        directory_id = r.take(_UUID_BYTES)
        endpoints = []
        for _ in range(r.array_length()):
            name = r.string()
            host = r.string()
            port = r.unpack(_UINT16)
            r.skip_tags()
            endpoints.append(Endpoint(name, host, port))
        min_version = r.unpack(_INT16)
        max_version = r.unpack(_INT16)
        r.skip_tags()  # KRaftVersionFeature
        r.skip_tags()  # Voter
        voters.append(Voter(voter_id, directory_id, tuple(endpoints), min_version, max_version))
    return tuple(voters)


# --- batches ------------------------------------------------------------------------------------


def encode_control_batch(
    kind: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    *,
    base_offset: int = 0,
    message: ControlMessage | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding one control record of type ``kind``.

    ABORT/COMMIT build an end-transaction marker from ``coordinator_epoch`` in a transactional
    batch of ``producer_id``/``producer_epoch`` with no sequence, as Kafka's transaction
    coordinator writes it. The KRaft types take their value from ``message`` (whose type must
    match ``kind``) and are written non-transactional with producerId -1.
    """
    if kind in (ControlType.ABORT, ControlType.COMMIT):
        value_message: ControlMessage = EndTxnMarker(ControlType(kind), coordinator_epoch)
        transactional = True
    else:
        if message is None or control_type_of(message) != kind:
            raise ValueError(f"control type {kind} needs a matching message, got {message!r}")
        value_message = message
        transactional = False
        producer_id, producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    record = ProducerRecord(encode_control_key(kind), encode_control_value(value_message), timestamp)
    return encode_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=transactional,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def to_control_record(record: Record) -> ControlRecord:
    """Interpret a record of a control batch."""
    kind = decode_control_key(record.key)
    return ControlRecord(record.offset, record.timestamp, kind, decode_control_value(kind, record.value))


def decode_control_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> tuple[BatchHeader, list[ControlRecord]]:
    """Decode the control batch at ``pos``; CorruptRecordError if it is not one."""
    header, records = decode_records(buf, pos, verify_crc=verify_crc, max_decompressed_bytes=1 << 20)
    if not header.is_control:
        raise CorruptRecordError(f"batch at offset {header.base_offset} is not a control batch")
    return header, [to_control_record(r) for r in records]


def first_control_type(
    buf: bytes | bytearray | memoryview,
    pos: int,
    header: BatchHeader,
    *,
    max_decompressed_bytes: int = 1 << 20,
) -> int | None:
    """Type id of the first record of the control batch at ``pos`` (None if not a control batch).

    What a read_committed consumer needs to tell an ABORT marker from the rest; uncompressed
    batches (all that Kafka writes) are read without decoding the whole batch.
    """
    if not header.is_control or header.records_count < 1:
        return None
    if header.compression:
        _, records = decode_records(buf, pos, max_decompressed_bytes=max_decompressed_bytes, verify_crc=False)
        return decode_control_key(records[0].key)
    end = pos + header.size
    record, _ = read_record(memoryview(buf)[:end], pos + HEADER_SIZE, header.base_offset, header.base_timestamp)
    return decode_control_key(record.key)


def is_abort_key(key: bytes | None) -> bool:
    """True for the key of an ABORT marker (fast path: compares the 4 canonical bytes first)."""
    if key == _ABORT_KEY:
        return True
    return key is not None and decode_control_key(key) == ControlType.ABORT
