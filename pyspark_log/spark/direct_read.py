"""Direct segment reads (``readPath=auto|files``): Spark tasks read a partition's segment files
off a shared disk instead of fetching them through the broker.

The broker stays the authority on what may be read. The driver asks it, as for any batch read,
for the offsets (log start, high watermark or last stable offset, the planned ends) and, here,
for each partition's leader and in-sync replicas (Metadata); ``plan_direct`` turns that into a
``DirectPlan`` per partition that travels with the task. The task (``read_direct``) then:

1. finds the partition directory ``<log dir>/<topic>-<partition>`` under the paths the
   ``logDirs.<brokerId>`` option maps the brokers' ``log.dirs`` to, leader first, then (for
   read_uncommitted only) the other in-sync replicas; a directory counts only when its log dir's
   ``meta.properties`` names that broker (``node.id``) and the cluster the driver saw
   (``cluster.id``), so a wrong mapping is never read;
2. reads whole batches of ``[start, min(end, bound))`` with ``segment_reader.PartitionFiles``,
   where ``bound`` is the high watermark (read_uncommitted) or last stable offset
   (read_committed) the broker reported when the read was planned: nothing uncommitted, and no
   replica's bytes above the high watermark, is ever decoded;
3. decodes each chunk with ``decode.decode_chunk``, the fetch path's decoder, giving it the
   aborted transactions from the ``.txnindex`` files exactly as a Fetch response lists them
   (read_committed: aborted data and control batches dropped the same way);
4. falls back to the broker path (``decode.read_range``) for what the files cannot serve: the
   whole range when no mapped directory is visible (``auto``; ``files`` raises
   ``DirectReadError`` instead), or the rest of the range from the offset reached when a
   segment vanished before it was opened (retention, the cleaner's swap) or the files end early
   (a lagging replica, a shared filesystem's stale attributes), and (``auto`` only) after any
   other I/O error on the files. A file already open stays
   readable when it is renamed or deleted.

Nothing here locks or writes: files are opened read-only. Importing this module does not import
pyspark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pyspark_log.spark.access import (
    AbortedTransaction,
    BrokerAccess,
    FetchedChunk,
    TopicPartition,
)
from pyspark_log.spark.decode import decode_chunk, read_through_broker
from pyspark_log.spark.planning import OffsetRange
from pyspark_log.spark.segment_reader import FilesUnavailable, PartitionFiles, read_meta_properties
from pyspark_log.spark.specs import PylogOptionError, SourceOptions

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

Placement = tuple[str | None, dict[TopicPartition, tuple[int, tuple[int, ...]]]]


class DirectReadError(RuntimeError):
    """``readPath=files`` and a partition's files cannot be read where the task runs."""


class PlacementSource(Protocol):
    """What ``plan_direct`` needs beyond ``BrokerAccess``: ``ClientAccess.replica_placement``."""

    def replica_placement(self, tps: Collection[TopicPartition]) -> Placement: ...


@dataclass(frozen=True, slots=True)
class DirectPlan:
    """How a task reads one partition from files (picklable; it travels in the InputPartition).

    ``replicas``: ``(broker id, log dirs as the executors see them)``, leader first, only
    brokers whose files may be read; ``cluster_id``: what their ``meta.properties`` must say
    (None: not checked); ``bound``: the committed end the broker reported (HW, or LSO for
    read_committed) — files are never read at or past it."""

    mode: Literal["auto", "files"]
    replicas: tuple[tuple[int, tuple[str, ...]], ...]
    cluster_id: str | None
    bound: int


