"""KIP-630 in ``RaftDriver`` over real loopback sockets: snapshots written at the byte trigger,
the log prefix deleted, a restart from the newest snapshot plus tail (and from a bare snapshot
file), and a voter behind the leader's log start catching up with FetchSnapshot in chunks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from broker.raft.driver import RaftDriver
from broker.raft.log import VoterSpec, VotersRecord
from broker.raft.snapshot import RetentionPolicy, SnapshotPolicy
from broker.raft.store import list_snapshots, load_newest_valid
from tests.integration.raft_driver_harness import FAST, Node
from tests.waiting import wait_until_async


def test_driver_snapshots_deletes_the_prefix_and_restarts_from_the_snapshot(tmp_path: Path) -> None:
    """A one-voter quorum with a 200-byte snapshot threshold and no retention: snapshot files
    appear, the log starts at the newest one, and a restart loads it and replays only the tail.
    A batch listener sees the same entries as the per-entry listener, once each, in order; the
    tail the node knew to be committed at start-up comes as one batch; delivered payloads are
    released from memory and still read from the file."""
    node = Node(1, tmp_path)
    applied: list[bytes] = []
    per_entry: list[tuple[int, bytes]] = []
    batches: list[list[tuple[int, bytes]]] = []
    loaded: list[tuple[int, tuple[bytes, ...]]] = []

    def on_entry(offset: int, payload: bytes) -> None:
        applied.append(payload)
        per_entry.append((offset, payload))

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
        driver.add_committed_listener(on_entry)
        driver.add_batch_listener(lambda batch: batches.append(list(batch)))

        def capture():
            frozen = list(applied)
            return lambda: frozen

        def load(end_offset: int, records: Sequence[bytes]) -> None:
            loaded.append((end_offset, tuple(records)))
            applied[:] = list(records)

        driver.set_snapshot_handler(capture, load)
        node.driver = driver
        per_entry.clear()
        batches.clear()
        return driver

    async def scenario() -> None:
        await node.listen()
        driver = make()
        await driver.start()
        try:
            await wait_until_async(lambda: driver.is_leader, what="leadership")
            for i in range(60):
                await driver.append([f"record-{i:03d}".encode() * 3])
            await wait_until_async(lambda: driver.core.log.start_offset > 0, what="a deleted log prefix")
            assert list_snapshots(node.dir)
            snapshot = load_newest_valid(node.dir)
            assert snapshot is not None
            assert snapshot.voters is not None
            assert [v.voter_id for v in snapshot.voters.voters] == [1]
            assert driver.core.log.start_offset <= snapshot.snapshot_id.end_offset
            before = list(applied)
            assert [e for batch in batches for e in batch] == per_entry
            offset, _payload = per_entry[-1]
            assert driver.core.log.entry(offset).payload == b""  # released: the file still has it
            assert driver._log.read_batches([driver.core.log.entry(offset)])
        finally:
            await driver.shutdown(graceful=False)
        stored_hw = json.loads((node.dir / "quorum-state").read_text())["appliedOffset"]
        applied.clear()
        driver = make()
        await driver.start()
        try:
            assert loaded
            assert loaded[-1][0] == max(list_snapshots(node.dir)).end_offset
            await wait_until_async(lambda: applied[: len(before)] == before, what="the whole state back")
            tail = [(o, p) for o, p in per_entry if o < driver.core.log.end_offset and p in before]
            # empty when the newest snapshot was taken at the log's end (nothing left to replay)
            assert not tail or tail[0][0] >= loaded[-1][0]
            known = [(o, p) for o, p in tail if o < stored_hw]  # committed as far as the node knew
            assert not known or batches[0] == known  # replayed at start as one batch
            assert [e for batch in batches for e in batch] == per_entry
            assert driver.core.voters == frozenset({1})
            await wait_until_async(lambda: driver.is_leader, what="leadership after restart")
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
            await wait_until_async(lambda: driver.is_leader, what="leadership from a bare snapshot")
            await driver.append([b"after-restore"])
            assert applied[-1] == b"after-restore"
            assert driver.core.log.start_offset == newest.end_offset
        finally:
            await driver.shutdown(graceful=False)
            await node.stop_listening()

    asyncio.run(scenario())


def test_a_clean_shutdown_snapshots_a_large_tail_and_the_restart_replays_nothing(tmp_path: Path) -> None:
    """The byte trigger is far away: a clean shutdown after more than ``SHUTDOWN_SNAPSHOT_MIN_BYTES``
    of applied records writes a snapshot at the applied end, and the next start loads it and
    replays no tail. A stop that is not clean (a fatal error) writes none, and neither does a
    clean stop after a small tail."""
    from broker.raft.config import RaftConfig, VoterEndpoint
    from broker.raft.snapshot_keeper import SHUTDOWN_SNAPSHOT_MIN_BYTES

    node = Node(1, tmp_path)
    applied: list[bytes] = []
    batches: list[list[tuple[int, bytes]]] = []
    loaded: list[int] = []

    def make() -> RaftDriver:
        endpoints = {1: VoterEndpoint(1, "127.0.0.1", node.port)}
        bootstrap = VotersRecord((VoterSpec(1, bytes(16), "127.0.0.1", node.port),))
        config = RaftConfig(
            node_id=1, voters=frozenset(endpoints), voter_endpoints=endpoints, bootstrap_voters=bootstrap, **FAST
        )
        driver = RaftDriver(config, 1, "snap-test", node.dir, snapshot_policy=SnapshotPolicy(1 << 40, 0))
        driver.add_batch_listener(lambda batch: (batches.append(list(batch)), applied.extend(p for _, p in batch)))

        def capture():
            frozen = list(applied)
            return lambda: frozen

        def load(end_offset: int, records: Sequence[bytes]) -> None:
            loaded.append(end_offset)
            applied[:] = list(records)

        driver.set_snapshot_handler(capture, load)
        node.driver = driver
        batches.clear()
        return driver

    async def leading() -> RaftDriver:
        driver = make()
        await driver.start()
        await wait_until_async(lambda: driver.is_leader, what="leadership")
        return driver

    chunk = 64 * 1024
    large = [bytes([i]) * chunk for i in range(SHUTDOWN_SNAPSHOT_MIN_BYTES // chunk + 2)]

    async def scenario() -> None:
        await node.listen()
        try:
            driver = await leading()
            for payload in large:
                await driver.append([payload])
            await driver.shutdown(graceful=False)  # not clean: no snapshot
            assert list_snapshots(node.dir) == []

            applied.clear()
            driver = await leading()
            assert loaded == []  # the whole log replayed
            assert applied == large
            await driver.shutdown()  # clean, with the whole log applied since no snapshot
            (written,) = list_snapshots(node.dir)
            assert written.end_offset == driver.core.high_watermark

            applied.clear()
            driver = await leading()
            assert loaded == [written.end_offset]
            assert applied == large
            assert batches == []  # nothing left to replay at start-up
            await driver.append([b"small"])
            await driver.shutdown()  # clean, but a tail of a few bytes: no new snapshot
            assert list_snapshots(node.dir) == [written]
        finally:
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
            await wait_until_async(lambda: any(r.node.driver.is_leader for r in replicas.values()), what="a leader")
            leader = next(r for r in replicas.values() if r.node.driver.is_leader)
            lagging = next(r for r in replicas.values() if r is not leader)
            await lagging.node.driver.shutdown(graceful=False)
            lagging_end = lagging.node.driver.core.log.end_offset
            for i in range(80):
                await leader.node.driver.append([f"payload-{i:03d}".encode() * 2])
            await wait_until_async(
                lambda: leader.node.driver.core.log.start_offset > lagging_end, what="prefix deleted"
            )
            driver = lagging.make(ports)
            await driver.start()
            driver.core.snapshot_chunk_bytes = 128
            await leader.node.driver.append([b"after"])
            await wait_until_async(lambda: lagging.applied == leader.applied, what="the lagging voter caught up")
            assert lagging.loads == 1
            assert list_snapshots(lagging.node.dir)
            assert driver.core.log.start_offset == max(list_snapshots(lagging.node.dir)).end_offset
            await leader.node.driver.append([b"later"])
            await wait_until_async(lambda: lagging.applied[-1:] == [b"later"], what="Fetch after the snapshot")
        finally:
            for r in replicas.values():
                if r.node.driver is not None:
                    await r.node.driver.shutdown(graceful=False)
                await r.node.stop_listening()

    asyncio.run(scenario())
