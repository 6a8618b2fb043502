"""The distribution builds into an installable wheel (issue 17: "A wheel built from a clean
checkout installs in a fresh venv and ``pylog --version``, ``pylog-broker --help`` and ``import
pyspark_log`` work from it").

How it works offline: ``pip wheel . --no-deps`` builds the wheel from a clean copy of the
committed tree (``git archive`` of HEAD: nothing untracked or ignored gets in), compiling the optional
``records/_speedups.c`` where it can (then the wheel is tagged for this interpreter); its build backend
(setuptools >= 77, from ``[build-system]``) comes from the configured package index, as for every
pip install of the project. The wheel goes into a fresh venv (``python -m venv``, no system
site-packages) with ``--no-deps --no-index``: nothing but the wheel is installed. ``import
pyspark_log`` needs no dependency and is checked there as it is. The console scripts import the
client, which needs the runtime dependencies (crc32c, lz4, ...): for them a ``.pth`` file makes
this test venv's site-packages visible *after* the fresh venv's own, so the code run is the
wheel's (asserted through ``__file__``) and only third-party packages come from outside.
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIST_NAME = "pyspark-pylog"


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    """Run a command; in the fresh venv from a directory without a checkout in it (``python -c``
    puts the working directory first on sys.path) and without PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=600, cwd=cwd, env=env, check=False
    )
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    checkout = root / "checkout"
    checkout.mkdir()
    archive = root / "head.tar"
    run("git", "-C", REPO, "archive", "--format=tar", "-o", archive, "HEAD")
    run("tar", "-xf", archive, "-C", checkout)
    out = root / "dist"
    run(sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", out, cwd=checkout)
    [built] = out.glob("*.whl")
    return built


def test_wheel_metadata_is_complete(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    # the compiled speedups (setup.py, optional) make it a wheel of this interpreter and platform;
    # where they could not be built it is a pure one
    compiled = [n for n in names if n.startswith("pyspark_log/records/_speedups.") and n.endswith(".so")]
    if compiled:
        tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
        assert wheel.name.startswith(f"pyspark_pylog-0.1.0-{tag}-{tag}-"), wheel.name
    else:
        assert wheel.name.startswith("pyspark_pylog-0.1.0-py3-none-any"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        [meta_path] = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(zf.read(meta_path).decode())
        [entry_path] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = zf.read(entry_path).decode()
    assert meta["Name"] == DIST_NAME
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["Summary"].startswith("pylog: a Kafka-compatible log broker")
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "# pylog" in (meta.get_payload() or "")
    classifiers = meta.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Typing :: Typed" in classifiers
    requires = meta.get_all("Requires-Dist") or []
    assert any(r.startswith("pyspark<5,>=4.0") and 'extra == "spark"' in r for r in requires), requires
    assert not any(r.startswith("pylog") for r in requires), "extras refer to the new name"
    assert "pylog = pyspark_log.cli:main" in entry_points
    assert "pylog-broker = broker.__main__:main" in entry_points
    assert "pyspark_log/py.typed" in names
    assert "broker/__main__.py" in names
    assert not any(n.startswith("tests/") for n in names)


def test_wheel_installs_and_runs_in_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    away = tmp_path  # holds no pyspark_log/ or broker/
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=away)
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=away).strip())

    where = run(
        python, "-c", "import pyspark_log, sys; print(pyspark_log.__file__); print(sorted(sys.modules))", cwd=away
    )
    assert where.splitlines()[0].startswith(str(site)), "the wheel's own copy is imported"
    assert "pyspark'" not in where, "importing pyspark_log does not import pyspark"
    with zipfile.ZipFile(wheel) as zf:
        built = any(n.startswith("pyspark_log/records/_speedups.") for n in zf.namelist())
    if built:  # the wheel's compiled speedups load where it is installed
        native = run(python, "-c", "from pyspark_log.records import speedups; print(speedups.native)", cwd=away)
        assert native.strip().startswith("<module 'pyspark_log.records._speedups' from '" + str(site)), native

    # the runtime dependencies of the console scripts, from this test venv, after the wheel's code
    (site / "zz_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    assert run(env_dir / "bin" / "pylog", "--version", cwd=away).strip() == "pylog 0.1.0"
    assert "--data-dir" in run(env_dir / "bin" / "pylog-broker", "--help", cwd=away)
    # what PySpark's data source lookup (pyspark.sql.worker.lookup_data_sources) does on a cluster
    # where the wheel is installed: import each top-level pyspark_* module and register its
    # DefaultSource, so that format("pylog") needs no register(spark)
    lookup = (
        "import importlib, pkgutil\n"
        "from pyspark.sql.datasource import DataSource\n"
        "for info in pkgutil.iter_modules():\n"
        "    if info.name.startswith('pyspark_'):\n"
        "        module = importlib.import_module(info.name)\n"
        "        if issubclass(getattr(module, 'DefaultSource', object), DataSource):\n"
        "            print(module.__file__, module.DefaultSource.name())\n"
    )
    found = run(python, "-c", lookup, cwd=away).strip().splitlines()
    assert [line.split() for line in found] == [[str(site / "pyspark_log" / "__init__.py"), "pylog"]]
    origin = run(python, "-c", "import broker.__main__, pyspark_log.cli; print(broker.__main__.__file__)", cwd=away)
    assert origin.strip().startswith(str(site))
    assert run(python, "-m", "pip", "show", DIST_NAME, cwd=away).startswith(f"Name: {DIST_NAME}")
