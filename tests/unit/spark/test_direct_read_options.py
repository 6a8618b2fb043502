"""The options of direct segment reads (``readPath``, ``logDirs.<brokerId>``) and how a task finds
a partition's directory (``direct_read.locate``: only a log dir whose ``meta.properties`` names
the mapped broker and the cluster is read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyspark_log.client import TopicPartition
from pyspark_log.spark.direct_read import DirectPlan, locate
from pyspark_log.spark.options import PylogOptionError, parse_options

BASE = {"bootstrap.servers": "localhost:9092", "subscribe": "t"}


def test_read_path_defaults_to_the_broker() -> None:
    options = parse_options(BASE, "batch")
    assert options.read_path == "broker"
    assert options.log_dirs == {}


def test_log_dirs_map_broker_ids_to_paths() -> None:
    raw = {**BASE, "readPath": "FILES", "logDirs.1": "/mnt/b1", "logdirs.2": " /mnt/b2 , /mnt/b2b ,"}
    options = parse_options(raw, "batch")
    assert options.read_path == "files"
    assert options.log_dirs == {1: ("/mnt/b1",), 2: ("/mnt/b2", "/mnt/b2b")}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"readPath": "disk"}, r"readPath \('disk'\) is not a read path: use broker, files or auto"),
        ({"readPath": "auto"}, r"readPath \('auto'\) needs logDirs.<brokerId> options"),
        ({"readPath": "files", "logDirs.b1": "/x"}, r"logDirs.b1 \('/x'\) does not name a broker id"),
        ({"readPath": "files", "logDirs.1": " , "}, r"names no directory"),
    ],
)
def test_bad_direct_read_options_name_the_fix(raw: dict[str, str], message: str) -> None:
    with pytest.raises(PylogOptionError, match=message):
        parse_options({**BASE, **raw}, "batch")


def make_log_dir(root: Path, node: int, cluster: str, partitions: list[str]) -> Path:
    root.mkdir(parents=True)
    (root / "meta.properties").write_text(f"#\nversion=1\ncluster.id={cluster}\nnode.id={node}\n")
    for name in partitions:
        (root / name).mkdir()
    return root


def test_locate_reads_only_the_mapped_brokers_dirs(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)
    wrong_node = make_log_dir(tmp_path / "a", 2, "C", ["t-0"])
    wrong_cluster = make_log_dir(tmp_path / "b", 1, "other", ["t-0"])
    empty = make_log_dir(tmp_path / "c", 1, "C", ["t-1"])
    right = make_log_dir(tmp_path / "d", 1, "C", ["t-0"])
    dirs = tuple(str(d) for d in (tmp_path / "missing", wrong_node, wrong_cluster, empty, right))
    assert locate(DirectPlan("auto", ((1, dirs),), "C", 10), tp) == right / "t-0"
    assert locate(DirectPlan("auto", ((1, dirs[:-1]),), "C", 10), tp) is None
    # without a cluster id to check, the node id still has to match
    assert locate(DirectPlan("auto", ((1, dirs[:3]),), None, 10), tp) == wrong_cluster / "t-0"
    # replicas are tried in order: the first with a matching directory wins
    plan = DirectPlan("auto", ((1, (str(empty),)), (2, (str(wrong_node),))), "C", 10)
    assert locate(plan, tp) == wrong_node / "t-0"
