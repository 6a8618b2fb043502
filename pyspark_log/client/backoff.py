"""Exponential backoff with jitter, as Kafka clients compute it (KIP-580).

The n-th retry (``attempts`` = retries already made, from 0) waits
``min(max_ms, initial_ms * multiplier ** min(attempts, cap) * U(1 - jitter, 1 + jitter))``
where ``cap`` is the exponent at which ``initial_ms * multiplier ** cap`` reaches ``max_ms``:
``retry.backoff.ms`` is the first wait, ``retry.backoff.max.ms`` the ceiling. Kafka uses
multiplier 2 and jitter 0.2 for retries and reconnects.
"""

from __future__ import annotations

import math
import random


class ExponentialBackoff:
    """A pure backoff schedule; ``rng`` is injected so tests pin the jitter."""

    def __init__(
        self,
        initial_ms: float,
        max_ms: float,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        if initial_ms < 0 or multiplier < 1 or not 0 <= jitter < 1:
            raise ValueError("backoff needs initial_ms >= 0, multiplier >= 1, 0 <= jitter < 1")
        self.initial_ms = float(initial_ms)
        self.max_ms = float(max(max_ms, initial_ms))
        self.multiplier = multiplier
        self.jitter = jitter
        self._rng = rng or random.Random()
        if self.initial_ms > 0 and multiplier > 1 and self.max_ms > self.initial_ms:
            self._exp_cap = math.log(self.max_ms / self.initial_ms) / math.log(multiplier)
        else:
            self._exp_cap = 0.0

    def backoff_ms(self, attempts: int) -> float:
        """The wait before retry number ``attempts + 1`` (``attempts`` >= 0)."""
        if self._exp_cap == 0.0:
            return self.initial_ms
        exp = min(float(max(attempts, 0)), self._exp_cap)
        term = self.initial_ms * self.multiplier**exp
        factor = self._rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter > 0 else 1.0
        return min(self.max_ms, term * factor)
