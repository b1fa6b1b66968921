"""How long the lab's backend takes to serve one request: a base time per model that grows
with the number of requests computing at once, plus a little jitter.

The shape follows a GPU inference server: up to ``slots`` requests compute concurrently (the
model's instance count), each one slowed by ``slowdown`` per extra co-running request (they
share the SMs), and requests beyond ``slots`` wait in a queue.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServiceTimeModel:
    base_ms: float = 20.0
    # fractional slowdown per extra request computing at the same time
    slowdown: float = 0.15
    # requests that compute concurrently; the rest queue
    slots: int = 4
    # relative jitter (uniform, +/-)
    jitter: float = 0.05

    def __post_init__(self) -> None:
        if not self.base_ms >= 0:
            raise ValueError(f"service time: base_ms must be >= 0, got {self.base_ms!r}")
        if not self.slowdown >= 0:
            raise ValueError(f"service time: slowdown must be >= 0, got {self.slowdown!r}")
        if self.slots < 1:
            raise ValueError(f"service time: slots must be >= 1, got {self.slots!r}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"service time: jitter must be in [0, 1), got {self.jitter!r}")

    def compute_ms(self, running: int, rng: random.Random | None = None) -> float:
        """Compute time of one request while ``running`` requests (itself included) compute."""
        running = max(1, min(running, self.slots))
        base = self.base_ms * (1.0 + self.slowdown * (running - 1))
        if self.jitter and base:
            r = (rng or random).uniform(-self.jitter, self.jitter)
            base *= 1.0 + r
        return base
