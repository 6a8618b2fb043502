"""Parsing one partition's fetched record batches, pure: bytes in, records and the next
position out (no I/O, no asyncio; the driver is ``fetcher.Fetcher``).

``parse_fetched`` turns one partition's fetched bytes into records from ``fetch_offset``
on, the way Kafka's consumer does:

* a trailing batch cut short by the size limit is ignored (it is fetched again next time);
* records before ``fetch_offset`` in the first batch are skipped (a fetch that lands mid-batch
  gets the whole batch, compressed batches cannot be split);
* control batches (transaction markers) are skipped, and so are gaps compaction left: the next
  position is the last batch's ``lastOffset + 1``, not the last record's offset + 1;
* under read_committed, batches of aborted transactions are dropped: an aborted transaction
  (producer id, first offset) from the response becomes active once a batch reaches its first
  offset, every transactional batch of that producer is then skipped, and its ABORT marker ends
  it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark_log.client.types import AbortedTransaction, ConsumerRecord, TimestampType, TopicPartition
from pyspark_log.records.batch import decode_records
from pyspark_log.records.control import ControlType, first_control_type
from pyspark_log.records.header import iter_batch_headers


@dataclass(slots=True)
class ParsedFetch:
    records: list[ConsumerRecord]
    next_offset: int
    complete_batches: int


def parse_fetched(
    tp: TopicPartition,
    buf: bytes | memoryview | None,
    fetch_offset: int,
    *,
    read_committed: bool = False,
    aborted: Iterable[AbortedTransaction] = (),
    check_crcs: bool = True,
) -> ParsedFetch:
    """Records at or after ``fetch_offset`` in ``buf`` and the position after them."""
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    if not buf:
        return ParsedFetch(out, next_offset, 0)
    pending = deque(sorted(aborted, key=lambda a: a.first_offset)) if read_committed else deque()
    active: set[int] = set()
    topic, partition = tp.topic, tp.partition
    count = 0
    for pos, header in iter_batch_headers(buf, verify_crc=check_crcs, stop_at_partial=True):
        count += 1
        while pending and pending[0].first_offset <= header.last_offset:
            active.add(pending.popleft().producer_id)
        if header.is_control:
            if active and header.producer_id in active and first_control_type(buf, pos, header) == ControlType.ABORT:
                active.discard(header.producer_id)
            next_offset = max(next_offset, header.next_offset)
            continue
        if header.next_offset <= fetch_offset:
            continue
        next_offset = header.next_offset
        if read_committed and header.is_transactional and header.producer_id in active:
            continue
        _, records = decode_records(buf, pos, verify_crc=False)
        ts_type = TimestampType(header.timestamp_type)
        epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
        for r in records:
            if r.offset >= fetch_offset:
                out.append(
                    ConsumerRecord(topic, partition, r.offset, r.timestamp, ts_type, r.key, r.value, r.headers, epoch)
                )
    return ParsedFetch(out, next_offset, count)
