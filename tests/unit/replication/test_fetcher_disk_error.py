"""A follower's disk error while truncating to the leader backs that partition off; it never ends
the fetcher loop (issue 31: the chaos ``disk-full`` nemesis left a follower out of the ISR of every
partition led by one broker for good — the truncation's checkpoint write raised ENOSPC out of the
loop that fetches all of them, and nothing restarted it)."""

from __future__ import annotations

from pathlib import Path

from broker.replication.fetcher import ReplicaFetchers, SourceFetcher
from pyspark_log.wire.errors import ErrorCode
from tests.unit.log.helpers import FakeClock, batch
from tests.unit.replication.test_replica_manager import TOPIC, Node, follower_fetch, image


def test_a_restart_below_the_leaders_start_that_fails_on_disk_backs_off(tmp_path: Path) -> None:
    """OFFSET_OUT_OF_RANGE with the leader's log starting past this log's end: the follower
    restarts its log there, creating a segment; the directory is gone (a real I/O error), so the
    partition backs off instead of the exception ending the fetcher of every partition."""
    clock = FakeClock()
    node = Node(tmp_path, 1, clock)
    try:
        node.set_image(image(2, epoch=1))
        node.partition.append_as_follower(_leader_batches(tmp_path, clock))
        part = {"error_code": ErrorCode.OFFSET_OUT_OF_RANGE, "high_watermark": 500, "log_start_offset": 400}
        fetchers = ReplicaFetchers(node.replicas, lambda: node.current, clock_ms=clock)
        source = SourceFetcher(2, 0, "127.0.0.1", 9002)
        moved = Path(str(node.partition.log.directory) + ".away")
        Path(node.partition.log.directory).rename(moved)
        assert fetchers._apply_or_back_off(source, node.partition, part) is False  # backed off, not raised
    finally:
        node.close()


def _leader_batches(tmp_path: Path, clock: FakeClock) -> bytes:
    leader = Node(tmp_path / "leader", 2, clock)
    try:
        leader.set_image(image(2, epoch=1))
        leader.replicas.append(TOPIC, 0, batch(3))
        return follower_fetch(leader, 1, 0, last_epoch=-1).records.read_bytes()
    finally:
        leader.close()
