"""The leader-epoch cache (KIP-101/279): where each epoch starts, where it ends, truncation points."""

from __future__ import annotations

from pathlib import Path

from broker.replication.leader_epoch import (
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochFile,
    diverging_epoch,
    format_epoch_checkpoint,
    parse_epoch_checkpoint,
    truncation_offset,
)


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(e, o) for e, o in entries)


def test_assign_keeps_epochs_and_start_offsets_increasing():
    c = cache()
    assert c.assign(1, 0)
    assert not c.assign(1, 5)  # not newer
    assert not c.assign(0, 9)
    assert c.assign(3, 10)
    assert c.entries == [EpochEntry(1, 0), EpochEntry(3, 10)]
    assert c.assign(4, 7)  # a newer epoch below an older one's start: the older never held data there
    assert c.entries == [EpochEntry(1, 0), EpochEntry(4, 7)]


def test_end_offset_for_an_epoch_is_the_next_epochs_start_or_the_log_end():
    """KIP-101: "the leader returns the first offset of the next epoch" (the end of the asked one)."""
    c = cache((1, 0), (3, 10), (5, 20))
    assert c.end_offset_for(5, 25) == (5, 25)
    assert c.end_offset_for(3, 25) == (3, 20)
    assert c.end_offset_for(4, 25) == (3, 20)  # unknown epoch: the largest below it
    assert c.end_offset_for(1, 25) == (1, 10)
    assert c.end_offset_for(0, 25) == (0, 0)  # older than every epoch here: it ends where epoch 1 starts
    assert c.end_offset_for(9, 25) == (5, 25)
    assert cache().end_offset_for(1, 5) == (-1, -1)


def test_truncation_follows_the_log():
    c = cache((1, 0), (3, 10), (5, 20))
    c.truncate_from_end(20)
    assert c.entries == [EpochEntry(1, 0), EpochEntry(3, 10)]
    c.truncate_from_start(12)
    assert c.entries == [EpochEntry(3, 12)]
    assert c.epoch_for_offset(15) == 3
    assert c.epoch_for_offset(11) == -1


def test_a_fetch_is_diverging_when_the_leader_has_no_such_epoch_past_the_fetch_offset():
    """Kafka documentation §5.4.4 "Guarantees": a replica that accepted message 6 before failing, and came back after
    another message 6 was written, must end with the leader's message 6."""
    leader = cache((1, 0), (3, 6))  # epoch 1 wrote offsets 0-5 here; epoch 3 starts at 6
    assert diverging_epoch(leader, 10, last_fetched_epoch=3, fetch_offset=10) is None
    assert diverging_epoch(leader, 10, last_fetched_epoch=1, fetch_offset=6) is None
    # the follower wrote offset 6 in epoch 1 (acks=1, lost with the old leader): epoch 1 ends at 6
    assert diverging_epoch(leader, 10, last_fetched_epoch=1, fetch_offset=7) == (1, 6)
    # the follower led epoch 2, which the new leader never saw
    assert diverging_epoch(leader, 10, last_fetched_epoch=2, fetch_offset=8) == (1, 6)
    assert diverging_epoch(leader, 10, last_fetched_epoch=-1, fetch_offset=8) is None


def test_the_follower_truncates_to_the_smaller_end_of_the_epoch_and_converges():
    follower = cache((1, 0), (2, 7))  # it holds 0-6 of epoch 1 and 7-8 of epoch 2
    assert truncation_offset(follower, 9, 5, leader_epoch=1, leader_end_offset=6) == 6
    assert truncation_offset(follower, 9, 5, leader_epoch=2, leader_end_offset=8) == 8
    assert truncation_offset(follower, 9, 5, leader_epoch=-1, leader_end_offset=-1) == 5  # the high watermark
    newer_only = cache((4, 3))
    assert truncation_offset(newer_only, 9, 2, leader_epoch=1, leader_end_offset=6) == 3  # its first epoch start


def test_a_follower_of_a_leader_whose_epochs_all_came_later_truncates_everything_of_its_own_epoch():
    """The sim's defect 3: the first leader wrote records nobody fetched and died; the new leader's
    cache starts at epoch 1 with an empty log. A returning follower with last epoch 0 is told epoch
    0 ends at offset 0 (Kafka's ``endOffsetFor`` for an epoch older than every entry) and cuts its
    unreplicated records instead of keeping them below the high watermark."""
    leader = cache((1, 0))
    assert diverging_epoch(leader, 0, last_fetched_epoch=0, fetch_offset=4) == (0, 0)
    follower = cache((0, 0))
    assert truncation_offset(follower, 4, 0, leader_epoch=0, leader_end_offset=0) == 0


def test_checkpoint_file_round_trips_and_drops_entries_past_the_log_end(tmp_path: Path):
    text = format_epoch_checkpoint([EpochEntry(0, 0), EpochEntry(2, 15)]).decode()
    assert text == "0\n2\n0 0\n2 15\n"
    assert parse_epoch_checkpoint(text) == [EpochEntry(0, 0), EpochEntry(2, 15)]
    file = LeaderEpochFile(tmp_path)
    file.write([EpochEntry(0, 0), EpochEntry(2, 15), EpochEntry(3, 40)])
    loaded = file.load(30, [(3, 20), (4, 25)])  # 40 is past the end; the tail scan found epochs 3, 4
    assert loaded.entries == [EpochEntry(0, 0), EpochEntry(2, 15), EpochEntry(3, 20), EpochEntry(4, 25)]
    assert file.read() == loaded.entries  # persisted at once
    loaded.assign(5, 30)
    assert file.read()[-1] == EpochEntry(5, 30)


def test_an_unreadable_checkpoint_is_ignored(tmp_path: Path):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n1 0\n")
    assert LeaderEpochFile(tmp_path).read() == []
