"""A broker's partition as it lies on disk, read by the tests of every tier: its segment files and
its record batches decoded with pylog's own record codec (what a client really sent: codec,
timestamps, producer ids, markers)."""

from __future__ import annotations

from pathlib import Path

from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.records.batch import decode_records
from pyspark_log.records.header import BatchHeader, iter_batch_headers
from pyspark_log.records.record import Record


def disk_batches(broker: EmbeddedBroker, topic: str, partition: int = 0) -> list[tuple[BatchHeader, list[Record]]]:
    """Every batch in the partition's segment files, decoded with pylog's own record codec."""
    directory = broker.data_dir / "logs" / f"{topic}-{partition}"
    segments = sorted(directory.glob("*.log"))
    assert segments, f"no segment files in {directory}"
    out = []
    for path in segments:
        buf = path.read_bytes()
        for pos, _ in iter_batch_headers(buf):
            out.append(decode_records(buf, pos))
    return out


def segment_files(broker: EmbeddedBroker, topic: str, partition: int = 0) -> list[Path]:
    return sorted((broker.data_dir / "logs" / f"{topic}-{partition}").glob("*.log"))
