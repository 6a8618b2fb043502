"""The compiled producer loops (``_speedups.c``), or None where they were not built.

The extension is optional (``setup.py``): everything in it has a pure Python twin giving the
same result — ``partition_keys`` and ``group_by_partition`` the default partitioner's
``toPositive(murmur2(key)) % partitions`` (``columnar_encode.partitions_for_keys``),
``encode_records`` the records sections of ``send()`` rows (``row_encode.encode_plain_rows``),
``LaneSender`` the common case of ``Producer.send`` (``client/sync.py`` through the producer's
``client/lane_writer.LaneWriter``, the only client object the compiled code knows).
Callers use ``native`` when it is not None. ``PYLOG_NO_SPEEDUPS=1`` in the environment (read at
import) makes it None, to run or test the pure Python path.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("PYLOG_NO_SPEEDUPS", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("pyspark_log.records._speedups")
    except ImportError:  # not built (no compiler where it was installed)
        return None


native: ModuleType | None = _load()
