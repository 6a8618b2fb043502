"""``meta.properties`` in every log dir: which cluster and node the directory belongs to.

Kafka writes ``version``, ``cluster.id`` and ``node.id`` there when a directory is formatted and
refuses to start when a directory belongs to another cluster or node. pylog formats an empty
directory on first start (Kafka needs ``kafka-storage format`` first; see docs/compatibility.md).
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from broker.properties import load_properties

META_FILE = "meta.properties"


class MetaPropertiesError(RuntimeError):
    """A log dir that belongs to another cluster or node."""


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form: a UUID, base64url without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def ensure_meta_properties(log_dirs: list[str], node_id: int, cluster_id: str) -> str:
    """Check or write ``meta.properties`` in every dir; return the cluster id they agree on.

    ``cluster_id`` may be empty: the id already stored in a dir is used, else a new one is made.
    """
    stored: dict[str, str] = {}
    for d in log_dirs:
        path = Path(d) / META_FILE
        if path.exists():
            props = load_properties(path)
            stored[d] = props.get("cluster.id", "")
            if int(props.get("node.id", node_id)) != node_id:
                raise MetaPropertiesError(
                    f"{path} belongs to node.id {props.get('node.id')}, but this broker is node.id {node_id}"
                )
    known = {cid for cid in stored.values() if cid}
    if cluster_id:
        known.add(cluster_id)
    if len(known) > 1:
        raise MetaPropertiesError(
            f"log dirs belong to different clusters {sorted(known)}: "
            "check log.dirs and cluster.id, or use an empty directory"
        )
    agreed = known.pop() if known else new_cluster_id()
    for d in log_dirs:
        if d in stored:
            continue
        Path(d).mkdir(parents=True, exist_ok=True)
        path = Path(d) / META_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"version=1\ncluster.id={agreed}\nnode.id={node_id}\n", encoding="utf-8")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return agreed
