"""``meta.properties`` in every log dir: which cluster and node the directory belongs to.

As Kafka (KRaft mode), a log dir is *formatted* once by the storage tool — ``pylog storage format``
(``broker.storage``), Kafka's ``kafka-storage format`` — which writes ``meta.properties``::

    version=1
    cluster.id=<the cluster id, a base64url UUID>
    node.id=<node.id of the server.properties it was formatted with>
    directory.id=<a random id of this directory (KIP-858)>

and, in each dir, ``bootstrap.checkpoint``: the metadata the first active controller of a new
quorum appends after the cluster id (today the SCRAM credentials of ``--add-scram``). Kafka's
file is a binary metadata snapshot; pylog's is a JSON header line (the format's
``metadata.version`` and options) followed by one metadata record payload in the metadata log's
own encoding (``broker.metadata.records``); see docs/compatibility.md.

A node start checks the dirs as Kafka's ``MetaPropertiesEnsemble`` does (``check_formatted``):
every dir must be formatted, with this node's ``node.id`` and one cluster id; otherwise the start
is refused with Kafka's message and the command to run. ``ensure_meta_properties`` is the old
convenience (format an empty dir on first start), kept for the embedded starters' in-process
callers and tests; the broker process itself never formats.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.metadata.records import MetadataRecord, decode_records, encode_records
from broker.properties import load_properties

META_FILE = "meta.properties"
BOOTSTRAP_FILE = "bootstrap.checkpoint"
FORMAT_HINT = (
    "pylog storage format --config <server.properties> --cluster-id $(pylog storage random-uuid)` "
    "(with this node's --config, --data-dir and --override flags"
)


class MetaPropertiesError(RuntimeError):
    """A log dir that is not formatted, or belongs to another cluster or node."""


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form: a UUID, base64url without padding (22 characters).

    Kafka's ``Uuid.randomUuid`` never returns an id whose base64 form starts with ``-`` (it would
    read as a command-line flag); neither does this."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class MetaProperties:
    """One dir's ``meta.properties`` (Kafka's ``MetaProperties``, version 1: KRaft)."""

    cluster_id: str
    node_id: int
    directory_id: str = ""
    version: int = 1

    def text(self) -> str:
        lines = [f"version={self.version}", f"cluster.id={self.cluster_id}", f"node.id={self.node_id}"]
        if self.directory_id:
            lines.append(f"directory.id={self.directory_id}")
        return "\n".join(lines) + "\n"

    def describe(self) -> str:
        """As ``kafka-storage info`` prints it: ``{cluster.id=…, directory.id=…, node.id=…, version=1}``."""
        fields = {"cluster.id": self.cluster_id, "node.id": str(self.node_id), "version": str(self.version)}
        if self.directory_id:
            fields["directory.id"] = self.directory_id
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(fields.items())) + "}"


def read_meta(directory: str | Path) -> MetaProperties | None:
    """The dir's ``meta.properties``, None when it has none; MetaPropertiesError when unreadable."""
    path = Path(directory) / META_FILE
    if not path.exists():
        return None
    try:
        props = load_properties(path)
        return MetaProperties(
            props.get("cluster.id", ""), int(props["node.id"]), props.get("directory.id", ""),
            int(props.get("version", "1")),
        )  # fmt: skip
    except (OSError, KeyError, ValueError) as exc:
        raise MetaPropertiesError(f"{path} is not readable: {exc!r}") from None


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a fsynced temporary file and a rename, then fsync the dir."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_meta(directory: str | Path, meta: MetaProperties) -> None:
    Path(directory).mkdir(parents=True, exist_ok=True)
    _write_atomically(Path(directory) / META_FILE, meta.text().encode("utf-8"))


@dataclass(frozen=True)
class Bootstrap:
    """What ``format`` hands the first active controller: the chosen ``metadata.version`` and the
    records to append once, after the cluster id (``--add-scram`` credentials)."""

    metadata_version: str
    records: tuple[MetadataRecord, ...] = ()

    def encode(self) -> bytes:
        header = json.dumps({"format": 1, "metadata.version": self.metadata_version}, sort_keys=True)
        return header.encode("utf-8") + b"\n" + encode_records(self.records)


