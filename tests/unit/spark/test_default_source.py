"""``pyspark_log.DefaultSource``: the name PySpark's data source lookup registers from an installed
``pyspark_*`` module, resolved lazily so that ``import pyspark_log`` stays free of pyspark."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pyspark_log
from pyspark_log.spark.source import PylogDataSource

pytestmark = pytest.mark.unit


def test_default_source_is_the_pylog_data_source() -> None:
    assert pyspark_log.DefaultSource is PylogDataSource
    assert pyspark_log.DefaultSource.name() == "pylog"


def test_other_attributes_still_raise() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pyspark_log.Nope  # noqa: B018


def test_importing_the_package_does_not_import_pyspark() -> None:
    code = "import sys, pyspark_log; print(any(m == 'pyspark' or m.startswith('pyspark.') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
