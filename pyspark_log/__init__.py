"""pylog's Python library: record and wire codecs, the client, the CLI and the Spark data source.

Importing this package never imports pyspark; ``pyspark_log.spark`` does, lazily.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def register(spark: Any) -> None:
    """Register the ``pylog`` data source with a SparkSession (imports pyspark)."""
    from pyspark_log.spark import register as _register

    _register(spark)
