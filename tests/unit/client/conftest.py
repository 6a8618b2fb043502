"""Client unit-test helpers: run a coroutine on a fresh loop with a hard timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest


@pytest.fixture
def run() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    def runner(coro: Coroutine[Any, Any, Any]) -> Any:
        async def bounded() -> Any:
            async with asyncio.timeout(20):
                return await coro

        return asyncio.run(bounded())

    return runner
