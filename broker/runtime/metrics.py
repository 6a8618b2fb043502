"""Garbage-collection metrics of the broker process in the Prometheus text format.

Kafka has no metric for Python's collector, so these carry the names the Prometheus Python
client (``prometheus_client``'s ``GCCollector``) gives the same counters, plus pylog's pause
figures under the same ``python_gc_`` prefix; ``generation`` is "0", "1" or "2" (2: a full collection).

================================================================  ==========================================
sample                                                            meaning
================================================================  ==========================================
``python_gc_collections_total{generation}``                       collections since the broker became ready
``python_gc_objects_collected_total{generation}``                 unreachable objects freed
``python_gc_objects_uncollectable_total{generation}``             unreachable objects that could not be freed
``python_gc_pause_seconds{generation,quantile}``                  pause quantiles (0.5, 0.99) of the last
                                                                  1024 collections of the generation
``python_gc_pause_seconds_sum{generation}`` / ``_count``          total pause time / collections (summary)
``python_gc_pause_seconds_max{generation}``                       largest pause since the broker became ready
``python_gc_frozen_objects``                                      objects in the permanent generation
                                                                  (``gc.freeze.enable``)
================================================================  ==========================================

Every pause stalls the event loop (a collection holds the GIL whichever thread runs it).
"""

from __future__ import annotations

import gc

from broker.runtime.gc_pauses import GcPauses

_COUNTERS = (
    ("python_gc_collections_total", "collections since the broker became ready", "count"),
    ("python_gc_objects_collected_total", "unreachable objects freed by the collector", "collected"),
    ("python_gc_objects_uncollectable_total", "unreachable objects the collector could not free", "uncollectable"),
)


def render_gc(pauses: GcPauses, frozen_objects: int | None = None) -> str:
    """The samples above; ``frozen_objects`` defaults to ``gc.get_freeze_count()``."""
    snap = sorted(pauses.snapshot().items())
    lines: list[str] = []
    for name, help_text, field in _COUNTERS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        lines += [f'{name}{{generation="{g}"}} {getattr(s, field)}' for g, s in snap]
    name = "python_gc_pause_seconds"
    lines += [f"# HELP {name} time the collector held the GIL (the event loop stalled)", f"# TYPE {name} summary"]
    for g, s in snap:
        lines += [f'{name}{{generation="{g}",quantile="{q}"}} {v!r}' for q, v in s.quantiles_s.items()]
        lines += [f'{name}_sum{{generation="{g}"}} {s.total_s!r}', f'{name}_count{{generation="{g}"}} {s.count}']
    lines += [f"# HELP {name}_max largest pause since the broker became ready", f"# TYPE {name}_max gauge"]
    lines += [f'{name}_max{{generation="{g}"}} {s.max_s!r}' for g, s in snap]
    frozen = gc.get_freeze_count() if frozen_objects is None else frozen_objects
    lines += [
        "# HELP python_gc_frozen_objects objects frozen out of collection",
        "# TYPE python_gc_frozen_objects gauge",
    ]
    lines.append(f"python_gc_frozen_objects {frozen}")
    return "\n".join(lines) + "\n"
