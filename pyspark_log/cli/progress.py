"""Progress bars for long CLI work, drawn with rich on stderr only when stderr is a terminal.

    with progress_bar("Resetting offsets", total=len(plan), unit="partitions") as bar:
        for chunk in bar.chunks(items):        # one chunk (everything) when no bar is drawn
            do(chunk)
            bar.advance(len(chunk))

When stderr is not a terminal (a pipe, a file, a CI log) the bar is a no-op: nothing is written
and ``chunks`` yields everything at once, so scripted runs send the same requests as before.
The bar is transient (erased when the work ends), so the command's own output is unchanged.
``console`` injects a rich ``Console`` (tests use ``Console(force_terminal=True, file=...)``).
rich is imported only when a bar is drawn.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
CHUNK_ITEMS = 100  # items per request while a bar is drawn (so that it moves)


class Bar:
    """A progress bar that draws nothing (stderr is not a terminal)."""

    active = False

    def advance(self, n: float = 1) -> None:
        """Count ``n`` more units done."""

    def chunks(self, items: Sequence[T], size: int = CHUNK_ITEMS) -> Iterator[Sequence[T]]:
        """``items`` in one piece when no bar is drawn, else in pieces of ``size``."""
        if not self.active:
            if items:
                yield items
            return
        for start in range(0, len(items), size):
            yield items[start : start + size]


class _RichBar(Bar):
    active = True

    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, n: float = 1) -> None:
        self._progress.advance(self._task, n)


def stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


@contextlib.contextmanager
def progress_bar(description: str, total: float | None, *, unit: str = "items", console: Any = None) -> Iterator[Bar]:
    """A bar of ``total`` units (``unit`` ``"bytes"`` shows sizes and speed; anything else
    ``done/total unit``); a no-op ``Bar`` when stderr is not a terminal (and no ``console`` is
    given) or ``total`` is unknown or zero."""
    if not total or (console is None and not stderr_is_terminal()):
        yield Bar()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    counts = (DownloadColumn(), TransferSpeedColumn()) if unit == "bytes" else (
        MofNCompleteColumn(), TextColumn(unit))  # fmt: skip
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), *counts, TimeRemainingColumn())
    with Progress(*columns, console=console or Console(stderr=True), transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield _RichBar(progress, task)
