"""SimSource: the simulated fleet behind the ``Source`` interface, through the hub."""

from __future__ import annotations

from gpucon.hub import Hub
from gpucon.model.fleet import Health
from gpucon.sim import build_sim_fleet
from gpucon.sim.source import MAX_CATCH_UP_S, SimSource
from gpucon.sources.base import Source


class FakeClock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_each_read_advances_the_fleet_by_the_time_elapsed_capped() -> None:
    clock = FakeClock()
    fleet = build_sim_fleet()
    source = SimSource(fleet, clock=clock)
    assert isinstance(source, Source) and source.name == "sim"
    first = source.read()
    assert fleet.virtual_time == 0.0 and first.taken_at == clock.t
    clock.t += 2.5
    source.read()
    assert fleet.virtual_time == 2.5
    clock.t += 3600.0  # a laptop lid closed for an hour
    source.read()
    assert fleet.virtual_time == 2.5 + MAX_CATCH_UP_S
    clock.t -= 10.0  # a clock stepped back does not run the fleet backwards
    source.read()
    assert fleet.virtual_time == 2.5 + MAX_CATCH_UP_S


def test_the_demo_source_merges_through_the_hub() -> None:
    clock = FakeClock()
    source = SimSource.for_demo(seed=7, scenario=None, size=None, clock=clock)
    hub = Hub([source], clock=clock)
    for _ in range(3):
        clock.t += 1.0
        hub.poll_once()
        snap = hub.tick()
    assert snap.sources["sim"].health is Health.OK
    assert len(snap.slots) == 9 and len(snap.backends) == 11 and len(snap.gpus) == 5
    assert set(snap.latency) == set(snap.backends)
    assert snap.queues["gen:queue"].group == "g1"
    assert snap.origins["slot:node-a/gpu0/gi1"] == frozenset({"sim"})
    assert snap.backends_on("vm:vm-b-1") and len(snap.backends_on("vm:vm-b-1")) == 2
    assert snap.history.get("slot:node-a/gpu0/gi1:activity")[-1] is not None


def test_a_512_gpu_demo_goes_through_the_hub() -> None:
    clock = FakeClock()
    hub = Hub([SimSource.for_demo(size=512, clock=clock)], clock=clock)
    clock.t += 1.0
    hub.poll_once()
    snap = hub.tick()
    assert len(snap.gpus) == 512 and len(snap.slots) > 3300
