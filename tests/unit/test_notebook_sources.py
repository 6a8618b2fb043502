"""The notebooks' Databricks source files (``notebooks/databricks/*.py``) are what
``notebooks/to_databricks.py`` makes of the ``.ipynb`` files: in sync, one ``# COMMAND ----------``
between cells, markdown as ``# MAGIC %md``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def converter():
    spec = importlib.util.spec_from_file_location("to_databricks", NOTEBOOKS / "to_databricks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_databricks_sources_are_in_sync_with_the_notebooks() -> None:
    assert converter().main(["--check"]) == 0, "run: python notebooks/to_databricks.py"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_databricks_source_shape(path: Path) -> None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    source = (NOTEBOOKS / "databricks" / f"{path.stem}.py").read_text(encoding="utf-8")
    assert source.startswith("# Databricks notebook source\n# MAGIC %md\n")
    cells = [c for c in notebook["cells"] if c["cell_type"] == "markdown" or "".join(c["source"]).strip()]
    assert source.count("\n# COMMAND ----------\n") == len(cells) - 1
    code = [line for line in source.splitlines() if not line.startswith("# MAGIC")]
    compile("\n".join(code), str(path), "exec")  # the code cells are Python
