"""Smoke check of ``bench/vs_kafka.py`` (issue #26): ``--quick --only produce`` on one node of
each broker runs end to end and prints its markdown table with a figure for pylog and for Apache
Kafka in every row, and removes its temp dirs. The figures themselves are never asserted: a
benchmark prints what the machine gave (docs/architecture.md, ``bench/``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.apache_kafka import KafkaUnavailable, kafka_libs

REPO = Path(__file__).resolve().parents[2]
FIGURE = re.compile(r"[\d,]+ rec/s")


def test_vs_kafka_quick_produce_prints_both_brokers(tmp_path: Path) -> None:
    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    # one node of each (3 nodes would add two cluster start-ups); small runs: only the plumbing counts
    command = [
        sys.executable, str(REPO / "bench" / "vs_kafka.py"), "--quick", "--only", "produce", "--nodes", "1",
        "--records-100b", "5000", "--records-1k", "2000",
    ]  # fmt: skip
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the benchmark's temp dirs land here
    done = subprocess.run(command, capture_output=True, text=True, timeout=280, cwd=REPO, env=env, check=False)
    output = f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert done.returncode == 0, output
    assert "| metric | pylog | Kafka | ratio pylog/Kafka | target |" in done.stdout, output
    assert "\nerrors:" not in done.stdout, output
    rows = [line for line in done.stdout.splitlines() if line.startswith("| produce ")]
    clients = {"confluent-kafka", "kafka-producer-perf-test"}
    assert {row.split("|")[1].strip().rsplit(", ", 1)[1] for row in rows} == clients, output
    assert len(rows) == 4, output  # 100 B and 1 KiB, by both clients
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        assert FIGURE.fullmatch(cells[1]), row  # pylog's figure
        assert FIGURE.fullmatch(cells[2]), row  # Kafka's figure
        assert cells[3].endswith("×"), row
        assert cells[4].startswith(">= 0.7×"), row
    assert not list(tmp_path.glob("bench-vs-kafka-*")), "the benchmark left its temp dirs behind"
