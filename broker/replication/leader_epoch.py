"""The leader-epoch cache of one partition: which leader epoch began at which offset (KIP-101).

Kafka documentation §5.4.4 "Guarantees" asks that a replica never keeps "data that appears" on no other replica: a
follower that comes back must cut its log where it diverges from the leader's. Batches carry the
epoch of the leader that appended them (``partitionLeaderEpoch``); this cache remembers, per
epoch, the first offset written in it, so that a leader can answer "where does epoch E end in
your log?" (``end_offset_for``: OffsetForLeaderEpoch, KIP-101/279, and a follower Fetch's
``last_fetched_epoch``, KIP-595-style divergence) and a follower can find the point to truncate to.

Entries are ``(epoch, start_offset)`` with both strictly increasing. ``assign`` adds an epoch at
the offset where its first batch lands (a leader at its log end when it takes over; a follower at
each appended batch whose epoch is new); ``truncate_from_end``/``truncate_from_start`` follow the
log's truncation and log-start moves.

Persistence (``LeaderEpochFile``): Kafka's ``leader-epoch-checkpoint`` text file in the partition
directory (version 0, count, then ``epoch start_offset`` lines), rewritten whenever the entries
change. With a ``durable_before`` hook (the partition passes ``LogFlusher.sync_before``) the rewrite is
temp file + rename without fsync, on the event loop (a failover changes hundreds of partitions'
epochs at once: no fsync per partition on the loop): it survives a process crash (page cache),
and the log's next background flush fsyncs file and directory before its recovery point passes
the start offset of any entry that changed. That is the ordering start-up needs: ``load`` keeps
the file's entries below the log end and adds the epochs of the batches from
``max(last entry, recovery point)`` on, so an entry missing from the file after a machine crash
is found again in the batches — as long as it does not start below a durable recovery point.
A machine crash during a rewrite not yet fsynced can leave the file empty or damaged (KAFKA-16541):
``read_checked`` reports that, and the partition then rebuilds every entry from the batches.
Without the hook (tools, tests) the write is ``write_atomic`` (fsync file and directory).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from broker.log.files import write_atomic, write_replace

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """The in-memory entries and their rules (pure). ``on_change`` persists after every change."""

    def __init__(self, entries: Iterable[EpochEntry] = (), on_change: Callable[[list[EpochEntry]], None] | None = None):
        self._entries: list[EpochEntry] = []
        for entry in entries:
            self._add(entry)
        self._on_change = on_change

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def _add(self, entry: EpochEntry) -> bool:
        if self._entries:
            last = self._entries[-1]
            if entry.epoch <= last.epoch:
                return False
            if entry.start_offset < last.start_offset:
                # a newer epoch starting below an older one: the older one never held data there
                self._entries = [e for e in self._entries if e.start_offset < entry.start_offset]
        self._entries.append(entry)
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` begins at ``start_offset``; ignored for an epoch not newer than the
        latest (or a negative one). True when the cache changed."""
        if epoch < 0 or start_offset < 0 or epoch <= self.latest_epoch:
            return False
        changed = self._add(EpochEntry(epoch, start_offset))
        if changed:
            self._changed()
        return changed

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for a follower or client that last saw ``requested_epoch``
        (Kafka ``LeaderEpochFileCache.endOffsetFor``): for the latest epoch (or a later one) the log
        end offset; for an older one the start offset of the next epoch the cache holds, with the
        largest epoch not above the requested one — or the requested epoch itself when the cache
        holds none that old (everything before the first epoch here is gone); ``(-1, -1)`` for an
        undefined epoch or an empty cache."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch >= self.latest_epoch:
            return self.latest_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        after = bisect_right(epochs, requested_epoch)  # first entry with an epoch above the requested
        if after == 0:
            return requested_epoch, self._entries[0].start_offset
        return self._entries[after - 1].epoch, self._entries[after].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (UNDEFINED_EPOCH below the first entry)."""
        starts = [e.start_offset for e in self._entries]
        at = bisect_right(starts, offset)
        return self._entries[at - 1].epoch if at else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut to end at ``end_offset``: drop epochs that start at or after it."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch holding it now starts there and
        the epochs before it go (Kafka ``truncateFromStart``)."""
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed or (len(removed) == 1 and removed[0].start_offset == start_offset):
            return
        kept = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
        self._changed()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._changed()

    def persist_to(self, on_change: Callable[[list[EpochEntry]], None]) -> None:
        """Persist through ``on_change`` from now on (the log moved to another directory), and
        write the current entries there at once."""
        self._on_change = on_change
        on_change(list(self._entries))

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(list(self._entries))


