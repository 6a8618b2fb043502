"""KIP-630 metadata snapshots: a real broker's restart after many metadata records, and start-up
by full replay vs by snapshot + tail (in-process).

``--cluster`` (the issue's measure): one controller and one broker (``EmbeddedCluster``,
separate processes). The broker's restart time (process start to its ready line, which comes
after it loaded its newest snapshot and replayed the tail) and its RSS once ready are measured on
the fresh cluster, then after ``--records`` metadata records (IncrementalAlterConfigs of
``retention.ms`` on every topic: one ConfigRecord per topic per request, Kafka's record for
kafka-configs --alter), and the ratio printed. ``--no-snapshots`` sets the snapshot triggers
out of reach, to compare with a broker that replays the whole log.

    .venv/bin/python bench/metadata_snapshots.py --cluster --records 1000000

Without ``--cluster`` (in-process): builds a metadata log of ``--records`` config changes (Kafka's ConfigRecord, what
kafka-configs --alter writes) over ``--topics`` topics, then measures what a restart costs:

* full replay: decode and apply every entry (what pylog's start does today);
* snapshot: encode the state as a KIP-630 snapshot file, write it (fsync, rename), read it back,
  validate and decode it (what a start from a snapshot does before replaying the tail);

and the peak RSS after each. Prints figures; asserts nothing.

    .venv/bin/python bench/metadata_snapshots.py --records 1000000
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import ConfigRecord, RegisterBrokerRecord, TopicRecord, encode_records
from broker.metadata.replay import apply_payload
from broker.metadata.snapshot_records import state_from_records, state_to_records
from broker.raft.snapshot import SnapshotId, encode_snapshot
from broker.raft.store import load_newest_valid, write_snapshot


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def process_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def restart_figures(cluster: Any, broker: int, times: int) -> tuple[float, float]:
    """Median seconds from start to ready over ``times`` restarts, and the RSS (MiB) after the last."""
    took = []
    for _ in range(times):
        cluster.stop(broker)
        start = time.perf_counter()
        cluster.nodes[broker].start()
        took.append(time.perf_counter() - start)
    pid = cluster.nodes[broker].pid
    return statistics.median(took), process_rss_mib(pid)


def cluster_bench(args: argparse.Namespace) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    from pyspark_log.embedded_cluster import EmbeddedCluster

    overrides: dict[str, str] = {}
    if args.snapshot_bytes:
        overrides = {
            "metadata.log.max.record.bytes.between.snapshots": str(args.snapshot_bytes),
            "metadata.max.retention.bytes": str(args.snapshot_bytes),
        }
    if args.no_snapshots:
        overrides = {
            "metadata.log.max.record.bytes.between.snapshots": str(2**62),
            "metadata.log.max.snapshot.interval.ms": "0",
        }
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedCluster(Path(tmp), controllers=(1,), brokers=(2,), overrides=overrides) as cluster,
    ):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        names = [f"t{i}" for i in range(args.topics)]
        for future in admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=60).values():
            future.result(timeout=120)
        fresh_s, fresh_rss = restart_figures(cluster, 2, 3)
        print(f"fresh cluster: broker restart {fresh_s:.2f} s (median of 3), RSS {fresh_rss:.0f} MiB")

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        start = time.perf_counter()
        written = 0
        value = 0
        in_flight: list[Any] = []
        while written < args.records:
            value += 1
            entry = ConfigEntry("retention.ms", str(86_400_000 + value), incremental_operation=AlterConfigOpType.SET)
            resources = [ConfigResource("topic", n, incremental_configs=[entry]) for n in names]
            in_flight.extend(admin.incremental_alter_configs(resources).values())
            written += len(resources)
            if len(in_flight) >= 16 * len(names):
                for future in in_flight:
                    future.result(timeout=120)
                in_flight.clear()
            if value % 200 == 0:
                rate = written / (time.perf_counter() - start)
                print(f"  {written} records, {rate:.0f}/s", flush=True)
        for future in in_flight:
            future.result(timeout=120)
        took = time.perf_counter() - start
        print(f"wrote {written} metadata records in {took:.0f} s ({written / took:.0f}/s)")
        expected = str(86_400_000 + value)
        deadline = time.monotonic() + 300
        broker_admin = AdminClient({"bootstrap.servers": cluster.address(2)})
        while time.monotonic() < deadline:
            res = ConfigResource("topic", names[-1])
            entry = broker_admin.describe_configs([res])[res].result(timeout=60).get("retention.ms")
            if entry is not None and entry.value == expected:
                break
            time.sleep(0.5)
        metadata_dir = cluster.nodes[2].data_dir / "logs" / "__cluster_metadata-0"
        files = sorted(p.name for p in metadata_dir.iterdir())
        sizes = {p.name: p.stat().st_size for p in metadata_dir.iterdir()}
        print(f"broker metadata dir: {files} ({sum(sizes.values()) / 2**20:.1f} MiB)")
        after_s, after_rss = restart_figures(cluster, 2, 3)
        print(f"after {written} records: broker restart {after_s:.2f} s (median of 3), RSS {after_rss:.0f} MiB")
        print(f"ratio vs fresh: restart {after_s / fresh_s:.2f}x, RSS {after_rss / fresh_rss:.2f}x (target <= 1.2x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--cluster", action="store_true", help="measure a real broker's restart")
    parser.add_argument("--no-snapshots", action="store_true", help="with --cluster: snapshot triggers off")
    parser.add_argument(
        "--snapshot-bytes", type=int, default=0,
        help="with --cluster: metadata.log.max.record.bytes.between.snapshots and metadata.max.retention.bytes",
    )  # fmt: skip
    args = parser.parse_args()
    if args.cluster:
        cluster_bench(args)
        return

    start = time.perf_counter()
    payloads = [encode_records([RegisterBrokerRecord(b, f"i{b}", "127.0.0.1", 9000 + b)]) for b in (1, 2, 3)]
    payloads += [encode_records([TopicRecord(f"t{i}", uuid.uuid4())]) for i in range(args.topics)]
    for n in range(args.records - len(payloads)):
        payloads.append(encode_records([ConfigRecord(f"t{n % args.topics}", "retention.ms", str(n))]))
    log_bytes = sum(len(p) for p in payloads)
    took_s = time.perf_counter() - start
    print(f"generated {len(payloads)} metadata entries ({log_bytes / 2**20:.1f} MiB) in {took_s:.1f} s")

    start = time.perf_counter()
    state = ClusterState()
    for offset, payload in enumerate(payloads):
        state = apply_payload(state, offset, payload)
    replay_s = time.perf_counter() - start
    print(f"full replay: {replay_s:.2f} s, peak RSS {rss_mib():.0f} MiB (includes the generated log)")

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        sid = SnapshotId(len(payloads), 1)
        start = time.perf_counter()
        records = state_to_records(state)
        data = encode_snapshot(sid, records, 0, timestamp_ms=0)
        encode_s = time.perf_counter() - start
        start = time.perf_counter()
        write_snapshot(directory, sid, data)
        write_s = time.perf_counter() - start
        start = time.perf_counter()
        snapshot = load_newest_valid(directory)
        assert snapshot is not None
        loaded = state_from_records(snapshot.records)
        load_s = time.perf_counter() - start
    assert loaded == state
    print(
        f"snapshot: {len(records)} records, {len(data) / 2**10:.1f} KiB; encode {encode_s * 1000:.1f} ms, "
        f"write+fsync {write_s * 1000:.1f} ms, load+validate+decode {load_s * 1000:.1f} ms"
    )
    print(f"start-up from the snapshot is {replay_s / max(load_s, 1e-9):.0f}x faster than the full replay")


if __name__ == "__main__":
    main()
