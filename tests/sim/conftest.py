"""Seeds for the simulation tier.

``pytest tests/sim --seeds N`` runs N seeds of every scenario (default: each scenario's CI count);
``--seed S`` runs only seed S (to reproduce a failure: the failure message starts with ``seed=S``);
``--first-seed K`` shifts the range. Seeds are grouped in blocks, one test item per block.
The options are registered here, so pass them together with a path under ``tests/sim``.
"""

from __future__ import annotations

import pytest

_BLOCKS_PER_SCENARIO = 4


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sim", "deterministic simulation")
    group.addoption("--seeds", type=int, default=None, help="seeds per simulation scenario")
    group.addoption("--seed", type=int, default=None, help="run only this simulation seed")
    group.addoption("--first-seed", type=int, default=0, help="first simulation seed")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "seeds" not in metafunc.fixturenames:
        return
    config = metafunc.config
    only = config.getoption("seed", default=None)
    if only is not None:
        metafunc.parametrize("seeds", [[only]], ids=[f"seed={only}"])
        return
    count = config.getoption("seeds", default=None)
    if count is None:
        count = getattr(metafunc.function, "ci_seeds", 20)
    first = config.getoption("first_seed", default=0) or 0
    block = max(1, min(100, -(-count // _BLOCKS_PER_SCENARIO)))
    blocks = [list(range(start, min(start + block, first + count))) for start in range(first, first + count, block)]
    metafunc.parametrize("seeds", blocks, ids=[f"seeds={b[0]}-{b[-1]}" for b in blocks])
