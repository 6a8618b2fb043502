"""A simulated network: per-message random delay (so messages reorder), drops, duplicates, and
directed links that partitions cut and ``heal`` restores. All randomness comes from one seeded
``random.Random``."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    min_delay_ms: int = 1
    max_delay_ms: int = 10
    drop_probability: float = 0.0
    duplicate_probability: float = 0.0

    @classmethod
    def random(cls, rng: random.Random, *, lossy: bool = True) -> NetworkConfig:
        max_delay = rng.choice((2, 5, 10, 25))
        return cls(
            min_delay_ms=1,
            max_delay_ms=max_delay,
            drop_probability=rng.choice((0.0, 0.0, 0.01, 0.03)) if lossy else 0.0,
            duplicate_probability=rng.choice((0.0, 0.01, 0.05)) if lossy else 0.0,
        )


class SimNetwork:
    def __init__(self, rng: random.Random, config: NetworkConfig) -> None:
        self._rng = rng
        self.config = config
        self._cut: set[tuple[int, int]] = set()

    def delivery_delays(self, source: int, destination: int) -> list[int]:
        """Delays (ms) after which copies of one message arrive; empty if it is lost."""
        if (source, destination) in self._cut:
            return []
        cfg = self.config
        if cfg.drop_probability and self._rng.random() < cfg.drop_probability:
            return []
        delays = [self._rng.randint(cfg.min_delay_ms, cfg.max_delay_ms)]
        if cfg.duplicate_probability and self._rng.random() < cfg.duplicate_probability:
            delays.append(self._rng.randint(cfg.min_delay_ms, cfg.max_delay_ms * 3))
        return delays

    def is_cut(self, source: int, destination: int) -> bool:
        return (source, destination) in self._cut

    def isolate(self, node: int, others: Iterable[int]) -> None:
        """Drop all traffic to and from ``node``."""
        for other in others:
            if other != node:
                self._cut.add((node, other))
                self._cut.add((other, node))

    def partition(self, side_a: Iterable[int], side_b: Iterable[int]) -> None:
        """Nodes talk within a side, never across."""
        side_b = list(side_b)
        for a in side_a:
            for b in side_b:
                self._cut.add((a, b))
                self._cut.add((b, a))

    def heal(self) -> None:
        self._cut.clear()

    def reconnect(self, node: int) -> None:
        self._cut = {(a, b) for a, b in self._cut if node not in (a, b)}
