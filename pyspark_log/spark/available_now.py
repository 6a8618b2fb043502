"""Trigger.AvailableNow in several rate-limited micro-batches, also on PySpark 4.0 / 4.1.

Spark runs a Trigger.AvailableNow query in several micro-batches only when every source
implements ``SupportsTriggerAvailableNow`` (Spark's ``MultiBatchExecutor``). For Python data
sources PySpark added that in 4.2 (``pyspark.sql.streaming.datasource``; pylog's reader then fixes
the run's target in ``prepareForTriggerAvailableNow`` and the engine asks
``latestOffset(start, ReadMaxRows)`` batch after batch). In PySpark 4.0 / 4.1 the JVM side of a
Python stream (``PythonMicroBatchStream``) implements only ``MicroBatchStream`` and
``AcceptsLatestSeenOffset``, so Spark falls back to ``SingleBatchExecutor`` ("Falling back to
single batch execution"): one ``latestOffset()`` call, one micro-batch, and the run ends. (With
``spark.sql.streaming.triggerAvailableNowWrapper.enabled`` Spark's wrapper asks ``latestOffset()``
once in ``prepareForTriggerAvailableNow`` and returns that offset for every batch: one batch
again.) pylog applies ``maxOffsetsPerTrigger`` inside that one call, so one run reads one limited
batch and leaves the rest for the next run.

``run_available_now(start)`` drains the backlog there by running the query again from its
checkpoint, one micro-batch per run, until a run finds nothing new (its offsets do not move); on PySpark 4.2+ it runs it
once (the engine does the batches). Each extra run costs a query start (1–3 s).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pyspark_log.spark import compat

__all__ = ["run_available_now"]


def _advanced(query: Any) -> bool:
    """Whether a run planned a batch that moved the offsets (a batch over offsets the cleaner
    emptied moves them without rows)."""
    sources = [source for progress in query.recentProgress for source in progress["sources"]]
    return any(source["startOffset"] != source["endOffset"] for source in sources)


def run_available_now(start: Callable[[], Any], *, timeout_s: float = 3600.0, max_runs: int = 100_000) -> list[Any]:
    """Run the Trigger.AvailableNow query that ``start()`` starts until it has read everything
    available; returns the ``StreamingQuery`` of every run (their ``recentProgress`` together are
    the micro-batches).

    ``start`` must start the same query on the same checkpoint each time it is called
    (``df.writeStream ... .trigger(availableNow=True).option("checkpointLocation", c).start()``).
    On PySpark 4.0 / 4.1 runs follow each other until one does not move the offsets (module
    docstring), so
    records produced while it runs are read too; a topic written faster than
    ``maxOffsetsPerTrigger`` per run keeps it going up to ``max_runs`` runs or ``timeout_s``.
    A run that fails raises its error (``StreamingQueryException``); ``TimeoutError`` when
    ``timeout_s`` passes first (the running query is stopped).
    """
    deadline = time.monotonic() + timeout_s
    runs: list[Any] = []
    while len(runs) < max_runs:
        query = start()
        runs.append(query)
        if not query.awaitTermination(max(deadline - time.monotonic(), 0.001)):
            query.stop()
            raise TimeoutError(f"the Trigger.AvailableNow run {len(runs)} did not finish within {timeout_s} s")
        error = query.exception()
        if error is not None:
            raise error
        if compat.HAS_TRIGGER_AVAILABLE_NOW or not _advanced(query):
            break
    return runs
