"""The churn benchmark's source: every entity a new record each read, with the values it
nudges changed and every other field where its class declares it (it builds positionally)."""

from __future__ import annotations

import msgspec

from benchmarks.churn import ChurnSource
from gpucon.model.fleet import Backend, Gpu, LatencyStats, Slot
from gpucon.sim.source import SimSource

NUDGED = {
    Gpu: {"temperature_c", "power_w"},
    Slot: {"mem_used_mib", "activity_pct"},
    Backend: {"inflight"},
    LatencyStats: {"req_per_s", "p95_ms"},
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


def _same_but(a: msgspec.Struct, b: msgspec.Struct, nudged: set[str]) -> set[str]:
    """The fields of ``b`` that differ from ``a`` (asserting they are among ``nudged``)."""
    differ = {f for f in a.__struct_fields__ if getattr(a, f) != getattr(b, f)}
    assert differ <= nudged, (type(a).__name__, differ - nudged)
    return differ


def test_every_entity_new_with_only_its_nudged_values_changed() -> None:
    clock = Clock()
    sim = SimSource.for_demo(7, None, 8, clock=clock)
    churn = ChurnSource(SimSource.for_demo(7, None, 8, clock=clock))
    clock.now += 1.0
    plain = sim.read()
    churned = churn.read()
    changed: dict[type, set[str]] = {cls: set() for cls in NUDGED}
    pairs = [
        (plain.gpus, churned.gpus),
        (plain.slots, churned.slots),
        (plain.backends, churned.backends),
        (plain.latency, churned.latency),
    ]
    for before, after in pairs:
        assert len(before) == len(after) > 0
        for a, b in zip(before, after, strict=True):
            assert a is not b
            assert type(a) is type(b)
            changed[type(a)] |= _same_but(a, b, NUDGED[type(a)])
    # each nudged value did change somewhere (a field passed in the wrong place would not)
    assert changed == NUDGED
