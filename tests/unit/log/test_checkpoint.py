"""Offset checkpoint files in Kafka's text format, written atomically."""

from __future__ import annotations

from pathlib import Path

from broker.log.checkpoint import format_checkpoint, parse_checkpoint, read_checkpoint, write_checkpoint


def test_golden_format() -> None:
    text = format_checkpoint({("b", 1): 7, ("a-x", 0): 123})
    assert text == b"0\n2\na-x 0 123\nb 1 7\n"


def test_round_trip_and_atomic_replace(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(path, {("t", 0): 5, ("t", 1): 9})
    write_checkpoint(path, {("t", 0): 6})
    assert read_checkpoint(path) == {("t", 0): 6}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left


def test_empty_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    write_checkpoint(path, {})
    assert path.read_bytes() == b"0\n0\n"
    assert read_checkpoint(path) == {}


def test_missing_or_malformed_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "nope") == {}
    for bad in ["", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n"]:
        (tmp_path / "bad").write_text(bad)
        assert read_checkpoint(tmp_path / "bad") == {}
    assert parse_checkpoint("0\n1\nmy.topic 3 42\n") == {("my.topic", 3): 42}
