"""Rebalance from capacity, on constructed snapshots: the estimate, the fallback, damping, the
rules that never raise a backend in trouble, and stability between two looks."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from gpucon.actions import rebalance
from gpucon.actions.capacity import MIN_SAMPLES, sm_share, sustained
from gpucon.actions.weights import MAX_STEP
from gpucon.model.alerts import Alert, Severity
from gpucon.model.fleet import (
    Backend,
    ComputeProcess,
    LatencyStats,
    MpsState,
    Slot,
    SlotKind,
    VmInfo,
)
from gpucon.model.history import History
from gpucon.model.snapshot import Snapshot

SLO = 1000.0
SLOTS = {
    "h/gpu0/gi1": Slot(
        "h/gpu0/gi1", SlotKind.MIG, sm_count=42, processes=(ComputeProcess(1, "tritonserver"),)
    ),
    "h/gpu0/gi2": Slot(
        "h/gpu0/gi2", SlotKind.MIG, sm_count=14, processes=(ComputeProcess(2, "tritonserver"),)
    ),
    "h/gpu1": Slot(
        "h/gpu1", SlotKind.GPU, sm_count=132, processes=(ComputeProcess(3, "tritonserver"),)
    ),
}
ON = {"b1": "h/gpu0/gi1", "b2": "h/gpu0/gi2", "b3": "h/gpu1"}

# (rps, p95 ms, slot activity %) of one backend at sample i; its service time is 1 s unless
# SERVICE_MS says otherwise, so "in flight" reads the same as req/s
Series = Callable[[int], tuple[float, float, float]]
SERVICE_MS: dict[str, float] = {}


def steady(rps: float, activity: float, p95: float = 400.0) -> Series:
    return lambda i: (rps, p95, activity)


def history_of(series: dict[str, Series], samples: int, start: int = 0) -> History:
    history = History()
    for i in range(start, start + samples):
        values: dict[str, float | None] = {}
        for name, fn in series.items():
            rps, p95, act = fn(i)
            values[f"backend:{name}:rps"] = rps
            values[f"backend:{name}:p95"] = p95
            values[f"backend:{name}:service_ms"] = SERVICE_MS.get(name, 1000.0)
            values[f"slot:{ON[name]}:activity"] = act
        history = history.append(float(i), values)
    return history


def snapshot(
    series: dict[str, Series],
    samples: int = 60,
    start: int = 0,
    weights: dict[str, float] | None = None,
    slots: dict[str, Slot] | None = None,
    latency: dict[str, LatencyStats] | None = None,
    alerts: tuple[Alert, ...] = (),
) -> Snapshot:
    weights = weights or {"b1": 1.0, "b2": 1.0, "b3": 1.0}
    backends = {n: Backend(n, slot_id=ON[n], model="m", weight=w) for n, w in weights.items()}
    return Snapshot(
        taken_at=float(start + samples - 1),
        backends=backends,
        slots=SLOTS if slots is None else slots,
        history=history_of(series, samples, start),
        latency=latency or {},
        alerts=alerts,
        slo_p95_ms={n: SLO for n in backends},
    )


def weights_of(snap: Snapshot) -> dict[str, float]:
    plan = rebalance.plan_rebalance(snap, {"registry_version": 1})
    return {str(k): float(v) for k, v in dict(plan.params["weights"]).items()}


def reasons_of(snap: Snapshot) -> dict[str, str]:
    plan = rebalance.plan_rebalance(snap, {"registry_version": 1})
    return {str(k): str(v) for k, v in dict(plan.params["reasons"]).items()}


def test_capacity_is_throughput_per_busy_second_not_the_share_it_was_sent() -> None:
    # b1 was sent little (weight share) but was barely busy; b2 was sent more and was busier
    snap = snapshot({"b1": steady(2.0, 20.0), "b2": steady(4.0, 80.0), "b3": steady(6.0, 30.0)})
    assert sustained(snap, snap.backends["b1"]).req_per_s == pytest.approx(10.0)
    assert sustained(snap, snap.backends["b2"]).req_per_s == pytest.approx(5.0)
    # weight ∝ capacity 10:5:20 of the total 3 (b1: 0.857, less the 2 % dead band), ±25 %
    assert weights_of(snap) == {"b1": 0.877, "b2": 0.75, "b3": 1.25}
    assert reasons_of(snap)["b1"].startswith(
        "sustains 10 req/s × 1 s = 10 in flight within SLO over 60 samples"
    )


def test_a_weight_is_a_share_of_requests_in_flight_not_of_req_per_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the scheduler sends work to the lowest in-flight/weight: b3 sustains the same 10 req/s
    # as b1, but its requests take 4x as long, so it holds 4x as many in flight
    monkeypatch.setitem(SERVICE_MS, "b1", 500.0)
    monkeypatch.setitem(SERVICE_MS, "b2", 500.0)
    monkeypatch.setitem(SERVICE_MS, "b3", 2000.0)
    snap = snapshot({"b1": steady(2.0, 20.0), "b2": steady(2.0, 20.0), "b3": steady(2.0, 20.0)})
    b1, b3 = sustained(snap, snap.backends["b1"]), sustained(snap, snap.backends["b3"])
    assert b1.req_per_s == pytest.approx(10.0) and b3.req_per_s == pytest.approx(10.0)
    assert b1.in_flight == pytest.approx(5.0) and b3.in_flight == pytest.approx(20.0)
    assert weights_of(snap) == {"b1": 0.75, "b2": 0.75, "b3": 1.25}


def test_samples_over_slo_or_idle_do_not_count() -> None:
    def b1(i: int) -> tuple[float, float, float]:
        if i % 3 == 0:
            return (50.0, 5000.0, 100.0)  # over the SLO: not what it sustains within it
        if i % 3 == 1:
            return (0.1, 100.0, 1.0)  # idle: the ratio would be noise
        return (3.0, 300.0, 30.0)

    snap = snapshot({"b1": b1, "b2": steady(1.0, 10.0), "b3": steady(1.0, 10.0)}, samples=90)
    est = sustained(snap, snap.backends["b1"])
    assert est.samples == 30
    assert est.req_per_s == pytest.approx(10.0)


def test_fewer_than_the_minimum_samples_falls_back_to_the_sm_share() -> None:
    snap = snapshot(
        {"b1": steady(2.0, 20.0), "b2": steady(1.0, 10.0), "b3": steady(6.0, 30.0)},
        samples=MIN_SAMPLES - 8,
    )
    reasons = reasons_of(snap)
    assert reasons["b2"] == "SM share (14/188): 12 of 20 samples within SLO needed; " + (
        "target 0.223, damped to ±25%"
    )
    weights = weights_of(snap)
    assert weights["b3"] == 1.25 and weights["b2"] == 0.75
    assert rebalance.plan_rebalance(snap, {"registry_version": 1}).params["basis"] == (
        "capacity: 3 by SM share"
    )


def test_a_backend_without_enough_samples_is_counted_by_its_peers_req_per_s_per_sm() -> None:
    # b1 and b3 measured (10/42 and 20/132 req/s per SM: median 0.195), b2 only 5 samples
    def b2(i: int) -> tuple[float, float, float]:
        return (1.0, 200.0, 10.0) if i >= 55 else (0.0, 200.0, 0.0)

    snap = snapshot({"b1": steady(2.0, 20.0), "b2": b2, "b3": steady(6.0, 30.0)})
    reason = reasons_of(snap)["b2"]
    assert reason.startswith("SM share (14 SMs × 0.195 in flight per SM sustained by its peers)")
    assert "5 of 20 samples within SLO needed" in reason


def test_no_capacity_known_keeps_the_weights() -> None:
    snap = snapshot({}, samples=1, weights={"b1": 2.0, "b2": 3.0}, slots={})
    plan = rebalance.plan_rebalance(snap, {"registry_version": 1})
    assert plan.params["weights"] == {"b1": 2.0, "b2": 3.0}
    assert [p.name for p in plan.failed_preconditions] == ["changes"]


def test_no_capacity_known_says_why_instead_of_sm_count_n_a() -> None:
    """The lab's case: its registry names MIG slots no GPU source reports; a slot read from
    DCGM (no SM count); SMs known but no measured peer to scale them by."""
    no_source = snapshot({}, samples=1, weights={"b1": 1.0, "b2": 1.0}, slots={})
    assert reasons_of(no_source) == {
        n: f"no capacity known (no GPU source (NVML, DCGM) reports its slot {ON[n]}, so "
        "neither its activity nor its SM count is known): kept"
        for n in ("b1", "b2")
    }
    dcgm = {n: Slot(n, SlotKind.MIG, activity_pct=50.0) for n in ("h/gpu0/gi1", "h/gpu0/gi2")}
    few = snapshot(
        {"b1": steady(2.0, 20.0), "b2": steady(1.0, 10.0)},
        samples=MIN_SAMPLES - 8,
        weights={"b1": 1.0, "b2": 1.0},
        slots=dcgm,
    )
    assert reasons_of(few)["b2"] == (
        "no capacity known (12 of 20 samples within SLO needed; slot h/gpu0/gi2 reports no SM "
        "count (NVML reads it; DCGM's metrics do not carry it)): kept"
    )

    def b2(i: int) -> tuple[float, float, float]:
        return (1.0, 200.0, 10.0) if i >= 55 else (0.0, 200.0, 0.0)

    measured_without_sms = snapshot(
        {"b1": steady(2.0, 20.0), "b2": b2},
        weights={"b1": 1.0, "b2": 1.0},
        slots={"h/gpu0/gi1": dcgm["h/gpu0/gi1"], "h/gpu0/gi2": SLOTS["h/gpu0/gi2"]},
    )
    assert reasons_of(measured_without_sms)["b2"] == (
        "no capacity known (5 of 20 samples within SLO needed; its 14 SMs cannot be scaled: no "
        "measured peer has an SM count): kept"
    )
    assert not any("n/a" in r for snap in (no_source, few) for r in reasons_of(snap).values())


def test_a_change_is_damped_to_a_quarter_per_apply_and_small_ones_are_not_made() -> None:
    snap = snapshot({"b1": steady(1.0, 50.0), "b2": steady(1.0, 50.0), "b3": steady(60.0, 50.0)})
    assert weights_of(snap) == {"b1": 1 - MAX_STEP, "b2": 1 - MAX_STEP, "b3": 1 + MAX_STEP}
    # capacities within 1 % of what the weights already say: nothing moves
    near = snapshot({"b1": steady(1.0, 50.0), "b2": steady(1.01, 50.0), "b3": steady(1.0, 50.0)})
    plan = rebalance.plan_rebalance(near, {"registry_version": 1})
    assert plan.params["weights"] == {"b1": 1.0, "b2": 1.0, "b3": 1.0}
    assert [p.name for p in plan.failed_preconditions] == ["changes"]


def test_a_backend_over_its_slo_is_not_raised() -> None:
    series = {"b1": steady(1.0, 50.0), "b2": steady(1.0, 50.0), "b3": steady(60.0, 50.0)}
    latency = {"b3": LatencyStats("b3", req_per_s=60.0, p95_ms=2500.0)}
    snap = snapshot(series, latency=latency)
    assert weights_of(snap)["b3"] == 1.0
    assert reasons_of(snap)["b3"].endswith("over SLO (p95 2.5 s > 1.0 s): not raised")


def test_a_backend_on_a_saturated_slot_is_not_raised() -> None:
    series = {"b1": steady(1.0, 50.0), "b2": steady(1.0, 50.0), "b3": steady(60.0, 50.0)}
    slots = {**SLOTS, "h/gpu1": Slot("h/gpu1", SlotKind.GPU, sm_count=132, activity_pct=97.0)}
    snap = snapshot(series, slots=slots)
    assert weights_of(snap)["b3"] == 1.0
    assert "slot saturated (activity 97%): not raised" in reasons_of(snap)["b3"]


def test_a_backend_with_an_alert_on_its_slot_is_not_raised() -> None:
    series = {"b1": steady(1.0, 50.0), "b2": steady(1.0, 50.0), "b3": steady(60.0, 50.0)}
    alert = Alert("low_memory:h/gpu1", "low_memory", "h/gpu1", Severity.CRITICAL, "low", 0.0)
    snap = snapshot(series, alerts=(alert,))
    assert weights_of(snap)["b3"] == 1.0
    assert "alert low_memory: not raised" in reasons_of(snap)["b3"]


def test_a_backend_with_a_noisy_neighbour_is_lowered_whatever_its_capacity() -> None:
    series = {"b1": steady(1.0, 50.0), "b2": steady(1.0, 50.0), "b3": steady(60.0, 50.0)}
    rogue = ComputeProcess(31337, "python3 train_lora.py", 3800.0)
    noisy = Slot(
        "h/gpu1",
        SlotKind.GPU,
        sm_count=132,
        processes=(ComputeProcess(3, "tritonserver"), rogue),
    )
    snap = snapshot(series, slots={**SLOTS, "h/gpu1": noisy})
    assert weights_of(snap)["b3"] == 1 - MAX_STEP
    assert (
        "co-tenant process python3 train_lora.py (pid 31337) on h/gpu1: lowered"
        in reasons_of(snap)["b3"]
    )


def test_the_server_process_itself_is_not_a_noisy_neighbour() -> None:
    series = {"b1": steady(1.0, 50.0), "b2": steady(1.0, 50.0), "b3": steady(60.0, 50.0)}
    own = Slot("h/gpu1", SlotKind.GPU, sm_count=132, processes=(ComputeProcess(3, "python3 x"),))
    assert weights_of(snapshot(series, slots={**SLOTS, "h/gpu1": own}))["b3"] == 1 + MAX_STEP


def test_a_lone_backend_and_a_weight_0_are_kept() -> None:
    lone = snapshot({"b1": steady(1.0, 50.0)}, weights={"b1": 2.0})
    assert reasons_of(lone)["b1"].startswith("the only active backend serving m")
    zero = snapshot(
        {"b1": steady(1.0, 50.0), "b2": steady(1.0, 50.0), "b3": steady(9.0, 50.0)},
        weights={"b1": 0.0, "b2": 1.0, "b3": 1.0},
    )
    assert weights_of(zero)["b1"] == 0.0
    assert "rebalance does not start its traffic" in reasons_of(zero)["b1"]


def test_a_shared_slot_splits_its_activity_by_the_work_each_backend_did() -> None:
    vm = Slot(
        "vm:v",
        SlotKind.VM,
        sm_count=128,
        vm=VmInfo("v", mps=MpsState(True, 100.0, (("b1", 60.0), ("b2", 40.0)))),
    )
    backends = {n: Backend(n, slot_id="vm:v", model=n) for n in ("b1", "b2")}
    history = History()
    for i in range(30):
        history = history.append(
            float(i),
            {
                "slot:vm:v:activity": 60.0,
                "backend:b1:rps": 2.0,
                "backend:b1:p95": 300.0,
                "backend:b1:service_ms": 200.0,  # 0.4 busy-seconds per second
                "backend:b2:rps": 1.0,
                "backend:b2:p95": 300.0,
                "backend:b2:service_ms": 200.0,  # 0.2
            },
        )
    snap = Snapshot(taken_at=29.0, backends=backends, slots={"vm:v": vm}, history=history)
    # b1 did two thirds of the work: 40 % of the activity, so 2 req/s / 0.4 = 5 req/s, and
    # 0.4 s of work each second / 0.4 = 1 request in flight
    assert sustained(snap, backends["b1"]).req_per_s == pytest.approx(5.0)
    assert sustained(snap, backends["b1"]).in_flight == pytest.approx(1.0)
    assert sustained(snap, backends["b2"]).req_per_s == pytest.approx(5.0)
    assert sm_share(snap, backends["b1"]) == pytest.approx(76.8)  # its MPS thread share
    without_times = Snapshot(taken_at=29.0, backends=backends, slots={"vm:v": vm})
    assert sustained(without_times, backends["b1"]).in_flight is None


def test_two_looks_at_an_unchanged_fleet_propose_the_same_weights() -> None:
    rng = random.Random(4)
    noise = [(rng.gauss(0, 0.15), rng.gauss(0, 3.0)) for _ in range(400)]

    def noisy(rps: float, act: float) -> Series:
        # rates rounded to 0.01 and activity jittering by a few points, as the fleet shows them
        return lambda i: (
            round(rps * (1 + noise[i][0] / 3), 2),
            400.0,
            max(5.0, act + noise[(i * 7) % 400][1]),
        )

    # capacities near 1, 0.8 and 1.25 req/s: targets inside the damping, so noise would show
    series = {"b1": noisy(0.3, 30.0), "b2": noisy(0.2, 25.0), "b3": noisy(0.5, 40.0)}
    weights = {"b1": 1.1, "b2": 0.8, "b3": 1.3}
    looks = [weights_of(snapshot(series, 120, start, weights)) for start in range(0, 60, 5)]
    for a, b in itertools.pairwise(looks):
        for name in a:
            assert b[name] == pytest.approx(a[name], rel=0.02)
