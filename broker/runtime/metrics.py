"""Garbage-collection pause metrics of the broker process: a prometheus-client collector.

prometheus-client's ``GCCollector`` serves the collector's counters (``python_gc_collections_total``,
``python_gc_objects_collected_total``, ``python_gc_objects_uncollectable_total`` per generation,
since the process started); this one adds pylog's pause figures under the same prefix, since the
broker became ready: ``python_gc_pause_seconds{generation,quantile}`` (a summary: quantiles 0.5 and
0.99 of the last 1024 pauses, ``_sum``, ``_count``), ``python_gc_pause_seconds_max{generation}`` and
``python_gc_frozen_objects`` (``gc.freeze.enable``). Every pause stalls the event loop (a collection
holds the GIL whichever thread runs it). Meanings: docs/operations.md, "Metrics".
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from broker.runtime.gc_pauses import GcPauses


class GcPauseCollector:
    def __init__(self, pauses: GcPauses, frozen_objects: int | None = None) -> None:
        """``frozen_objects``: a fixed figure (tests); by default ``gc.get_freeze_count()``."""
        self._pauses = pauses
        self._frozen = frozen_objects

    def collect(self) -> Iterator[Metric]:
        snap = sorted(self._pauses.snapshot().items())
        name = "python_gc_pause_seconds"
        pauses = SummaryMetricFamily(
            name, "time the collector held the GIL (the event loop stalled)", labels=["generation"]
        )
        for g, s in snap:
            for q, v in s.quantiles_s.items():
                pauses.samples.append(Sample(name, {"generation": str(g), "quantile": str(q)}, v))
            pauses.add_metric([str(g)], s.count, s.total_s)
        yield pauses
        largest = GaugeMetricFamily(f"{name}_max", "largest pause since the broker became ready", labels=["generation"])
        for g, s in snap:
            largest.add_metric([str(g)], s.max_s)
        yield largest
        frozen = gc.get_freeze_count() if self._frozen is None else self._frozen
        yield GaugeMetricFamily("python_gc_frozen_objects", "objects frozen out of collection", value=frozen)
