"""The ``pylog`` Spark data source: ``spark.readStream.format("pylog")`` / ``spark.read.format("pylog")``,
and its exactly-once sink ``df.writeStream.format("pylog")`` / ``df.write.format("pylog")``.

Importing this package imports pyspark. ``register(spark)`` makes the format known to a
session; importing the package registers it with the active session, if there is one.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark_log.spark.options import PylogOptionError
from pyspark_log.spark.planning import PylogDataLossError
from pyspark_log.spark.sink import PylogSinkError
from pyspark_log.spark.source import PylogDataSource

__all__ = ["PylogDataLossError", "PylogDataSource", "PylogOptionError", "PylogSinkError", "register"]

log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register ``format("pylog")`` with ``spark`` (a SparkSession).

    PySpark 4.0 refuses to register a name that its lookup of installed ``pyspark_*`` modules
    already registered (``DATA_SOURCE_ALREADY_EXISTS``; 4.3 replaces it): that entry is this
    package's own ``pyspark_log.DefaultSource``, so the format is known and nothing is to do."""
    try:
        spark.dataSource.register(PylogDataSource)
    except Exception as exc:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
        log.debug("pylog: format('pylog') is already registered (pyspark_log.DefaultSource): %s", exc)


def _register_with_active_session() -> None:
    from pyspark.sql import SparkSession

    try:
        session = SparkSession.getActiveSession()
        if session is not None:
            register(session)
    except Exception as exc:  # noqa: BLE001 - importing must never fail because registration did
        log.warning("pylog: could not register the data source with the active SparkSession: %s", exc)


_register_with_active_session()
