"""What importing ``pyspark_log`` loads, seen from a fresh interpreter (a child process): the
package never imports pyspark, and each of Spark's planning steps of the data source imports only
what that step needs."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_package_does_not_import_pyspark() -> None:
    code = "import sys, pyspark_log; print(any(m == 'pyspark' or m.startswith('pyspark.') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def _modules_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.split())


# Spark starts a Python process per planning step of a data source; each imports only what its
# step needs (the first write of a session pays every one of these imports).
_CLIENT_CORE = {"pyspark_log.client.sync", "pyspark_log.client.admin", "pyspark_log.client.consumer"}


def test_the_lookup_step_imports_no_client_reader_writer_or_arrow() -> None:
    loaded = _modules_after("import pyspark_log; pyspark_log.DefaultSource")
    assert not loaded & (_CLIENT_CORE | {"pyspark_log.spark.reader", "pyspark_log.spark.writer", "pyarrow"})


def test_the_writer_planning_and_commit_steps_import_no_producer_or_arrow() -> None:
    loaded = _modules_after("import pyspark_log.spark.writer")
    assert not loaded & (_CLIENT_CORE | {"pyspark_log.client.producer", "pyspark_log.spark.sink_arrow", "pyarrow"})