def write_bootstrap(directory: str | Path, bootstrap: Bootstrap) -> None:
    _write_atomically(Path(directory) / BOOTSTRAP_FILE, bootstrap.encode())


def read_bootstrap(directory: str | Path) -> Bootstrap | None:
    """The dir's ``bootstrap.checkpoint`` (None when absent); MetaPropertiesError when corrupt."""
    path = Path(directory) / BOOTSTRAP_FILE
    if not path.exists():
        return None
    try:
        header, _, payload = path.read_bytes().partition(b"\n")
        doc = json.loads(header)
        return Bootstrap(str(doc["metadata.version"]), tuple(decode_records(payload)))
    except (OSError, ValueError, KeyError) as exc:
        raise MetaPropertiesError(f"{path} is not a pylog bootstrap checkpoint: {exc}") from None


def bootstrap_records(log_dirs: Sequence[str]) -> tuple[MetadataRecord, ...]:
    """The records of the metadata dir's (the first log dir's) bootstrap checkpoint, if any."""
    bootstrap = read_bootstrap(log_dirs[0]) if log_dirs else None
    return bootstrap.records if bootstrap is not None else ()


def check_formatted(log_dirs: Sequence[str], node_id: int, cluster_id: str = "") -> str:
    """Kafka's start-up check of the log dirs; returns their cluster id.

    Refused (MetaPropertiesError, Kafka's messages plus pylog's command to run): no dir formatted;
    a dir without ``meta.properties``; a dir of another node id; dirs of different clusters; a
    ``cluster.id`` setting (pylog's key) that differs from the dirs'."""
    metas = {d: read_meta(d) for d in log_dirs}
    if not any(metas.values()):
        raise MetaPropertiesError(
            f"No readable meta.properties files found in {', '.join(log_dirs)}: "
            f"format the log directories first with `{FORMAT_HINT}; the same cluster id on every node)"
        )
    agreed = ""
    for d, meta in metas.items():
        path = Path(d) / META_FILE
        if meta is None:
            raise MetaPropertiesError(
                f"No `meta.properties` found in {d} (have you run `pylog storage format` to format the "
                "directory? with --ignore-formatted it formats only the directories that need it)"
            )
        if meta.node_id != node_id:
            raise MetaPropertiesError(
                f"Stored node id {meta.node_id} doesn't match previous node id {node_id} in {path}. If you moved "
                "your data, make sure your configured node id matches. If you intend to create a new node, you "
                "should remove all data in your data directories."
            )
        if agreed and meta.cluster_id != agreed:
            raise MetaPropertiesError(f"Invalid cluster.id in: {path}. Expected {agreed}, but read {meta.cluster_id}")
        agreed = agreed or meta.cluster_id
    if cluster_id and cluster_id != agreed:
        raise MetaPropertiesError(
            f"cluster.id={cluster_id} is configured, but the log directories were formatted for cluster {agreed} "
            "(remove the cluster.id setting, or format empty directories with that id)"
        )
    return agreed


def ensure_meta_properties(log_dirs: list[str], node_id: int, cluster_id: str) -> str:
    """Check or write ``meta.properties`` in every dir; return the cluster id they agree on.

    ``cluster_id`` may be empty: the id already stored in a dir is used, else a new one is made.
    The broker does not call this (it refuses unformatted dirs: ``check_formatted``)."""
    stored = {d: meta for d in log_dirs if (meta := read_meta(d)) is not None}
    for d, meta in stored.items():
        if meta.node_id != node_id:
            raise MetaPropertiesError(
                f"{Path(d) / META_FILE} belongs to node.id {meta.node_id}, but this broker is node.id {node_id}"
            )
    known = {meta.cluster_id for meta in stored.values() if meta.cluster_id}
    if cluster_id:
        known.add(cluster_id)
    if len(known) > 1:
        raise MetaPropertiesError(
            f"log dirs belong to different clusters {sorted(known)}: "
            "check log.dirs and cluster.id, or use an empty directory"
        )
    agreed = known.pop() if known else new_cluster_id()
    for d in log_dirs:
        if d not in stored:
            write_meta(d, MetaProperties(agreed, node_id, new_cluster_id()))
    return agreed
