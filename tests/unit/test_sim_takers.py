"""The pool's takers kept between ticks: the same split as ``water_fill`` whatever the demand,
and worked out again as soon as a backend's state, weight or speed changes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpucon.model.fleet import BackendState
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.parts import SimBackend
from gpucon.sim.queueing import water_fill
from gpucon.sim.takers import Takers


def _pool_backends() -> list[SimBackend]:
    world = build_sim_fleet(7, None, None)._world
    return max(world.pools, key=lambda p: len(p.backends)).backends


@settings(max_examples=300, deadline=None)
@given(
    weights=st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0, 3.0]), min_size=1, max_size=8),
    demand=st.one_of(
        st.floats(0.0, 1e4, allow_nan=False), st.sampled_from([0.0, 1e-13, 1e-12, 2e-12])
    ),
)
def test_fill_is_water_fill(weights: list[float], demand: float) -> None:
    backends = _pool_backends()
    for b, w in zip(backends, weights, strict=False):
        b.weight = w
    takers = Takers.of(backends, None)
    assert takers.fill(demand) == water_fill(demand, takers.keys, takers.caps)
    # the demand that just fills the first backend, and just under and over it
    if takers.keys and takers.least_ratio > 0.0:
        edge = takers.least_ratio * takers.total
        for d in (edge * (1 - 1e-9), edge, edge * (1 + 1e-9)):
            assert takers.fill(d) == water_fill(d, takers.keys, takers.caps)


def test_the_takers_are_kept_until_an_input_changes() -> None:
    backends = _pool_backends()
    first = Takers.of(backends, None)
    assert Takers.of(backends, first) is first
    backends[0].state = BackendState.DRAINED
    drained = Takers.of(backends, first)
    assert drained is not first and backends[0] not in drained.takers
    assert not backends[0].takes and backends[0].alloc == 0.0
    backends[1].interference = 2.5  # a noisy neighbour slows it: a lower cap and key
    slowed = Takers.of(backends, drained)
    i = slowed.takers.index(backends[1])
    assert slowed.caps[i] < drained.caps[drained.takers.index(backends[1])]
    assert Takers.of(backends, slowed) is slowed


def test_a_write_that_changes_nothing_keeps_the_takers_and_a_new_backend_does_not() -> None:
    backends = _pool_backends()
    first = Takers.of(backends, None)
    backends[0].interference = backends[0].interference  # a scenario's hook, every tick
    assert Takers.of(backends, first) is first
    backends[1].weight = 0.0  # the field itself, no tuple of inputs built to find it
    zero = Takers.of(backends, first)
    assert zero is not first and backends[1] not in zero.takers
    grown = [*backends, backends[0]]  # the pool's list changed, no field written
    assert Takers.of(grown, zero) is not zero


def test_the_step_reads_each_takers_speed_as_the_takers_worked_it_out() -> None:
    backends = _pool_backends()
    backends[2].interference = 1.7
    takers = Takers.of(backends, None)
    for b in takers.takers:
        assert b.alone == b.service_s * b.interference
