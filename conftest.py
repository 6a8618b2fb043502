"""Tier markers by folder: tests/unit -> unit, tests/sim -> sim, tests/integration -> integration,
tests/differential -> differential, tests/chaos -> chaos,
spark_tests -> spark. `pytest -m unit` (etc.) selects a tier;
`--strict-markers` is on."""

from __future__ import annotations

from pathlib import Path

import pytest

_ROOT = Path(__file__).parent
_TIERS = {
    _ROOT / "tests" / "unit": "unit",
    _ROOT / "tests" / "sim": "sim",
    _ROOT / "tests" / "integration": "integration",
    _ROOT / "tests" / "differential": "differential",
    _ROOT / "tests" / "chaos": "chaos",
    _ROOT / "spark_tests": "spark",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for folder, marker in _TIERS.items():
            if folder in item.path.parents:
                item.add_marker(getattr(pytest.mark, marker))
                break
