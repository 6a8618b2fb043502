"""Parsing fetched batches the way Kafka's consumer does (Kafka documentation §5.3.1 "Record Batch",
control batches; the reference's "a fetch that starts mid-batch must return the whole batch; the client skips")."""

from __future__ import annotations

from pyspark_log.client.fetch_parse import parse_fetched
from pyspark_log.client.types import AbortedTransaction, TimestampType, TopicPartition
from pyspark_log.records import compression
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.records.control import ControlType, encode_control_batch

TP = TopicPartition("t", 0)


def batch(base: int, values: list[bytes], *, codec: int = compression.NONE, pid: int = -1, txn: bool = False) -> bytes:
    recs = [ProducerRecord(None, v, 1000 + i) for i, v in enumerate(values)]
    return encode_batch(recs, base_offset=base, codec=codec, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                        transactional=txn)  # fmt: skip


def compacted(base: int, offsets: list[int], last_offset_delta: int) -> bytes:
    """A batch whose records kept only ``offsets`` (compaction) but whose lastOffsetDelta spans more."""
    import struct

    from pyspark_log.records.header import ATTRIBUTES_POS, CRC_POS, crc32c
    from pyspark_log.records.record import write_record

    body = bytearray()
    for off in offsets:
        write_record(body, off - base, 0, None, f"v{off}".encode(), ())
    raw = bytearray(batch(base, [b"x"]))
    head = raw[:61]
    struct.pack_into(">i", head, 23, last_offset_delta)
    struct.pack_into(">i", head, 57, len(offsets))
    out = head + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, CRC_POS, crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return bytes(out)


def values(parsed: object) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in parsed.records]  # type: ignore[attr-defined]


def test_records_from_the_fetch_offset_on() -> None:
    data = batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d"])
    parsed = parse_fetched(TP, data, 0)
    assert values(parsed) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert parsed.next_offset == 4
    r = parsed.records[0]
    assert (r.topic, r.partition, r.timestamp, r.timestamp_type) == ("t", 0, 1000, TimestampType.CREATE_TIME)


def test_records_before_the_fetch_offset_in_the_first_batch_are_skipped() -> None:
    data = batch(10, [b"a", b"b", b"c", b"d"], codec=compression.GZIP)
    assert values(parse_fetched(TP, data, 12)) == [(12, b"c"), (13, b"d")]


def test_whole_batches_before_the_fetch_offset_are_skipped() -> None:
    data = batch(0, [b"a"]) + batch(1, [b"b"])
    parsed = parse_fetched(TP, data, 1)
    assert values(parsed) == [(1, b"b")]
    assert parsed.next_offset == 2


def test_a_partial_trailing_batch_is_ignored() -> None:
    whole = batch(0, [b"a"])
    data = whole + batch(1, [b"b" * 100])[:70]
    parsed = parse_fetched(TP, data, 0)
    assert values(parsed) == [(0, b"a")]
    assert parsed.next_offset == 1
    assert parsed.complete_batches == 1
    only_partial = parse_fetched(TP, batch(0, [b"x" * 100])[:80], 0)
    assert only_partial.complete_batches == 0
    assert only_partial.next_offset == 0


def test_compacted_gaps_advance_the_position_past_the_batch() -> None:
    data = compacted(0, [1, 4], last_offset_delta=9)
    parsed = parse_fetched(TP, data, 0)
    assert values(parsed) == [(1, b"v1"), (4, b"v4")]
    assert parsed.next_offset == 10


def test_control_batches_are_skipped_and_advance_the_position() -> None:
    data = batch(0, [b"a"], pid=5, txn=True) + encode_control_batch(ControlType.COMMIT, 5, 0, 0, 2000, base_offset=1)
    parsed = parse_fetched(TP, data, 0, read_committed=True)
    assert values(parsed) == [(0, b"a")]
    assert parsed.next_offset == 2
    marker_only = parse_fetched(TP, encode_control_batch(ControlType.COMMIT, 5, 0, 0, 2000, base_offset=7), 7)
    assert marker_only.records == []
    assert marker_only.next_offset == 8


def test_read_committed_drops_aborted_transactions() -> None:
    data = (
        batch(0, [b"keep-0"], pid=1, txn=True)
        + batch(1, [b"drop-1", b"drop-2"], pid=2, txn=True)
        + encode_control_batch(ControlType.COMMIT, 1, 0, 0, 0, base_offset=3)
        + encode_control_batch(ControlType.ABORT, 2, 0, 0, 0, base_offset=4)
        + batch(5, [b"keep-5"], pid=2, txn=True)
        + batch(6, [b"plain-6"])
    )
    aborted = [AbortedTransaction(2, 1)]
    committed = parse_fetched(TP, data, 0, read_committed=True, aborted=aborted)
    assert values(committed) == [(0, b"keep-0"), (5, b"keep-5"), (6, b"plain-6")]
    assert committed.next_offset == 7
    uncommitted = parse_fetched(TP, data, 0, read_committed=False, aborted=aborted)
    assert [v for _, v in values(uncommitted)] == [b"keep-0", b"drop-1", b"drop-2", b"keep-5", b"plain-6"]


def test_an_aborted_transaction_only_starts_at_its_first_offset() -> None:
    data = batch(0, [b"before"], pid=3, txn=True) + batch(1, [b"aborted"], pid=3, txn=True)
    data += encode_control_batch(ControlType.ABORT, 3, 0, 0, 0, base_offset=2)
    parsed = parse_fetched(TP, data, 0, read_committed=True, aborted=[AbortedTransaction(3, 1)])
    assert values(parsed) == [(0, b"before")]


def test_empty_and_none_records() -> None:
    assert parse_fetched(TP, None, 5).next_offset == 5
    assert parse_fetched(TP, b"", 5).records == []


def test_leader_epoch_and_log_append_time() -> None:
    from pyspark_log.records.header import read_header, set_log_append_time

    raw = bytearray(batch(0, [b"a", b"b"]))
    set_log_append_time(raw, 0, read_header(raw), 5555)
    parsed = parse_fetched(TP, bytes(raw), 0)
    assert {r.timestamp for r in parsed.records} == {5555}
    assert parsed.records[0].timestamp_type == TimestampType.LOG_APPEND_TIME
