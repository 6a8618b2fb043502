"""Offset checkpoint files of a log dir, in Kafka's text format.

``recovery-point-offset-checkpoint`` (offsets below which each partition's log is fsynced) and
``log-start-offset-checkpoint`` (log start offsets raised by retention or DeleteRecords) look
like this (Kafka ``CheckpointFile``, version 0)::

    0                     version
    2                     number of entries
    my-topic 0 1234       topic, partition, offset (space separated)
    my-topic 1 99

A checkpoint is written to ``<name>.tmp``, fsynced, renamed over the old file, and the
directory fsynced, so a crash leaves either the old or the new file whole.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from broker.log.files import write_atomic

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]


def format_checkpoint(offsets: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode()


def parse_checkpoint(text: str) -> dict[TopicPartition, int]:
    """Parse a checkpoint's text. Raises ValueError naming the problem."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError("missing version or count line")
    if int(lines[0]) != CHECKPOINT_VERSION:
        raise ValueError(f"unsupported checkpoint version {lines[0]!r}")
    count = int(lines[1])
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise ValueError(f"count line says {count} entries, found {len(entries)}")
    result: dict[TopicPartition, int] = {}
    for line in entries:
        fields = line.split(" ")
        if len(fields) != 3:
            raise ValueError(f"malformed line {line!r}")
        result[(fields[0], int(fields[1]))] = int(fields[2])
    return result


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Durably replace the checkpoint at ``path``."""
    write_atomic(path, format_checkpoint(offsets))


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The checkpoint's entries; empty when the file is missing or unreadable (then every
    partition is recovered from its start, which is safe, and a warning is logged)."""
    try:
        return parse_checkpoint(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return {}
