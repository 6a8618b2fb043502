"""What a ``format("pylog")`` stream reports in Spark's query progress, and what it cannot.

Spark's Kafka source reports two things per micro-batch in ``StreamingQueryProgress.sources[]``:

* ``latestOffset``: the newest offsets the broker had when the batch was planned
  (``SupportsAdmissionControl.reportLatestOffset``);
* ``metrics``: ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``, ``avgOffsetsBehindLatest``
  (``ReportsSourceMetrics.metrics``: per partition, latest offset minus the batch's end offset).

PySpark's Python Data Source API (4.2+) carries the first: ``DataSourceStreamReader.
reportLatestOffset()`` is called after each ``latestOffset(start, limit)`` and its dict is shown as
``sources[].latestOffset``; ``PylogStreamReader`` returns the latest offsets it planned against
(``{"topic": {"partition": offset}}``, the shape of ``endOffset``). It has no hook for the
second: the JVM side of a Python source (``PythonMicroBatchStream``, 4.3.0, checked with javap)
does not implement ``ReportsSourceMetrics``, so ``sources[].metrics`` stays empty, and nothing a
Python source returns reaches it. On PySpark 4.0/4.1 neither exists (``latestOffset`` is null).

So the offsets behind latest are derived from the progress itself: ``offsets_behind_latest``
computes Kafka's three metrics, under their names, from a source progress's ``latestOffset`` and
``endOffset``; ``OffsetsBehindLatest`` is a ``StreamingQueryListener`` that does so for every
progress of a query and keeps the last values (for a dashboard or a log line).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

OFFSETS_BEHIND_METRICS = ("minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest")


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    """An offsets field of a progress: a dict, JSON (4.1+) or a Python repr (4.0)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = json.loads(value) if value.startswith('{"') or value == "{}" else ast.literal_eval(value)
    return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in value.items()}


def behind_latest(latest: Mapping[Any, int], end: Mapping[Any, int]) -> dict[str, str]:
    """Kafka's ``KafkaMicroBatchStream.metrics``: over the partitions of ``latest``, the offsets
    between the batch's end and the latest offset (min, max, avg), as strings as Spark reports
    source metrics; empty when there is no partition."""
    gaps = [max(offset - end.get(key, offset), 0) for key, offset in latest.items()]
    if not gaps:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(gaps)),
        "maxOffsetsBehindLatest": str(max(gaps)),
        "avgOffsetsBehindLatest": str(float(sum(gaps)) / len(gaps)),
    }


def offsets_behind_latest(source: Mapping[str, Any]) -> dict[str, str]:
    """The offsets-behind-latest metrics of one ``query.lastProgress["sources"][i]`` (a dict, or
    PySpark's ``SourceProgress``): empty when the progress carries no ``latestOffset`` (PySpark
    < 4.2, or a batch that planned nothing)."""
    get = source.get if isinstance(source, Mapping) else lambda k: getattr(source, k, None)
    latest, end = _offsets(get("latestOffset")), _offsets(get("endOffset"))
    flat_latest = {(t, p): o for t, parts in latest.items() for p, o in parts.items()}
    flat_end = {(t, p): o for t, parts in end.items() for p, o in parts.items()}
    return behind_latest(flat_latest, flat_end)


class OffsetsBehindLatest(StreamingQueryListener):
    """A ``StreamingQueryListener`` keeping, per query id, the offsets-behind-latest metrics of
    each pylog source of the last progress: ``listener.last[query_id] == [{"minOffsetsBehindLatest":
    ..., ...}, ...]`` (one dict per source, in ``sources`` order). Add it with
    ``spark.streams.addListener(OffsetsBehindLatest())``."""

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, list[dict[str, str]]] = {}

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - PySpark API name
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802 - PySpark API name
        progress = event.progress
        self.last[str(progress.id)] = [offsets_behind_latest(s) for s in progress.sources]

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802 - PySpark API name
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 - PySpark API name
        pass
