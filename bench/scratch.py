"""A benchmark's scratch directory, removed when the benchmark exits (also on an error).

Benchmarks write gigabytes of topics; a directory left behind by each run fills the disk.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_dir(prefix: str) -> Path:
    """A fresh directory under the system temp dir, deleted at interpreter exit."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