def plan_direct(
    options: SourceOptions, access: BrokerAccess, latest: Mapping[TopicPartition, int]
) -> dict[TopicPartition, DirectPlan]:
    """A ``DirectPlan`` per partition of ``latest`` (the offsets the broker reported for the
    query's isolation level), or {} for ``readPath=broker``. Raises ``PylogOptionError`` for
    ``readPath=files`` when a partition's leader has no ``logDirs`` mapping."""
    if options.read_path == "broker" or not latest:
        return {}
    placement_of = getattr(access, "replica_placement", None)
    cluster_id: str | None = None
    placement: dict[TopicPartition, tuple[int, tuple[int, ...]]] = {}
    if placement_of is not None:
        cluster_id, placement = placement_of(list(latest))
    read_committed = options.isolation_level == "read_committed"
    plans: dict[TopicPartition, DirectPlan] = {}
    for tp, bound in sorted(latest.items()):
        leader, isr = placement.get(tp, (-1, ()))
        # Followers' txnindex files may miss a marker they have not fetched yet: read_committed
        # reads the leader's files only.
        order = [leader] if read_committed else [leader, *sorted(b for b in isr if b != leader)]
        replicas = tuple((b, options.log_dirs[b]) for b in order if b >= 0 and b in options.log_dirs)
        if not replicas and options.read_path == "files":
            raise PylogOptionError(
                f"readPath=files, but {tp} is led by broker {leader}, which has no logDirs.{leader} option: "
                f"set logDirs.{leader} to the path where executors see that broker's log.dirs, or use readPath=auto"
            )
        mode: Literal["auto", "files"] = "files" if options.read_path == "files" else "auto"
        plans[tp] = DirectPlan(mode, replicas, cluster_id, bound)
    return plans


def locate(plan: DirectPlan, tp: TopicPartition) -> Path | None:
    """The first visible partition directory of ``plan``'s replicas whose log dir's
    ``meta.properties`` names that broker and cluster; None if there is none."""
    for broker_id, dirs in plan.replicas:
        for log_dir in dirs:
            root = Path(log_dir)
            candidate = root / f"{tp.topic}-{tp.partition}"
            try:
                if not candidate.is_dir():
                    continue
            except OSError:  # not searchable by this user: not visible
                continue
            meta = read_meta_properties(root)
            if meta is None or meta.get("node.id") != str(broker_id):
                log.warning(
                    "pylog direct read: %s is not broker %d's log dir (meta.properties says node.id %s): skipped",
                    root,
                    broker_id,
                    None if meta is None else meta.get("node.id"),
                )
                continue
            if plan.cluster_id is not None and meta.get("cluster.id") != plan.cluster_id:
                log.warning(
                    "pylog direct read: %s belongs to cluster %s, not %s: skipped",
                    root,
                    meta.get("cluster.id"),
                    plan.cluster_id,
                )
                continue
            return candidate
    return None


def read_direct(
    options: SourceOptions,
    factory: Callable[[SourceOptions], BrokerAccess],
    r: OffsetRange,
    plan: DirectPlan,
) -> Iterator[pa.RecordBatch]:
    """The records of ``r`` as RecordBatches, from files where they serve (module docstring)."""
    read_committed = options.isolation_level == "read_committed"
    end = min(r.end, plan.bound)
    position = r.start
    directory = locate(plan, r.tp)
    if directory is None:
        if plan.mode == "files":
            where = ", ".join(f"logDirs.{b}={','.join(dirs)}" for b, dirs in plan.replicas) or "no logDirs"
            raise DirectReadError(
                f"readPath=files: the files of {r.tp} are not visible on this executor under {where}: "
                "mount the brokers' log dirs there (docs/operations.md, Direct segment reads) or use readPath=auto"
            )
        log.info("pylog direct read: %s has no visible files here; reading it through the broker", r.tp)
    elif position < end:
        files = PartitionFiles(directory, chunk_bytes=options.max_partition_fetch_bytes)
        try:
            for chunk in files.read(position, end, read_committed=read_committed):
                fetched = FetchedChunk(
                    chunk.records,
                    tuple(AbortedTransaction(pid, first) for pid, first in chunk.aborted or ()),
                    chunk.position,
                    plan.bound,
                    plan.bound,
                    -1,
                )
                batch = decode_chunk(
                    fetched,
                    OffsetRange(r.tp, chunk.position, end),  # leading batches below it are skipped
                    read_committed=read_committed,
                    include_headers=options.include_headers,
                )
                if batch is not None:
                    yield batch
                position = max(position, chunk.next_offset)
            position = end
        except FilesUnavailable as exc:
            log.warning("pylog direct read: %s from offset %d through the broker: %s", r.tp, exc.offset, exc.reason)
            position = max(position, exc.offset)
        except OSError as exc:  # e.g. a permission or NFS error on a file
            if plan.mode == "files":
                raise DirectReadError(
                    f"readPath=files: reading the files of {r.tp} in {directory} failed: {exc}"
                ) from exc
            log.warning("pylog direct read: %s from offset %d through the broker: %s", r.tp, position, exc)
    if position >= r.end:
        return
    yield from read_through_broker(factory, options, OffsetRange(r.tp, position, r.end))
