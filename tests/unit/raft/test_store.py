"""The durable side of KIP-595: the ``quorum-state`` file and the metadata log on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from broker.raft.effects import QuorumStateData
from broker.raft.log import Entry, LeaderChange
from broker.raft.store import (
    LOG_FILE,
    QUORUM_STATE_FILE,
    MetadataLog,
    QuorumStateFile,
    StoreError,
    decode_entries,
    encode_entries,
)
from pyspark_log.records.control import ControlType, decode_control_batch
from pyspark_log.records.header import read_header

CLUSTER = "store-test-cluster"


def clock() -> int:
    return 1_700_000_000_000


def entries() -> list[Entry]:
    return [
        Entry(0, 1, LeaderChange(1, (1, 2, 3), (1, 2))),
        Entry(1, 1, b"topic-a"),
        Entry(2, 1, b"topic-b"),
        Entry(3, 2, LeaderChange(2, (1, 2, 3), (2, 3))),
        Entry(4, 2, b""),
    ]


def test_quorum_state_has_the_seeds_fields(tmp_path: Path) -> None:
    """KIP-595 "Quorum State": LeaderId, LeaderEpoch, VotedId, AppliedOffset, CurrentVoters."""
    store = QuorumStateFile(tmp_path, CLUSTER)
    assert store.read() is None
    state = QuorumStateData(leader_id=2, leader_epoch=7, voted_id=2, applied_offset=41, current_voters=(1, 2, 3))
    store.write(state)
    data = json.loads((tmp_path / QUORUM_STATE_FILE).read_text())
    assert data == {
        "clusterId": CLUSTER,
        "leaderId": 2,
        "leaderEpoch": 7,
        "votedId": 2,
        "appliedOffset": 41,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }
    assert QuorumStateFile(tmp_path, CLUSTER).read() == state


def test_quorum_state_write_is_atomic(tmp_path: Path) -> None:
    """A crash during a write leaves the previous state: the new one goes to a temp file first,
    which is fsynced and renamed over the old (a half-written temp file is never read)."""
    store = QuorumStateFile(tmp_path, CLUSTER)
    old = QuorumStateData(-1, 3, 1, 0, (1, 2, 3))
    store.write(old)
    (tmp_path / (QUORUM_STATE_FILE + ".tmp")).write_text('{"leaderId": 9, "leaderEp')  # crash mid-write
    assert store.read() == old
    new = QuorumStateData(-1, 4, 2, 0, (1, 2, 3))
    store.write(new)
    assert store.read() == new
    assert not (tmp_path / (QUORUM_STATE_FILE + ".tmp")).exists()


def test_unreadable_quorum_state_refuses_to_start(tmp_path: Path) -> None:
    """Guessing epoch 0 could grant a second vote in an epoch: a damaged file is an error."""
    (tmp_path / QUORUM_STATE_FILE).write_text("{not json")
    with pytest.raises(StoreError, match="not a valid quorum-state file"):
        QuorumStateFile(tmp_path, CLUSTER).read()
    (tmp_path / QUORUM_STATE_FILE).write_text(json.dumps({"leaderId": 1, "leaderEpoch": -2}))
    with pytest.raises(StoreError):
        QuorumStateFile(tmp_path, CLUSTER).read()


def test_quorum_state_of_another_cluster_is_refused(tmp_path: Path) -> None:
    QuorumStateFile(tmp_path, "other").write(QuorumStateData(-1, 1, -1, 0, (1,)))
    with pytest.raises(StoreError, match="belongs to cluster 'other'"):
        QuorumStateFile(tmp_path, CLUSTER).read()


def test_log_entries_are_record_batches_with_their_epoch(tmp_path: Path) -> None:
    """Each entry is one batch: baseOffset = offset, partitionLeaderEpoch = epoch; the
    LeaderChange entry is a control batch of type LEADER_CHANGE (Kafka's 2)."""
    log = MetadataLog(tmp_path, clock)
    assert log.open() == []
    log.append(entries())
    log.flush()
    data = log.read_bytes()
    header = read_header(data, 0)
    assert (header.base_offset, header.partition_leader_epoch, header.is_control) == (0, 1, True)
    _, records = decode_control_batch(data, 0)
    assert records[0].kind == ControlType.LEADER_CHANGE
    log.close()
    reopened = MetadataLog(tmp_path, clock)
    assert reopened.open() == entries()
    assert reopened.recovered_bytes_dropped == 0
    reopened.close()


def test_torn_tail_is_cut_on_open(tmp_path: Path) -> None:
    """A crash in mid-append leaves part of a batch: recovery keeps every whole, valid batch."""
    log = MetadataLog(tmp_path, clock)
    log.open()
    log.append(entries())
    log.flush()
    whole = log.read_bytes()
    log.close()
    path = tmp_path / LOG_FILE
    with open(path, "r+b") as f:
        f.truncate(len(whole) - 7)
    reopened = MetadataLog(tmp_path, clock)
    assert reopened.open() == entries()[:4]
    assert path.stat().st_size == len(reopened.read_bytes())
    reopened.append([Entry(4, 2, b"again")])
    reopened.flush()
    reopened.close()
    assert MetadataLog(tmp_path, clock).open()[-1] == Entry(4, 2, b"again")


def test_corrupt_batch_ends_the_log(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path, clock)
    log.open()
    log.append(entries())
    log.flush()
    start_of_third = len(log.read_bytes(0, 2))
    log.close()
    path = tmp_path / LOG_FILE
    data = bytearray(path.read_bytes())
    data[start_of_third + 70] ^= 0xFF  # inside the CRC-covered part of entry 2
    path.write_bytes(bytes(data))
    assert MetadataLog(tmp_path, clock).open() == entries()[:2]


def test_truncation_is_durable(tmp_path: Path) -> None:
    """Follower truncation (DivergingEpoch) removes the entries at and after the offset."""
    log = MetadataLog(tmp_path, clock)
    log.open()
    log.append(entries())
    log.flush()
    log.truncate(3)
    assert log.end_offset == 3
    log.append([Entry(3, 3, b"new")])
    log.flush()
    log.close()
    assert MetadataLog(tmp_path, clock).open() == [*entries()[:3], Entry(3, 3, b"new")]


def test_out_of_order_append_and_truncation_are_refused(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path, clock)
    log.open()
    with pytest.raises(StoreError):
        log.append([Entry(1, 1, b"x")])
    with pytest.raises(StoreError):
        log.truncate(1)
    log.close()


def test_fetch_records_round_trip_and_keep_the_leaders_bytes(tmp_path: Path) -> None:
    """The bytes a leader sends are the bytes it stored; a follower stores them unchanged."""
    wire = encode_entries(entries(), clock())
    decoded = decode_entries(wire + wire[:30])  # a partial trailing batch is ignored
    assert [e for e, _ in decoded] == entries()
    follower = MetadataLog(tmp_path, lambda: 5)
    follower.open()
    follower.append([e for e, _ in decoded], {(e.offset, e.epoch): raw for e, raw in decoded})
    assert follower.read_bytes() == wire
    assert follower.read_bytes(1, 3) == b"".join(raw for _, raw in decoded[1:3])
    follower.close()
    assert os.path.getsize(tmp_path / LOG_FILE) == len(wire)


def test_read_batches_checks_the_file_still_holds_those_entries(tmp_path: Path) -> None:
    """A Fetch answer's bytes come from the file; after a truncation and a new append at the same
    offsets (another epoch) the old entries are refused rather than sent as someone else's."""
    log = MetadataLog(tmp_path, clock)
    log.open()
    log.append(entries())
    wanted = entries()[1:4]
    assert [e for e, _ in decode_entries(log.read_batches(wanted))] == wanted
    assert log.read_batches([]) == b""
    log.truncate(2)
    with pytest.raises(StoreError):
        log.read_batches(wanted)  # past the end now
    log.append([Entry(2, 3, b"other"), Entry(3, 3, b"other too")])
    with pytest.raises(StoreError, match="no longer holds entry 2 of epoch 1"):
        log.read_batches(wanted)
    with pytest.raises(StoreError, match="no longer holds entry 2 of epoch 3"):
        log.read_batches([entries()[0], Entry(2, 3, b"other")])  # not consecutive
    log.close()
