"""Client unit-test helpers: run a coroutine on a fresh loop with a hard timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from ..native_switch import switched


@pytest.fixture
def run() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    def runner(coro: Coroutine[Any, Any, Any]) -> Any:
        async def bounded() -> Any:
            async with asyncio.timeout(20):
                return await coro

        return asyncio.run(bounded())

    return runner


@pytest.fixture(scope="module", params=["compiled", "python"])
def send_path(request: pytest.FixtureRequest) -> Any:
    """A module's tests once with ``Producer.send``'s compiled common case (``records.speedups``,
    where it was built) and once with the Python one (``PYLOG_NO_SPEEDUPS``'s path). Read when
    a ``Producer`` is made, so it holds for the producers the module's tests make."""
    yield from switched(request.param)
