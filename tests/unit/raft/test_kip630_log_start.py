"""KIP-630 log start offset: the in-memory log, the file on disk and the driver once a snapshot
covers a prefix ("Snapshot Format", "Loading Snapshots", "Deleting Snapshots and Log Segments")."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from broker.raft.driver import RaftDriver
from broker.raft.log import Entry, LeaderChange, OffsetAndEpoch, RaftLog, VoterSpec, VotersRecord
from broker.raft.snapshot import RetentionPolicy, SnapshotPolicy
from broker.raft.store import MetadataLog, list_snapshots, load_newest_valid, log_file_name
from tests.unit.raft.driver_harness import FAST, Node, wait_until


def sample() -> list[Entry]:
    return [
        Entry(0, 1, LeaderChange(1, (1,), (1,))),
        Entry(1, 1, b"a"),
        Entry(2, 2, b"b"),
        Entry(3, 2, b"c"),
        Entry(4, 3, b"d"),
    ]


def test_raft_log_prefix_deletion_keeps_offsets_and_epochs() -> None:
    log = RaftLog(sample())
    log.delete_prefix(3, 2)
    assert (log.start_offset, log.end_offset) == (3, 5)
    assert [e.offset for e in log.entries()] == [3, 4]
    assert log.entry(4).payload == b"d"
    assert log.read(3, 10)[0].payload == b"c"
    with pytest.raises(ValueError):
        log.read(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 4)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(3, 5)
    log.truncate_to(3)  # down to the start: the snapshot's epoch remains the last epoch
    assert log.end_offset_and_epoch() == OffsetAndEpoch(2, 3)
    log.append([Entry(3, 4, b"x")])
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 3)


def test_raft_log_built_from_a_snapshot_and_a_tail() -> None:
    log = RaftLog([Entry(10, 5, b"t")], start_offset=10, start_epoch=4)
    assert log.end_offset_and_epoch() == OffsetAndEpoch(5, 11)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(4, 10)
    empty = RaftLog((), start_offset=10, start_epoch=4)
    assert empty.end_offset_and_epoch() == OffsetAndEpoch(4, 10)


def test_metadata_log_prefix_deletion_renames_the_file_and_survives_reopen(tmp_path: Path) -> None:
    store = MetadataLog(tmp_path, lambda: 1_700_000_000_000)
    store.open()
    store.append(sample())
    store.flush()
    store.delete_prefix(3)
    assert [p.name for p in tmp_path.glob("*.log")] == [log_file_name(3)]
    assert store.end_offset == 5
    store.close()
    again = MetadataLog(tmp_path, lambda: 0)
    assert [e.offset for e in again.open()] == [3, 4]
    assert again.start_offset == 3
    again.truncate(4)
    again.append([Entry(4, 4, b"z")])
    again.close()
    (tmp_path / log_file_name(0)).write_bytes(b"stale leftover of an interrupted replacement")
    third = MetadataLog(tmp_path, lambda: 0)
    assert [e.payload for e in third.open()] == [b"c", b"z"]
    assert not (tmp_path / log_file_name(0)).exists()
    third.close()


def test_driver_snapshots_deletes_the_prefix_and_restarts_from_the_snapshot(tmp_path: Path) -> None:
    """A one-voter quorum with a 200-byte snapshot threshold and no retention: snapshot files
    appear, the log starts at the newest one, and a restart loads it and replays only the tail."""
    node = Node(1, tmp_path)
    applied: list[bytes] = []
    loaded: list[tuple[int, tuple[bytes, ...]]] = []

    def make() -> RaftDriver:
        from broker.raft.config import RaftConfig, VoterEndpoint

        endpoints = {1: VoterEndpoint(1, "127.0.0.1", node.port)}
        bootstrap = VotersRecord((VoterSpec(1, bytes(16), "127.0.0.1", node.port),))
        config = RaftConfig(
            node_id=1, voters=frozenset(endpoints), voter_endpoints=endpoints, bootstrap_voters=bootstrap, **FAST
        )
        driver = RaftDriver(
            config, 1, "snap-test", node.dir,
            snapshot_policy=SnapshotPolicy(200, 0), retention_policy=RetentionPolicy(0, -1),
        )  # fmt: skip
        driver.add_committed_listener(lambda _offset, payload: applied.append(payload))

        def capture():
            frozen = list(applied)
            return lambda: frozen

        def load(end_offset: int, records: Sequence[bytes]) -> None:
            loaded.append((end_offset, tuple(records)))
            applied[:] = list(records)

        driver.set_snapshot_handler(capture, load)
        node.driver = driver
        return driver

    async def scenario() -> None:
        await node.listen()
        driver = make()
        await driver.start()
        try:
            await wait_until(lambda: driver.is_leader, what="leadership")
            for i in range(60):
                await driver.append([f"record-{i:03d}".encode() * 3])
            await wait_until(lambda: driver.core.log.start_offset > 0, what="a deleted log prefix")
            assert list_snapshots(node.dir)
            snapshot = load_newest_valid(node.dir)
            assert snapshot is not None
            assert snapshot.voters is not None
            assert [v.voter_id for v in snapshot.voters.voters] == [1]
            assert driver.core.log.start_offset <= snapshot.snapshot_id.end_offset
            before = list(applied)
        finally:
            await driver.shutdown(graceful=False)
        applied.clear()
        driver = make()
        await driver.start()
        try:
            assert loaded
            assert loaded[-1][0] == max(list_snapshots(node.dir)).end_offset
            await wait_until(lambda: applied[: len(before)] == before, what="the whole state back")
            assert driver.core.voters == frozenset({1})
            await wait_until(lambda: driver.is_leader, what="leadership after restart")
            await driver.append([b"after-restart"])
            assert applied[-1] == b"after-restart"
            before = list(applied)
        finally:
            await driver.shutdown(graceful=False)
        # docs/operations.md "Restore a whole quorum": only the newest .checkpoint file is left.
        newest = max(list_snapshots(node.dir))
        for path in node.dir.iterdir():
            if path.name != newest.file_name:
                path.unlink()
        applied.clear()
        driver = make()
        await driver.start()
        try:
            assert loaded[-1][0] == newest.end_offset
            await wait_until(lambda: driver.is_leader, what="leadership from a bare snapshot")
            await driver.append([b"after-restore"])
            assert applied[-1] == b"after-restore"
            assert driver.core.log.start_offset == newest.end_offset
        finally:
            await driver.shutdown(graceful=False)
            await node.stop_listening()

    asyncio.run(scenario())


class Replica:
    """A harness node whose state machine is the list of applied payloads, with KIP-630 hooks."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.applied: list[bytes] = []
        self.loads = 0

    def make(self, ports: dict[int, int]) -> RaftDriver:
        from broker.raft.config import RaftConfig, VoterEndpoint

        endpoints = {v: VoterEndpoint(v, "127.0.0.1", port) for v, port in ports.items()}
        config = RaftConfig(node_id=self.node.node_id, voters=frozenset(endpoints), voter_endpoints=endpoints, **FAST)
        driver = RaftDriver(
            config, self.node.node_id, "snap-test", self.node.dir,
            snapshot_policy=SnapshotPolicy(300, 0), retention_policy=RetentionPolicy(0, -1),
        )  # fmt: skip
        self.applied = []
        driver.add_committed_listener(lambda _offset, payload: self.applied.append(payload))

        def capture():
            frozen = list(self.applied)
            return lambda: frozen

        def load(_end_offset: int, records: Sequence[bytes]) -> None:
            self.loads += 1
            self.applied[:] = list(records)

        driver.set_snapshot_handler(capture, load)
        self.node.driver = driver
        return driver


