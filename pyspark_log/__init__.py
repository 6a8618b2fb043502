"""pylog's Python library: record and wire codecs, the client, the CLI and the Spark data source.

Importing this package never imports pyspark; ``pyspark_log.spark`` does, lazily.

``DefaultSource`` is the data source class, found by the name PySpark looks for: Spark (4.0+)
imports every installed top-level module named ``pyspark_*`` and registers its ``DefaultSource``
when a session first needs a Python data source, so ``format("pylog")`` works in any session
(classic or Spark Connect, on a cluster where the package is installed) without ``register``.
It is resolved on first access, which imports pyspark.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "DefaultSource":
        from pyspark_log.spark.source import PylogDataSource

        return PylogDataSource
    raise AttributeError(f"module 'pyspark_log' has no attribute {name!r}")


def register(spark: Any) -> None:
    """Register the ``pylog`` data source with a SparkSession (imports pyspark)."""
    from pyspark_log.spark import register as _register

    _register(spark)
