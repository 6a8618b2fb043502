"""What the running PySpark's Python Data Source API offers (imports pyspark).

* 4.0 / 4.1: ``DataSourceStreamReader.latestOffset()`` without arguments; no read limits, no
  ``SupportsTriggerAvailableNow``. The source then applies maxOffsetsPerTrigger and
  minOffsetsPerTrigger itself inside ``latestOffset()``, starting from the last end offset it
  returned or was shown (a new query: startingOffsets). Spark runs Trigger.AvailableNow / Once
  of such a source as one micro-batch per run (``SingleBatchExecutor``), so a run reads one
  admission-limited batch; ``pyspark_log.spark.available_now.run_available_now`` runs the query
  again until it has drained the backlog.
* 4.2+: ``pyspark.sql.streaming.datasource`` has ``ReadLimit`` (``ReadAllAvailable``,
  ``ReadMaxRows(max_rows)``, ``ReadMinRows(min_rows)``, …) and ``SupportsTriggerAvailableNow``;
  the engine calls ``latestOffset(start, limit)`` when the method takes two parameters, plus
  ``getDefaultReadLimit()``, ``reportLatestOffset()`` and ``prepareForTriggerAvailableNow()``.

Detection is by import, not by version number, so back-ports are honoured.
"""

from __future__ import annotations

from typing import Any

import pyspark

try:
    from pyspark.sql.streaming import datasource as _streaming_ds
except ImportError:  # PySpark < 4.2
    _streaming_ds = None  # type: ignore[assignment]

PYSPARK_VERSION = pyspark.__version__
HAS_READ_LIMITS = _streaming_ds is not None and hasattr(_streaming_ds, "ReadMaxRows")
HAS_TRIGGER_AVAILABLE_NOW = _streaming_ds is not None and hasattr(_streaming_ds, "SupportsTriggerAvailableNow")

LEGACY_NOTE = (
    f"PySpark {PYSPARK_VERSION} has no read-limit API for Python streaming sources (added in 4.2): "
    "pylog applies maxOffsetsPerTrigger/minOffsetsPerTrigger inside latestOffset(), and Spark runs "
    "Trigger.AvailableNow and Trigger.Once of a Python source as one limited batch per run: drain a "
    "backlog with pyspark_log.spark.available_now.run_available_now(start), or upgrade to PySpark 4.2+"
)


def read_limit(max_rows: int | None, min_rows: int | None) -> Any:
    """The ``ReadLimit`` for ``getDefaultReadLimit``: max rows if set, else min rows, else all.

    With both set the engine gets ``ReadMaxRows``; the source adds the minimum from its options.
    """
    assert _streaming_ds is not None, "read limits need PySpark 4.2+"
    if max_rows is not None:
        return _streaming_ds.ReadMaxRows(max_rows)
    if min_rows is not None:
        return _streaming_ds.ReadMinRows(min_rows)
    return _streaming_ds.ReadAllAvailable()


def mark_supports_available_now(cls: type) -> None:
    """Register ``cls`` as a virtual ``SupportsTriggerAvailableNow`` when that mixin exists."""
    if HAS_TRIGGER_AVAILABLE_NOW:
        _streaming_ds.SupportsTriggerAvailableNow.register(cls)
