"""KIP-630 metadata snapshots: a real broker's restart after many metadata records, and start-up
by full replay vs by snapshot + tail (in-process).

``--cluster`` (the issue's measure): two clusters alike, one controller and one broker each
(``EmbeddedCluster``, separate processes, Kafka's default snapshot and retention settings unless
``--snapshot-bytes`` / ``--no-snapshots``) with ``--topics`` topics; "soaked" then gets
``--records`` metadata records, "fresh" nothing more. Then the two brokers are restarted in
turn, ``--restarts`` rounds (a busy machine weighs on both alike), and the median restart time
(process start to the ready line, which comes after the broker loaded its newest snapshot and
replayed the tail as one batch) and the RSS once ready are printed with the ratios. A restart
stops the broker cleanly (it then snapshots a tail of 1 MiB or more), or with ``--kill`` SIGKILLs
it (a crash: the next start replays the whole tail since the last triggered snapshot). The records
come from a soak of IncrementalAlterConfigs: each round sets ``--keys`` topic configs (large
values, so the data is untouched) on every topic, so the controller appends one entry of
``--keys`` ConfigRecords (Kafka's record for kafka-configs --alter) per topic; ``--in-flight``
rounds overlap. The controller commits one entry at a time (each waits for its fsync), so records
per entry is what makes 1,000,000 records take minutes, not hours. ``--profile DIR`` runs py-spy
on each broker's last restart (attached as soon as the process exists) and prints the share of
each start-up phase.

    .venv/bin/python bench/metadata_snapshots.py --cluster --records 1000000 --profile /tmp/prof

Without ``--cluster`` (in-process): builds a metadata log of ``--records`` config changes (Kafka's ConfigRecord, what
kafka-configs --alter writes) over ``--topics`` topics, then measures what a restart costs:

* full replay: decode and apply every entry as one batch (``apply_payloads``: what a start
  without a snapshot does);
* snapshot: encode the state as a KIP-630 snapshot file, write it (fsync, rename), read it back,
  validate and decode it (what a start from a snapshot does before replaying the tail);

and the peak RSS after each. Prints figures; asserts nothing.

    .venv/bin/python bench/metadata_snapshots.py --records 1000000
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import ConfigRecord, RegisterBrokerRecord, TopicRecord, encode_records
from broker.metadata.replay import apply_payloads
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


def restart_once(cluster: Any, broker: int, profile: Path | None = None, *, kill: bool = False) -> float:
    """Seconds from process start to the ready line of one restart of ``broker``, stopped cleanly
    or (``kill``) with SIGKILL. ``profile``: py-spy samples the start (attached as soon as the
    process exists) into this raw file."""
    if kill:
        cluster.kill(broker)
    else:
        cluster.stop(broker)
    node = cluster.nodes[broker]
    start = time.perf_counter()
    if profile is None:
        node.start()
        return time.perf_counter() - start
    node.start(wait=False)
    spy = subprocess.Popen(
        [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(node.pid), "--format", "raw",
         "--rate", "250", "--output", str(profile)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    node.wait_ready()
    took = time.perf_counter() - start
    spy.send_signal(signal.SIGINT)
    spy.wait(60)
    return took


def interleaved_restarts(
    clusters: dict[str, Any], broker: int, times: int, profile_dir: Path | None, *, kill: bool = False
) -> dict[str, tuple[float, float]]:
    """Restart ``broker`` of each cluster in turn, ``times`` rounds (so a busy machine weighs on
    every cluster alike); per cluster the median seconds to ready and the RSS (MiB) after the last
    restart. py-spy profiles the last round."""
    took: dict[str, list[float]] = {name: [] for name in clusters}
    for i in range(times):
        for name, cluster in clusters.items():
            last = profile_dir is not None and i == times - 1
            profile = profile_dir / f"{name}.txt" if last else None
            took[name].append(restart_once(cluster, broker, profile, kill=kill))
    return {name: (statistics.median(t), process_rss_mib(clusters[name].nodes[broker].pid)) for name, t in took.items()}


# Topic configs a soak may set over and over without changing what the broker does with the data
# it holds (large values): each one is a ConfigRecord (Kafka's record for kafka-configs --alter).
SOAK_KEYS = (
    "retention.ms", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "max.compaction.lag.ms", "min.compaction.lag.ms", "retention.bytes", "segment.jitter.ms",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "max.message.bytes",
)  # fmt: skip


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
    keys = SOAK_KEYS[: args.keys]
    profile_dir = Path(args.profile) if args.profile else None
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        # Two clusters alike: "fresh" only gets the topics, "soaked" the metadata records too.
        clusters: dict[str, Any] = {}
        for name in ("fresh", "soaked"):
            root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            clusters[name] = stack.enter_context(
                EmbeddedCluster(root, controllers=(1,), brokers=(2,), overrides=overrides)
            )
        names = [f"t{i}" for i in range(args.topics)]
        for cluster in clusters.values():
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
            for future in admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=60).values():
                future.result(timeout=120)
        cluster = clusters["soaked"]

        # One IncrementalAlterConfigs of ``len(keys)`` keys on every topic per round: the
        # controller appends one entry of ``len(keys)`` ConfigRecords per topic; ``--in-flight``
        # rounds overlap.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        start = time.perf_counter()
        written = entries = value = 0
        in_flight: deque[list[Any]] = deque()
        while written < args.records:
            value += 1
            configs = [ConfigEntry(k, str(10**12 + value), incremental_operation=AlterConfigOpType.SET) for k in keys]
            resources = [ConfigResource("topic", n, incremental_configs=configs) for n in names]
            in_flight.append(list(admin.incremental_alter_configs(resources).values()))
            written += len(resources) * len(keys)
            entries += len(resources)
            if len(in_flight) >= args.in_flight:
                for future in in_flight.popleft():
                    future.result(timeout=120)
            if value % 100 == 0:
                rate = written / (time.perf_counter() - start)
                print(f"  {written} records in {entries} entries, {rate:.0f} records/s", flush=True)
        for futures in in_flight:
            for future in futures:
                future.result(timeout=120)
        took = time.perf_counter() - start
        print(f"wrote {written} metadata records in {entries} entries in {took:.0f} s ({written / took:.0f}/s)")
        expected = str(10**12 + value)
        deadline = time.monotonic() + 300
        broker_admin = AdminClient({"bootstrap.servers": cluster.address(2)})
        while time.monotonic() < deadline:
            res = ConfigResource("topic", names[-1])
            entry = broker_admin.describe_configs([res])[res].result(timeout=60).get(keys[0])
            if entry is not None and entry.value == expected:
                break
            time.sleep(0.5)
        for name, c in clusters.items():
            metadata_dir = c.nodes[2].data_dir / "logs" / "__cluster_metadata-0"
            sizes = {p.name: p.stat().st_size for p in metadata_dir.iterdir()}
            listing = ", ".join(f"{n} {b / 2**20:.1f} MiB" for n, b in sorted(sizes.items()))
            print(f"{name} broker's metadata dir: {listing}")
        figures = interleaved_restarts(clusters, 2, args.restarts, profile_dir, kill=args.kill)
        (fresh_s, fresh_rss), (after_s, after_rss) = figures["fresh"], figures["soaked"]
        print(f"fresh cluster: broker restart {fresh_s:.2f} s (median of {args.restarts}), RSS {fresh_rss:.0f} MiB")
        print(f"after {written} records: broker restart {after_s:.2f} s (median of {args.restarts}), "
              f"RSS {after_rss:.0f} MiB")  # fmt: skip
        print(f"ratio vs fresh: restart {after_s / fresh_s:.2f}x, RSS {after_rss / fresh_rss:.2f}x (target <= 1.2x)")
        if profile_dir is not None:
            for name in clusters:
                startup_breakdown((profile_dir / f"{name}.txt").read_text(), f"{name} broker's start-up")
        if args.timeline:
            for name, c in clusters.items():
                print(f"\n  {name} broker's last start-up (its log):")
                lines = c.nodes[2].output().splitlines()
                marks = ("raft: node 2 starts", "loaded snapshot")
                first = max(i for i, line in enumerate(lines) if any(m in line for m in marks))
                for line in lines[max(0, first - 3) :]:
                    if "state.change.logger" not in line and "broker.replication.partition" not in line:
                        print("   ", line[:160])


# Start-up phases (py-spy frame prefixes) and what they are.
PHASES = (
    ("<module> (broker/server.py", "importing the broker"),
    ("LogManager.startup (", "opening the partition logs"),
    ("load_newest_valid (", "loading the newest snapshot"),
    ("MetadataLog.open (", "scanning the metadata log"),
    ("QuorumController._load_snapshot (", "snapshot -> state, first image"),
    ("RaftDriver._deliver_committed (", "tail replay (apply + publish)"),
    ("apply_payloads (", "  applying the tail's entries"),
    ("QuorumController._publish (", "  publishing images to listeners"),
    ("freeze_start_up_heap (", "gc.freeze of the start-up heap"),
)


def startup_breakdown(raw: str, title: str) -> None:
    """Share of the samples whose stack holds each phase's frame (inclusive time)."""
    total = 0
    hits = dict.fromkeys((marker for marker, _ in PHASES), 0)
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        total += int(count_text)
        for marker in hits:
            if marker in stack:
                hits[marker] += int(count_text)
    print(f"\n  py-spy, {title}: {total} samples (inclusive share)")
    for marker, label in PHASES:
        print(f"    {100 * hits[marker] / max(total, 1):5.1f}%  {label}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--cluster", action="store_true", help="measure a real broker's restart")
    parser.add_argument("--keys", type=int, default=len(SOAK_KEYS), help="with --cluster: ConfigRecords per entry")
    parser.add_argument("--in-flight", type=int, default=8, help="with --cluster: request rounds in flight")
    parser.add_argument("--timeline", action="store_true", help="with --cluster: print the last start-up's log")
    parser.add_argument("--restarts", type=int, default=5, help="with --cluster: restarts per broker")
    parser.add_argument("--profile", default="", help="with --cluster: py-spy the last restarts into this dir")
    parser.add_argument("--no-snapshots", action="store_true", help="with --cluster: snapshot triggers off")
    parser.add_argument(
        "--kill", action="store_true",
        help="with --cluster: restart after SIGKILL (a crash: no snapshot at shutdown) instead of a clean stop",
    )  # fmt: skip
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
    state = apply_payloads(ClusterState(), enumerate(payloads))
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
