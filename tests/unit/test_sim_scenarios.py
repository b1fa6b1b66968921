"""Each named incident does what its description says, and the hub raises the alerts it should."""

from __future__ import annotations

import pytest

from gpucon.hub import Hub
from gpucon.model.alerts import Severity
from gpucon.model.fleet import BackendState, Gpu, LatencyStats, Slot
from gpucon.model.reading import Reading
from gpucon.sim import DEMO_SLO_P95_MS, SCENARIOS, build_sim_fleet
from gpucon.sim.fleet import SimFleet
from gpucon.sim.source import SimSource

LEAKING_SLOT = "node-a/gpu0/gi3"
MIN_FREE_MIB = 1536.0


def run(fleet: SimFleet, seconds: int) -> list[Reading]:
    out = []
    for i in range(seconds):
        fleet.step(1.0)
        out.append(fleet.reading(float(i)))
    return out


def slot(r: Reading, slot_id: str) -> Slot:
    return {s.id: s for s in r.slots}[slot_id]


def latency(r: Reading, name: str) -> LatencyStats:
    return {lat.key: lat for lat in r.latency}[name]


def known(value: float | None) -> float:
    assert value is not None
    return value


def test_the_scenarios_are_named_and_described() -> None:
    assert set(SCENARIOS) >= {"burst", "noisy-neighbour", "slice-memory-leak", "backend-down"}
    assert all(isinstance(text, str) and text for text in SCENARIOS.values())
    with pytest.raises(ValueError, match=r"scenario: unknown 'meteor'.*burst"):
        build_sim_fleet(scenario="meteor")


def test_burst_backs_up_the_stream() -> None:
    calm = run(build_sim_fleet(seed=5), 240)
    burst = run(build_sim_fleet(seed=5, scenario="burst"), 240)
    assert burst[5].queues[0].length == calm[5].queues[0].length  # before the incident
    calm_lag = max(r.queues[0].lag or 0 for r in calm[150:])
    burst_lag = min(r.queues[0].lag or 0 for r in burst[150:])
    assert burst_lag > 10 and burst_lag > 5 * max(calm_lag, 1)
    assert min(r.queues[0].oldest_age_s or 0.0 for r in burst[180:]) > 1.0


def test_the_memory_leak_crosses_the_free_memory_threshold_in_a_few_minutes() -> None:
    readings = run(build_sim_fleet(scenario="slice-memory-leak"), 420)
    free = [known(slot(r, LEAKING_SLOT).mem_free_mib) for r in readings]
    crossed = next(i for i, f in enumerate(free) if f < MIN_FREE_MIB)
    assert 60 < crossed < 360
    assert free == sorted(free, reverse=True)  # it only ever grows
    assert known(latency(readings[-1], "sd15-a0-gi3").error_rate) > 0.1  # then allocations fail
    others = [s for s in readings[-1].slots if s.id != LEAKING_SLOT]
    assert all(known(s.mem_free_mib) > MIN_FREE_MIB for s in others)


def test_backend_down_marks_it_and_its_traffic_moves_to_the_others() -> None:
    before = run(build_sim_fleet(seed=9), 120)[-1]
    readings = run(build_sim_fleet(seed=9, scenario="backend-down"), 120)
    down = {b.name: b for b in readings[-1].backends}["sdxl-c0"]
    assert down.ready is False and down.state is BackendState.DOWN
    assert down.owner == "scheduler" and down.reason and "health" in down.reason
    assert latency(readings[-1], "sdxl-c0").req_per_s == pytest.approx(0.0, abs=0.01)
    for name in ("sdxl-a0-gi1", "sdxl-vm-b-1"):
        now, then = latency(readings[-1], name), latency(before, name)
        assert known(now.req_per_s) > 1.3 * known(then.req_per_s)
        assert known(now.p95_ms) > known(then.p95_ms)


def test_noisy_neighbour_saturates_the_vm_and_slows_both_its_servers() -> None:
    before = run(build_sim_fleet(seed=2), 90)[-1]
    readings = run(build_sim_fleet(seed=2, scenario="noisy-neighbour"), 90)
    vm = slot(readings[-1], "vm:vm-b-1")
    assert all(known(slot(r, "vm:vm-b-1").activity_pct) >= 98.0 for r in readings[-40:])
    assert any("train" in (p.name or "") for p in vm.processes)
    for name in ("sdxl-vm-b-1", "sd15-vm-b-1"):
        now, then = latency(readings[-1], name), latency(before, name)
        assert known(now.compute_ms) > 2.0 * known(then.compute_ms)
    # the other VM is left alone
    assert known(slot(readings[-1], "vm:vm-b-2").activity_pct) < 90.0


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def alerts_over(scenario: str | None, seconds: int) -> dict[str, Severity]:
    """Every alert the hub raised on the demo fleet over ``seconds`` of ticks."""
    clock = FakeClock()
    hub = Hub(
        [SimSource.for_demo(seed=7, scenario=scenario, clock=clock)],
        clock=clock,
        slo_p95_ms_by_model=DEMO_SLO_P95_MS,
    )
    seen: dict[str, Severity] = {}
    for _ in range(seconds):
        clock.t += 1.0
        hub.poll_once()
        for alert in hub.tick().alerts:
            seen[alert.key] = alert.severity
    return seen


def test_the_calm_demo_raises_no_alerts() -> None:
    assert alerts_over(None, 300) == {}


@pytest.mark.parametrize(
    ("scenario", "seconds", "expected"),
    [
        ("backend-down", 90, {"not_ready:sdxl-c0", "p95_slo:sdxl-a0-gi1"}),
        ("burst", 300, {"queue_wait:gen:queue", "p95_slo:sdxl-a0-gi1", "queue_wait:sdxl-c0"}),
        ("noisy-neighbour", 120, {"hot_slot:vm:vm-b-1", "p95_slo:sdxl-vm-b-1"}),
        ("slice-memory-leak", 300, {f"low_memory:{LEAKING_SLOT}"}),
        ("gpu-fault", 120, {"xid:node-c/gpu0", "thermal:node-c/gpu0"}),
    ],
)
def test_each_scenario_raises_its_alerts(scenario: str, seconds: int, expected: set[str]) -> None:
    seen = alerts_over(scenario, seconds)
    assert expected <= set(seen)
    assert "stale_source:sim" not in seen


def test_gpu_fault_heats_the_h200_into_slowdown_then_raises_xid_94() -> None:
    fleet = build_sim_fleet(seed=7, scenario="gpu-fault")
    readings = run(fleet, 120)

    def h200(r: Reading) -> Gpu:
        return next(g for g in r.gpus if g.name == "NVIDIA H200")

    calm = h200(readings[5])
    assert calm.thermal_slowdown is False and calm.xid_last is None and calm.xid_watched
    hot = h200(readings[-1])
    assert known(hot.temperature_c) >= 87 and hot.thermal_slowdown is True
    # raised 30 s into the incident (t = 40 s); its time is the reading's clock
    assert hot.xid_last == 94 and hot.xid_at == pytest.approx(40.0, abs=1.0)
    assert h200(readings[38]).xid_last is None
