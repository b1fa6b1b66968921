"""How long the lab's backend takes to serve one request: a base time per model that grows
with the number of requests computing at once, plus a little jitter.

The shape follows a GPU inference server, as the simulator's does (``gpucon.sim.catalog``;
``from_sim`` takes a model's numbers from there for a slot of ``sm_count`` SMs): up to
``slots`` requests compute concurrently (the model's instance count), each one slowed by
``slowdown`` per extra co-running request (they share the SMs), and requests beyond ``slots``
wait in a queue.
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

    @classmethod
    def from_sim(cls, model: str, sm_count: float, speed_per_sm: float = 1.0) -> ServiceTimeModel:
        """The simulator's service time for ``model`` on a slot with ``sm_count`` SMs."""
        from gpucon.sim.catalog import MODELS, concurrency, service_time_s

        spec = MODELS.get(model)
        if spec is None:
            known = ", ".join(sorted(MODELS))
            raise ValueError(f"service time: model {model!r} is not in the simulator ({known})")
        if not sm_count > 0:
            raise ValueError(f"service time: sm_count must be > 0, got {sm_count!r}")
        return cls(
            base_ms=service_time_s(spec, sm_count, speed_per_sm) * 1000.0,
            slowdown=spec.batch_slowdown,
            slots=concurrency(spec, sm_count),
            # uniform +/-j has a coefficient of variation of j/sqrt(3)
            jitter=min(0.9, spec.compute_cv * 3**0.5),
        )

    def compute_ms(self, running: int, rng: random.Random | None = None) -> float:
        """Compute time of one request while ``running`` requests (itself included) compute."""
        running = max(1, min(running, self.slots))
        base = self.base_ms * (1.0 + self.slowdown * (running - 1))
        if self.jitter and base:
            r = (rng or random).uniform(-self.jitter, self.jitter)
            base *= 1.0 + r
        return base
