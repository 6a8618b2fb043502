"""Running a scenario over a block of seeds and reporting every failing seed."""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from tests.sim.cluster import Cluster, SimulationFailure
from tests.sim.network import NetworkConfig

Scenario = Callable[[int], None]


def ci_seeds(count: int) -> Callable[[Scenario], Scenario]:
    """How many seeds CI runs of a scenario (``--seeds N`` overrides)."""

    def mark(function: Scenario) -> Scenario:
        function.ci_seeds = count  # type: ignore[attr-defined]
        return function

    return mark


def run_seeds(seeds: list[int], scenario: Scenario) -> None:
    failures: list[str] = []
    for seed in seeds:
        try:
            scenario(seed)
        except SimulationFailure as exc:
            failures.append(str(exc))
        except Exception as exc:
            failures.append(f"seed={seed}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    if failures:
        pytest.fail(f"{len(failures)} of {len(seeds)} seeds failed\n\n" + "\n\n".join(failures), pytrace=False)


def make_cluster(
    seed: int,
    voters: tuple[int, int],
    observers: tuple[int, int],
    *,
    lossy: bool = True,
    **cluster_options: Any,
) -> tuple[Cluster, random.Random]:
    """A cluster whose size and network are drawn from ``seed`` (a stream apart from the cluster's)."""
    rng = random.Random(seed * 7919 + 104729)
    num_voters = rng.randint(*voters)
    num_observers = rng.randint(*observers)
    network = NetworkConfig.random(rng, lossy=lossy)
    # Small fetch batches make followers hold a prefix of what a new leader sends, which is
    # where the "commit only with an entry of the current epoch" rule matters.
    fetch_max_records = rng.choice((2, 3, 256))
    cluster = Cluster(
        seed, num_voters, num_observers, network=network, fetch_max_records=fetch_max_records, **cluster_options
    )
    return cluster, rng
