"""RemoteStorageManager (KIP-405) and the built-in filesystem tier.

KIP-405 section "RemoteStorageManager": the broker hands a rolled segment and its side files
to ``copy_log_segment_data``, reads ranges back with ``fetch_log_segment`` and side files with
``fetch_index``, and removes a copy with ``delete_log_segment_data``. Implementations are
chosen by ``remote.log.storage.manager.class.name`` and configured with the keys under
``remote.log.storage.manager.impl.prefix`` (default ``rsm.config.``), prefix stripped.

:class:`FileSystemRemoteStorageManager` keeps the tier in a directory (``rsm.config.dir``) that
may be shared by every broker (NFS, a cloud file share). Layout (as Kafka's test
``LocalTieredStorage``)::

    <dir>/<topic>-<partition>-<topicId>/<startOffset:020d>-<segmentUuid>.log
                                                           .index .timeindex .txnindex
                                                           .snapshot .leader_epoch_checkpoint

Topic and segment ids are written in Kafka's URL-safe base64 without padding. Every file name
carries the segment uuid, so two brokers never write the same name; a copy is written to a
temporary ``*.tmp`` name, fsynced, and renamed (the ``.log`` last, so a ``.log`` present means
the copy is whole); the directory is fsynced after the renames. Readers (brokers, the Spark
direct reader) only open a segment whose metadata is COPY_SEGMENT_FINISHED. Errors surface as
:class:`RemoteStorageException` / :class:`RemoteResourceNotFoundException` (Kafka's names).
"""

from __future__ import annotations

import base64
import contextlib
import enum
import importlib
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from broker.log.files import fsync_dir
from broker.log.remote.metadata import RemoteLogSegmentMetadata, TopicIdPartition

RSM_IMPL_PREFIX_DEFAULT = "rsm.config."
FILESYSTEM_RSM_CLASS = "broker.log.remote.storage.FileSystemRemoteStorageManager"
_COPY_CHUNK = 1 << 20


class RemoteStorageException(Exception):
    """Kafka's ``RemoteStorageException``: the tier failed an operation."""


class RemoteResourceNotFoundException(RemoteStorageException):
    """Kafka's ``RemoteResourceNotFoundException``: the segment or index is not in the tier."""


class IndexType(enum.Enum):
    """Kafka's ``RemoteStorageManager.IndexType`` with the suffix the tier stores it under."""

    OFFSET = ".index"
    TIMESTAMP = ".timeindex"
    PRODUCER_SNAPSHOT = ".snapshot"
    TRANSACTION = ".txnindex"
    LEADER_EPOCH = ".leader_epoch_checkpoint"


@dataclass(frozen=True)
class LogSegmentData:
    """Kafka's ``LogSegmentData``: the local files of one rolled segment. ``transaction_index``
    is ``None`` when the segment has none; ``leader_epoch_index`` is the checkpoint content
    (epoch -> start offset entries up to the segment's end) as bytes."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path
    leader_epoch_index: bytes


class RemoteStorageManager(Protocol):
    """The plug-in contract (Kafka's ``org.apache.kafka.server.log.remote.storage.
    RemoteStorageManager``). Calls block; the broker makes them from its remote-log executor,
    never from the event loop. Every method may raise :class:`RemoteStorageException`."""

    def configure(self, configs: Mapping[str, str]) -> None: ...

    def copy_log_segment_data(self, md: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        """Store the segment and its side files under ``md.segment_id``; idempotent for a
        retried copy of the same id."""

    def fetch_log_segment(
        self, md: RemoteLogSegmentMetadata, start_position: int, end_position: int | None = None
    ) -> BinaryIO:
        """A stream of the segment's bytes from ``start_position`` to ``end_position``
        inclusive (to the end when ``None``)."""
        ...

    def fetch_index(self, md: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        """A stream of one side file; :class:`RemoteResourceNotFoundException` when absent
        (a segment without a transaction index)."""
        ...

    def delete_log_segment_data(self, md: RemoteLogSegmentMetadata) -> None:
        """Remove every file of the segment; succeeds when they are already gone."""

    def close(self) -> None: ...


def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def partition_dir_name(tip: TopicIdPartition) -> str:
    """``<topic>-<partition>-<topicId>``, the tier's directory of one partition."""
    return f"{tip.topic}-{tip.partition}-{kafka_uuid_str(tip.topic_id)}"


def segment_file_prefix(md: RemoteLogSegmentMetadata) -> str:
    """``<startOffset:020d>-<segmentUuid>``, the stem of every file of one remote segment."""
    return f"{md.start_offset:020d}-{kafka_uuid_str(md.segment_id.id)}"


