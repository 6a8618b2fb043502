"""``pyspark_log.cli.progress``: a rich bar on a terminal (a ``Console(force_terminal=True)``
injected), nothing at all otherwise; ``chunks`` splits work only while a bar is drawn."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pyspark_log.cli.progress import Bar, progress_bar


def test_no_bar_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar("Deleting records", 500, unit="partitions") as bar:  # pytest's stderr: no tty
        assert not bar.active
        assert list(bar.chunks(list(range(500)))) == [list(range(500))]  # one request, as before
        bar.advance(500)
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out == ""


def test_no_bar_for_unknown_totals() -> None:
    sink = io.StringIO()
    with progress_bar("x", None, console=Console(file=sink, force_terminal=True)) as bar:
        assert not bar.active
    assert sink.getvalue() == ""


def test_bar_drawn_on_a_terminal_and_work_chunked() -> None:
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, width=100)
    with progress_bar("Resetting offsets of g", 250, unit="partitions", console=console) as bar:
        assert bar.active
        chunks = list(bar.chunks(list(range(250))))
        assert [len(c) for c in chunks] == [100, 100, 50]
        for chunk in chunks:
            bar.advance(len(chunk))
    drawn = sink.getvalue()
    assert "Resetting offsets of g" in drawn
    assert "250/250" in drawn
    assert "partitions" in drawn
    assert "\x1b[" in drawn  # terminal control sequences: the bar is redrawn, then erased


def test_byte_bars_show_sizes() -> None:
    sink = io.StringIO()
    with progress_bar("topic-a", 4096, unit="bytes", console=Console(file=sink, force_terminal=True)) as bar:
        bar.advance(4096)
    assert "4.1/4.1 kB" in sink.getvalue()


def test_the_no_op_bar_yields_nothing_for_no_items() -> None:
    assert list(Bar().chunks([])) == []
