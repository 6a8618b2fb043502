"""The pure modules of the source must not import pyspark (docs/architecture.md: importing pyspark_log never does)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pyspark_log.spark
from tests.unit.source_parsing import parse as parse_source

SPARK_DIR = Path(pyspark_log.spark.__file__).parent
PURE = ["access", "specs", "options", "offsets", "planning", "decode"]


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(parse_source(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_do_not_import_pyspark(module: str) -> None:
    imports = imported_modules(SPARK_DIR / f"{module}.py")
    assert not [m for m in imports if m == "pyspark" or m.startswith("pyspark.")]
    assert not [m for m in imports if m.startswith(("pyspark_log.spark.reader", "pyspark_log.spark.source"))]


def test_package_root_imports_spark_lazily() -> None:
    root = Path(pyspark_log.spark.__file__).parent.parent / "__init__.py"
    tree = parse_source(root.read_text())
    top_level = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all("spark" not in (getattr(n, "module", "") or "") for n in top_level)
