"""KIP-630 metadata snapshots: start-up by full replay vs by snapshot + tail (in-process).

Builds a metadata log of ``--records`` config changes (Kafka's ConfigRecord, what
kafka-configs --alter writes) over ``--topics`` topics, then measures what a restart costs:

* full replay: decode and apply every entry (what pylog's start does today);
* snapshot: encode the state as a KIP-630 snapshot file, write it (fsync, rename), read it back,
  validate and decode it (what a start from a snapshot does before replaying the tail);

and the peak RSS after each. Prints figures; asserts nothing. Not the real broker's restart
(that needs the snapshot wired into the Raft driver, see docs/compatibility.md).

    .venv/bin/python bench/metadata_snapshots.py --records 1000000
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.controller.image_builder import ClusterState, apply_payload
from broker.controller.records import ConfigRecord, RegisterBrokerRecord, TopicRecord, encode_records
from broker.controller.snapshot import state_from_records, state_to_records
from broker.raft.snapshot import SnapshotId, encode_snapshot
from broker.raft.store import load_newest_valid, write_snapshot


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--topics", type=int, default=50)
    args = parser.parse_args()

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
