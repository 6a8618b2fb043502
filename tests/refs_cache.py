"""The reference JVM jars: each recipe ``refs/<name>/pom.xml`` is fetched from Maven Central into
the ignored cache ``.refs/<name>/libs`` (``./dev refs``, run by ``./dev test`` when a cache is
empty). ``cached_jars`` runs the same recipe when a test or benchmark finds its cache empty."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class RefsUnavailable(RuntimeError):
    """A recipe's jars could not be had (no Maven, no network to Maven Central)."""


def cached_jars(name: str, marker_glob: str, error: type[RefsUnavailable] = RefsUnavailable) -> Path:
    """``.refs/<name>/libs``, filled by ``refs/<name>/pom.xml`` first when no file there matches
    ``marker_glob``; ``error`` (naming the recipe) when that cannot be done."""
    recipe = REPO / "refs" / name / "pom.xml"
    cache = REPO / ".refs" / name / "libs"
    if any(cache.glob(marker_glob)):
        return cache
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(f"the jars of {recipe} are not cached and mvn is not installed: run ./dev refs")
    done = subprocess.run(
        [mvn, "-q", "-f", str(recipe), "dependency:copy-dependencies", f"-DoutputDirectory={cache}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not any(cache.glob(marker_glob)):
        raise error(f"fetching the jars of {recipe} failed:\n{done.stdout}\n{done.stderr}")
    return cache
