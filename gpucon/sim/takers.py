"""A pool's backends that take work, their capacities and scheduler keys, kept between ticks.

Every tick the engine splits a pool's arrivals over the backends that take work
(``queueing.water_fill``). Which backends those are, and each one's capacity and key, follow
from a few fields (state, readiness, weight, health, speed, concurrency) that change only when
an incident, an action or a re-slice touches a backend: ``Takers.of`` hands on last tick's
while no such field was written since (``sim.taker_inputs`` counts the writes) and the pool
holds the same backends; after a write it compares those fields with last tick's (one
comprehension and one list comparison, in C) and works the rest out again only when one
differs. ``fill`` is ``water_fill`` with the same numbers: while the
demand fills no backend (the usual case), the split is each key times one scale, and the
pass that looks for full backends is replaced by one comparison with the lowest cap/key
(with a margin far above rounding, so it never says "none full" when water_fill would not).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucon.model.fleet import BackendState
from gpucon.sim.parts import SimBackend
from gpucon.sim.queueing import water_fill
from gpucon.sim.taker_inputs import edits

ACTIVE = BackendState.ACTIVE
# ``fill`` takes the quick split only below the lowest cap/key less this share of it: far
# more than the rounding of a product and a quotient (a few 1e-16)
_MARGIN = 1e-12
Inputs = tuple[object, ...]


def _inputs(backends: Sequence[SimBackend]) -> list[Inputs]:
    """What decides who takes work and how much: each backend's fields, in a tuple."""
    return [
        (
            b,
            b.state,
            b.ready,
            b.weight,
            b.fails_health,
            b.service_s,
            b.interference,
            b.batch_factor,
            b.concurrency,
        )
        for b in backends
    ]


class Takers:
    """One pool's backends that take work this tick, with their caps and keys."""

    __slots__ = (
        "backends",
        "capacity",
        "caps",
        "edits",
        "inputs",
        "keys",
        "least_ratio",
        "servers",
        "takers",
        "total",
    )

    def __init__(self, backends: Sequence[SimBackend], inputs: list[Inputs], stamp: int) -> None:
        self.inputs = inputs
        self.backends = list(backends)
        self.edits = stamp  # ``taker_inputs.edits()`` when the inputs were read
        takers: list[SimBackend] = []
        caps: list[float] = []
        keys: list[float] = []
        for b in backends:
            takes = b.state is ACTIVE and b.ready and b.weight > 0.0 and not b.fails_health
            b.takes = takes
            if takes:
                alone = b.service_s * b.interference
                b.alone = alone  # the engine's step reads it (one field, not two properties)
                takers.append(b)
                caps.append(b.concurrency / (alone * b.batch_factor))
                keys.append(b.weight / alone)
            else:
                b.alloc = 0.0  # a taker's alloc is set from the water fill each tick
        self.takers = takers
        self.caps = caps
        self.keys = keys
        self.capacity = sum(caps)
        self.servers = float(sum([b.concurrency for b in takers]))
        # water_fill's first sum, the same terms in the same order; the quick split only
        # where every backend is open to work (a key and a cap above 0)
        self.total = sum(keys)
        open_ = all(k > 0.0 for k in keys) and all(c > 0.0 for c in caps)
        self.least_ratio = (
            min([c / k for c, k in zip(caps, keys, strict=True)], default=0.0) if open_ else 0.0
        )

    @classmethod
    def of(cls, backends: Sequence[SimBackend], last: Takers | None) -> Takers:
        """The pool's takers now: ``last`` again when no backend's inputs changed (none
        written since, the same backends: no field read; else compared field by field)."""
        stamp = edits()
        if last is not None and last.edits == stamp and last.backends == backends:
            return last
        inputs = _inputs(backends)
        if last is not None and inputs == last.inputs:
            last.edits = stamp
            return last
        return cls(backends, inputs, stamp)

    def fill(self, demand: float) -> list[float]:
        """``water_fill(demand, keys, caps)``: the same list, computed the same way."""
        keys = self.keys
        if not keys or demand <= 1e-12:
            return water_fill(demand, keys, self.caps)
        scale = demand / self.total
        if scale < self.least_ratio * (1.0 - _MARGIN):  # no backend full: one pass
            return [k * scale for k in keys]
        return water_fill(demand, keys, self.caps)
