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
    """Register ``format("pylog")`` with ``spark`` (a SparkSession)."""
    spark.dataSource.register(PylogDataSource)


def _register_with_active_session() -> None:
    from pyspark.sql import SparkSession

    try:
        session = SparkSession.getActiveSession()
        if session is not None:
            register(session)
    except Exception as exc:  # noqa: BLE001 - importing must never fail because registration did
        log.warning("pylog: could not register the data source with the active SparkSession: %s", exc)


_register_with_active_session()
