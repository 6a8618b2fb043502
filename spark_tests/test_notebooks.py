"""The notebooks in ``notebooks/`` run top to bottom (nbclient) against a local broker.

One IPython kernel of this interpreter (a kernelspec written to a temporary JUPYTER_PATH, so CI
needs no registered kernel) runs the notebooks in turn; each starts its own embedded broker
because ``PYLOG_BOOTSTRAP`` is unset and Spark's master is local, the path a laptop takes. The
kernel's SparkSession is created by the first notebook and reused by the others (as on
Databricks, where ``spark`` exists). A second kernel runs them again with ``spark`` a Spark
Connect session made before the first cell, as on Databricks serverless. A third runs the Delta
notebooks with ``spark`` a classic session that has delta-spark's jars and session confs, as on a
Databricks cluster, so ``delta_sink``/``load_to_delta`` take the delta-spark engine (where Delta's
jars run on this PySpark: the oldest-PySpark run of ``./dev test``; skipped elsewhere).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ipykernel  # noqa: F401  (the kernel the notebooks run in; the test extra installs it)
import nbclient
import nbformat
import pytest

from spark_tests.jars import DELTA_SESSION_CONFS, DeltaUnavailable, delta_jars

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
KERNEL = "pylog-test-venv"

pytestmark = pytest.mark.timeout(600)


@contextmanager
def started_kernel(root: Path) -> Iterator[object]:
    """An IPython kernel of this interpreter (kernelspec in ``root``), without PYLOG_* settings."""
    from jupyter_client.manager import KernelManager

    spec_dir = root / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "pylog tests",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYLOG_")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    km = KernelManager(kernel_name=KERNEL)
    km.start_kernel(env=env, cwd=str(root))
    try:
        yield km
    finally:
        km.shutdown_kernel(now=True)
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with started_kernel(tmp_path_factory.mktemp("jupyter")) as km:
        yield km


@pytest.fixture(scope="module")
def connect_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A kernel of its own (a Spark Connect session marks its whole process as Connect)."""
    with started_kernel(tmp_path_factory.mktemp("jupyter-connect")) as km:
        yield km


@pytest.fixture(scope="module")
def delta_kernel(delta_session_cell: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    del delta_session_cell  # skips first where Delta's jars do not run on this PySpark
    with started_kernel(tmp_path_factory.mktemp("jupyter-delta")) as km:
        yield km


def test_there_are_notebooks() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_streaming_to_delta.ipynb",
        "03_offline_backfill.ipynb",
        "04_cdc_to_delta.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(kernel, path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert 'settings.get("bootstrap")' in first_code.source, "the first cell must name the bootstrap servers"
    run_and_check(nb, kernel, path)


# What a Databricks serverless notebook starts with: ``spark`` is a Spark Connect session.
CONNECT_SESSION = (
    "from pyspark.sql import SparkSession\n"
    'spark = SparkSession.builder.remote("local[2]").config("spark.sql.shuffle.partitions", "2").getOrCreate()\n'
    'assert type(spark).__module__.startswith("pyspark.sql.connect")'
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_through_spark_connect(connect_kernel, path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(CONNECT_SESSION))
    run_and_check(nb, connect_kernel, path)


DELTA_NOTEBOOKS = [p for p in NOTEBOOKS if "delta" in p.stem or "backfill" in p.stem]


@pytest.fixture(scope="module")
def delta_session_cell() -> str:
    """What a Databricks cluster's notebook starts with: ``spark`` with Delta on its classpath."""
    import pyspark

    try:
        jars = ",".join(str(jar) for jar in delta_jars(pyspark.__version__))
    except DeltaUnavailable as exc:
        pytest.skip(str(exc))
    confs = "".join(f".config({k!r}, {v!r})" for k, v in DELTA_SESSION_CONFS.items())
    return (
        "import os, sys\n"
        "from pyspark.sql import SparkSession\n"
        "os.environ.setdefault('PYSPARK_PYTHON', sys.executable)\n"
        "spark = (SparkSession.builder.master('local[2]').config('spark.sql.shuffle.partitions', '2')"
        f".config('spark.ui.showConsoleProgress', 'false').config('spark.jars', {jars!r}){confs}.getOrCreate())"
    )


ENGINE_CHECK = (
    "from pyspark_log.delta import delta_spark_available\nprint('delta-spark engine:', delta_spark_available(spark))"
)


@pytest.mark.parametrize("path", DELTA_NOTEBOOKS, ids=[p.stem for p in DELTA_NOTEBOOKS])
def test_delta_notebook_runs_with_delta_spark(delta_session_cell: str, delta_kernel, path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(delta_session_cell))
    nb.cells.append(nbformat.v4.new_code_cell(ENGINE_CHECK))
    run_and_check(nb, delta_kernel, path)
    assert "delta-spark engine: True" in nb.cells[-1].outputs[0]["text"]


def run_and_check(nb: Any, kernel: object, path: Path) -> None:
    client = nbclient.NotebookClient(nb, km=kernel, timeout=300, allow_errors=False)
    client.execute()
    outputs = "".join(
        out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
    )
    assert "broker:" in outputs
    if path.stem.startswith("02"):
        assert "duplicates: 0" in outputs
    if path.stem.startswith("03"):
        assert "loaded anything: False" in outputs
    if path.stem.startswith("04"):
        assert "duplicate keys: 0" in outputs
        assert "mirror matches the source: True" in outputs
