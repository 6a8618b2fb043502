"""Run tests with the compiled speedups (``pyspark_log.records.speedups.native``) or without."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyspark_log.records import speedups


def switched(kind: str) -> Iterator[str]:
    """A fixture body: ``speedups.native`` as it is for ``"compiled"`` (the test is skipped where
    the extension was not built), None for any other kind; restored afterwards."""
    saved = speedups.native
    if kind != "compiled":
        speedups.native = None
    elif saved is None:
        pytest.skip("the compiled speedups were not built here")
    try:
        yield kind
    finally:
        speedups.native = saved
