"""The ``pylog`` Spark data source: ``spark.readStream.format("pylog")`` / ``spark.read.format("pylog")``,
and its exactly-once sink ``df.writeStream.format("pylog")`` / ``df.write.format("pylog")``.

Importing this package imports pyspark. ``register(spark)`` makes the format known to a
session; importing the package registers it with the active session, if there is one.

Spark starts a fresh Python process for each planning step of a Python data source (look-up,
reader/writer creation, commit), and each imports this package: the reader, the writer and the
client behind them are imported when a step needs them, not here (``PylogDataLossError`` and
``PylogSinkError`` resolve on first access, PEP 562).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from pyspark_log.spark.options import PylogOptionError
from pyspark_log.spark.source import PylogDataSource

if TYPE_CHECKING:
    from pyspark_log.spark.planning import PylogDataLossError
    from pyspark_log.spark.sink import PylogSinkError

__all__ = ["PylogDataLossError", "PylogDataSource", "PylogOptionError", "PylogSinkError", "register"]

log = logging.getLogger(__name__)

_LAZY = {"PylogDataLossError": "pyspark_log.spark.planning", "PylogSinkError": "pyspark_log.spark.sink"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


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