def test_a_voter_behind_the_log_start_fetches_the_snapshot_in_chunks(tmp_path: Path) -> None:
    """KIP-630 "Fetching Snapshots": a Fetch below the leader's log start is answered with the
    SnapshotId; the follower fetches it with FetchSnapshot (128-byte chunks here), installs it,
    and continues with Fetch from its end offset until its state equals the leader's."""
    replicas = {i: Replica(Node(i, tmp_path)) for i in (1, 2, 3)}

    async def scenario() -> None:
        for r in replicas.values():
            await r.node.listen()
        ports = {i: r.node.port for i, r in replicas.items()}
        for r in replicas.values():
            await r.make(ports).start()
        try:
            await wait_until(lambda: any(r.node.driver.is_leader for r in replicas.values()), what="a leader")
            leader = next(r for r in replicas.values() if r.node.driver.is_leader)
            lagging = next(r for r in replicas.values() if r is not leader)
            await lagging.node.driver.shutdown(graceful=False)
            lagging_end = lagging.node.driver.core.log.end_offset
            for i in range(80):
                await leader.node.driver.append([f"payload-{i:03d}".encode() * 2])
            await wait_until(lambda: leader.node.driver.core.log.start_offset > lagging_end, what="prefix deleted")
            driver = lagging.make(ports)
            await driver.start()
            driver.core.snapshot_chunk_bytes = 128
            await leader.node.driver.append([b"after"])
            await wait_until(lambda: lagging.applied == leader.applied, what="the lagging voter caught up")
            assert lagging.loads == 1
            assert list_snapshots(lagging.node.dir)
            assert driver.core.log.start_offset == max(list_snapshots(lagging.node.dir)).end_offset
            await leader.node.driver.append([b"later"])
            await wait_until(lambda: lagging.applied[-1:] == [b"later"], what="Fetch after the snapshot")
        finally:
            for r in replicas.values():
                if r.node.driver is not None:
                    await r.node.driver.shutdown(graceful=False)
                await r.node.stop_listening()

    asyncio.run(scenario())