def diverging_epoch(
    leader: LeaderEpochCache, leader_end_offset: int, last_fetched_epoch: int, fetch_offset: int
) -> tuple[int, int] | None:
    """The leader's answer to a follower that fetches at ``fetch_offset`` after a batch of
    ``last_fetched_epoch``: None when its log agrees with the leader's up to there, else the
    ``(epoch, end offset)`` it must truncate to (KIP-595 ``DivergingEpoch``, as Kafka's leader
    answers replica fetches since KIP-320)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = leader.end_offset_for(last_fetched_epoch, leader_end_offset)
    if end < 0:
        return None  # the leader knows no epochs (records from before leader epochs): nothing to compare
    if epoch < last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None


def truncation_offset(
    follower: LeaderEpochCache, follower_end_offset: int, follower_high_watermark: int,
    leader_epoch: int, leader_end_offset: int,
) -> int:  # fmt: skip
    """Where a follower cuts its log after the leader said its log diverges at ``(leader_epoch,
    leader_end_offset)`` (Kafka ``AbstractFetcherThread.getOffsetTruncationState``): the smaller of
    the leader's end and the follower's own end of that epoch; when the follower has no epoch at or
    below it, the start of its first epoch (none of its epochs is the leader's); when the leader
    knows no epoch at all, the follower's high watermark (everything below it is committed). The
    follower fetches again with its new last epoch, so the cut converges to where the logs agree."""
    if leader_epoch < 0 or leader_end_offset < 0:
        return min(follower_high_watermark, follower_end_offset)
    own_epoch, own_end = follower.end_offset_for(leader_epoch, follower_end_offset)
    if own_epoch < 0:
        entries = follower.entries
        own_end = entries[0].start_offset if entries else leader_end_offset
    return min(leader_end_offset, own_end, follower_end_offset)


def format_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    items = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(items)), *(f"{e.epoch} {e.start_offset}" for e in items)]
    return ("\n".join(lines) + "\n").encode()


def parse_epoch_checkpoint(text: str) -> list[EpochEntry]:
    """Raises ValueError naming the problem."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise ValueError("missing version or count line")
    if int(lines[0]) != CHECKPOINT_VERSION:
        raise ValueError(f"unsupported version {lines[0]!r}")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise ValueError(f"count line says {count} entries, found {len(lines) - 2}")
    entries = []
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"malformed line {line!r}")
        entries.append(EpochEntry(int(fields[0]), int(fields[1])))
    return entries


class LeaderEpochFile:
    """``leader-epoch-checkpoint`` of one partition directory. ``durable_before(path, offset)``
    (optional) is told after each write without fsync that the file must be durable before the
    log's recovery point exceeds ``offset``, the smallest start offset among the entries added
    or removed by the write."""

    def __init__(self, directory: Path, durable_before: Callable[[Path, int], None] | None = None) -> None:
        self.path = directory / CHECKPOINT_NAME
        self._durable_before = durable_before
        self._written: list[EpochEntry] | None = None  # the file's entries as last read or written

    def write(self, entries: list[EpochEntry]) -> None:
        data = format_epoch_checkpoint(entries)
        if self._durable_before is None:
            write_atomic(self.path, data)
            self._written = list(entries)
            return
        previous = self._written if self._written is not None else (self.read_checked() or [])
        write_replace(self.path, data)
        self._written = list(entries)
        changed = set(previous).symmetric_difference(entries)
        if changed:  # else the previous write's registration covers this content too
            self._durable_before(self.path, min(e.start_offset for e in changed))

    def read(self) -> list[EpochEntry]:
        """The file's entries; empty when missing or unreadable (logged)."""
        return self.read_checked() or []

    def read_checked(self) -> list[EpochEntry] | None:
        """The file's entries (empty when missing); None when it exists but cannot be read or
        parsed (logged): a machine crash hit a rewrite not yet fsynced."""
        try:
            entries = parse_epoch_checkpoint(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            entries = []
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            log.warning("ignoring unreadable leader-epoch checkpoint %s: %s", self.path, exc)
            return None
        self._written = entries
        return list(entries)

    def load(self, log_end_offset: int, tail_epochs: Iterable[tuple[int, int]]) -> LeaderEpochCache:
        """A cache persisted to this file: its entries below ``log_end_offset``, then the
        ``(epoch, base offset)`` of the batches after them (the tail the caller scanned)."""
        stored = self.read()
        cache = LeaderEpochCache(e for e in stored if e.start_offset < log_end_offset)
        for epoch, base_offset in tail_epochs:
            cache.assign(epoch, base_offset)
        cache._on_change = self.write
        if cache.entries != stored:
            self.write(cache.entries)
        return cache
