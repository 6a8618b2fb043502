"""``__remote_log_metadata`` record values in Kafka's format (KIP-405, Kafka's
``RemoteLogMetadataSerde``): golden bytes checked against Kafka 4.1.1's own serde.

Layout of a value (all flexible-version message encoding, big-endian ints)::

    uvarint frame version (1) | uvarint apiKey | uvarint version (0) | message

    apiKey 0 RemoteLogSegmentMetadataRecord:
        RemoteLogSegmentId | StartOffset int64 | EndOffset int64 | BrokerId int32 |
        MaxTimestampMs int64 | EventTimestampMs int64 |
        SegmentLeaderEpochs compact array of (LeaderEpoch int32, Offset int64, tags) |
        SegmentSizeInBytes int32 | CustomMetadata compact nullable bytes |
        RemoteLogSegmentState int8 | tags (tag 0: TxnIndexEmpty bool)
    apiKey 1 RemoteLogSegmentMetadataUpdateRecord:
        RemoteLogSegmentId | BrokerId int32 | EventTimestampMs int64 |
        CustomMetadata compact nullable bytes | RemoteLogSegmentState int8 | tags
    RemoteLogSegmentId:
        (Name compact string, Id uuid, Partition int32, tags) | Id uuid | tags

apiKeys 2 (RemotePartitionDeleteMetadataRecord) and 3 (snapshot) are not encoded here; decoding
them raises :class:`UnsupportedRecordType`. Unknown tagged fields are skipped on decode.
"""

from __future__ import annotations

import struct
import uuid

from broker.log.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)

FRAME_VERSION = 1
SEGMENT_METADATA_API_KEY = 0
SEGMENT_METADATA_UPDATE_API_KEY = 1
_I8 = struct.Struct(">b")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_EPOCH = struct.Struct(">iq")


class UnsupportedRecordType(ValueError):
    """A record type (apiKey) or version this codec does not read."""


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data):
                raise ValueError("truncated varint")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, s: struct.Struct) -> tuple[int, ...]:
        return s.unpack(self.take(s.size))

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out


def _segment_id(sid: RemoteLogSegmentId) -> bytes:
    tip = sid.topic_id_partition
    name = tip.topic.encode()
    return (
        _uvarint(len(name) + 1)
        + name
        + tip.topic_id.bytes
        + _I32.pack(tip.partition)
        + b"\x00"
        + sid.id.bytes
        + b"\x00"
    )


def _read_segment_id(r: _Reader) -> RemoteLogSegmentId:
    n = r.uvarint()
    if n == 0:
        raise ValueError("null topic name")
    name = r.take(n - 1).decode()
    topic_id = uuid.UUID(bytes=r.take(16))
    (partition,) = r.unpack(_I32)
    r.tags()
    seg = uuid.UUID(bytes=r.take(16))
    r.tags()
    return RemoteLogSegmentId(TopicIdPartition(topic_id, name, partition), seg)


def _header(api_key: int) -> bytes:
    return _uvarint(FRAME_VERSION) + _uvarint(api_key) + _uvarint(0)


def encode(ev: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate) -> bytes:
    """The ``__remote_log_metadata`` record value of ``ev`` (version 0, no custom metadata)."""
    if isinstance(ev, RemoteLogSegmentMetadataUpdate):
        return (
            _header(SEGMENT_METADATA_UPDATE_API_KEY)
            + _segment_id(ev.segment_id)
            + _I32.pack(ev.broker_id)
            + _I64.pack(ev.event_timestamp_ms)
            + b"\x00"
            + _I8.pack(ev.state)
            + b"\x00"
        )
    epochs = sorted(ev.segment_leader_epochs.items())
    return (
        _header(SEGMENT_METADATA_API_KEY)
        + _segment_id(ev.segment_id)
        + _I64.pack(ev.start_offset)
        + _I64.pack(ev.end_offset)
        + _I32.pack(ev.broker_id)
        + _I64.pack(ev.max_timestamp_ms)
        + _I64.pack(ev.event_timestamp_ms)
        + _uvarint(len(epochs) + 1)
        + b"".join(_EPOCH.pack(e, o) + b"\x00" for e, o in epochs)
        + _I32.pack(ev.segment_size_bytes)
        + b"\x00"
        + _I8.pack(ev.state)
        + b"\x00"
    )


def decode(data: bytes) -> RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate:
    """Parse a record value; raises :class:`UnsupportedRecordType` for apiKeys other than 0/1
    or an unknown frame, and :class:`ValueError` for malformed bytes. Custom metadata is
    read and dropped (pylog's RSMs return none)."""
    r = _Reader(data)
    frame, api_key, version = r.uvarint(), r.uvarint(), r.uvarint()
    if frame != FRAME_VERSION or api_key not in (0, 1) or version > 1:
        raise UnsupportedRecordType(f"frame {frame} apiKey {api_key} version {version}")
    sid = _read_segment_id(r)
    if api_key == SEGMENT_METADATA_UPDATE_API_KEY:
        (broker_id,) = r.unpack(_I32)
        (event_ts,) = r.unpack(_I64)
        n = r.uvarint()
        if n:
            r.take(n - 1)
        (state,) = r.unpack(_I8)
        r.tags()
        return RemoteLogSegmentMetadataUpdate(sid, event_ts, RemoteLogSegmentState(state), broker_id)
    start, end = r.unpack(_I64)[0], r.unpack(_I64)[0]
    (broker_id,) = r.unpack(_I32)
    max_ts, event_ts = r.unpack(_I64)[0], r.unpack(_I64)[0]
    epochs = {}
    for _ in range(r.uvarint() - 1):
        epoch, offset = r.unpack(_EPOCH)
        r.tags()
        epochs[epoch] = offset
    (size,) = r.unpack(_I32)
    n = r.uvarint()
    if n:
        r.take(n - 1)
    (state,) = r.unpack(_I8)
    r.tags()
    return RemoteLogSegmentMetadata(
        sid, start, end, max_ts, broker_id, event_ts, size, epochs, RemoteLogSegmentState(state)
    )