class _RangeReader:
    """A read-only stream over ``[start, end]`` of a file (what ``fetch_log_segment`` returns)."""

    def __init__(self, f: BinaryIO, remaining: int) -> None:
        self._f = f
        self._remaining = remaining

    def read(self, n: int = -1) -> bytes:
        if self._remaining <= 0:
            return b""
        size = self._remaining if n < 0 else min(n, self._remaining)
        data = self._f.read(size)
        self._remaining -= len(data)
        return data

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> _RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileSystemRemoteStorageManager:
    """The built-in tier: a directory, local or shared (see the module docstring for layout and
    crash safety). Config: ``dir`` (required; ``rsm.config.dir`` on the broker). Safe to share
    between brokers: each writes only file names carrying its own segment uuids."""

    def __init__(self) -> None:
        self._root: Path | None = None

    def configure(self, configs: Mapping[str, str]) -> None:
        d = configs.get("dir")
        if not d:
            raise RemoteStorageException("rsm.config.dir must name the tier's directory")
        self._root = Path(d)
        self._root.mkdir(parents=True, exist_ok=True)

    @property
    def root(self) -> Path:
        if self._root is None:
            raise RemoteStorageException("FileSystemRemoteStorageManager is not configured")
        return self._root

    def segment_path(self, md: RemoteLogSegmentMetadata, suffix: str = ".log") -> Path:
        """Where a file of ``md`` lives in the tier (readers such as Spark use this too)."""
        tip = md.segment_id.topic_id_partition
        return self.root / partition_dir_name(tip) / (segment_file_prefix(md) + suffix)

    def copy_log_segment_data(self, md: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        pdir = self.root / partition_dir_name(md.segment_id.topic_id_partition)
        try:
            pdir.mkdir(parents=True, exist_ok=True)
            files: list[tuple[str, Path | bytes]] = [
                (IndexType.OFFSET.value, data.offset_index),
                (IndexType.TIMESTAMP.value, data.time_index),
                (IndexType.PRODUCER_SNAPSHOT.value, data.producer_snapshot_index),
                (IndexType.LEADER_EPOCH.value, data.leader_epoch_index),
            ]
            if data.transaction_index is not None:
                files.append((IndexType.TRANSACTION.value, data.transaction_index))
            files.append((".log", data.log_segment))  # last: a .log present means whole
            for suffix, src in files:
                self._write_file(self.segment_path(md, suffix), src)
            fsync_dir(pdir)
        except OSError as e:
            raise RemoteStorageException(f"copy of {segment_file_prefix(md)} failed: {e}") from e

    @staticmethod
    def _write_file(dst: Path, src: Path | bytes) -> None:
        tmp = dst.with_name(dst.name + ".tmp")
        with open(tmp, "wb") as out:
            if isinstance(src, bytes):
                out.write(src)
            else:
                with open(src, "rb") as inp:
                    shutil.copyfileobj(inp, out, _COPY_CHUNK)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dst)

    def fetch_log_segment(
        self, md: RemoteLogSegmentMetadata, start_position: int, end_position: int | None = None
    ) -> BinaryIO:
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise RemoteStorageException(f"bad range [{start_position}, {end_position}]")
        path = self.segment_path(md)
        try:
            f = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundException(str(path)) from e
        except OSError as e:
            raise RemoteStorageException(str(e)) from e
        f.seek(start_position)
        size = os.fstat(f.fileno()).st_size
        last = size - 1 if end_position is None else min(end_position, size - 1)
        return _RangeReader(f, last - start_position + 1)  # type: ignore[return-value]

    def fetch_index(self, md: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        path = self.segment_path(md, index_type.value)
        try:
            return open(path, "rb")
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundException(str(path)) from e
        except OSError as e:
            raise RemoteStorageException(str(e)) from e

    def delete_log_segment_data(self, md: RemoteLogSegmentMetadata) -> None:
        pdir = self.root / partition_dir_name(md.segment_id.topic_id_partition)
        # the .log first: once it is gone no reader treats the segment as whole
        suffixes = [".log"] + [t.value for t in IndexType]
        try:
            for suffix in suffixes:
                for p in (self.segment_path(md, suffix), self.segment_path(md, suffix + ".tmp")):
                    with contextlib.suppress(FileNotFoundError):
                        p.unlink()
            if pdir.exists():
                fsync_dir(pdir)
        except OSError as e:
            raise RemoteStorageException(f"delete of {segment_file_prefix(md)} failed: {e}") from e

    def close(self) -> None:
        """Nothing to release: no file stays open between calls."""


def load_remote_storage_manager(
    class_name: str, props: Mapping[str, str], prefix: str = RSM_IMPL_PREFIX_DEFAULT
) -> RemoteStorageManager:
    """Instantiate ``remote.log.storage.manager.class.name`` (a dotted Python path) and
    configure it with the keys of ``props`` under ``prefix``
    (``remote.log.storage.manager.impl.prefix``), prefix stripped, as Kafka's
    ``RemoteLogManager`` does. Raises :class:`RemoteStorageException` for an unknown class."""
    module_name, _, attr = class_name.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise RemoteStorageException(f"cannot load RemoteStorageManager {class_name!r}: {e}") from e
    rsm: RemoteStorageManager = cls()
    rsm.configure({k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)})
    return rsm
