"""The simulated fleet: determinism, the default fleet's make-up, the scheduler, the write side."""

from __future__ import annotations

import math
import random
import statistics
import threading

import msgspec
import pytest

from gpucon.model.fleet import BackendState, Health, SlotKind
from gpucon.model.ids import parse_slot_id
from gpucon.model.reading import Reading
from gpucon.sim import build_sim_fleet
from gpucon.sim.catalog import A100_80GB
from gpucon.sim.fleet import SimFleet
from gpucon.sim.layout import default_fleet, placed_starts


def run(fleet: SimFleet, seconds: int, start: float = 1000.0) -> list[Reading]:
    readings = []
    for i in range(seconds):
        fleet.step(1.0)
        readings.append(fleet.reading(start + i))
    return readings


def without_timing(r: Reading) -> Reading:
    return msgspec.structs.replace(r, duration_s=0.0)


def test_same_seed_and_steps_give_the_same_readings() -> None:
    a = [without_timing(r) for r in run(build_sim_fleet(seed=3), 90)]
    b = [without_timing(r) for r in run(build_sim_fleet(seed=3), 90)]
    assert a == b


def test_another_seed_gives_another_fleet() -> None:
    a = run(build_sim_fleet(seed=3), 30)[-1]
    b = run(build_sim_fleet(seed=4), 30)[-1]
    assert [g.uuid for g in a.gpus] != [g.uuid for g in b.gpus]
    assert [lat.p95_ms for lat in a.latency] != [lat.p95_ms for lat in b.latency]


def test_the_default_fleet_is_the_one_the_issue_describes() -> None:
    r = build_sim_fleet().reading(0.0)
    assert r.source == "sim" and r.health is Health.OK
    slots = {s.id: s for s in r.slots}
    assert {
        sid: (s.profile, s.sm_count, s.mem_total_mib)
        for sid, s in slots.items()
        if s.kind is SlotKind.MIG
    } == {
        "node-a/gpu0/gi1": ("3g.40gb", 42, 40192.0),
        "node-a/gpu0/gi2": ("2g.20gb", 28, 19968.0),
        "node-a/gpu0/gi3": ("1g.10gb", 14, 9728.0),
        "node-b/gpu0/gi1": ("3g.20gb", 42, 20096.0),
        "node-b/gpu0/gi2": ("2g.10gb", 28, 9856.0),
        "node-b/gpu0/gi3": ("1g.5gb", 14, 4864.0),
    }
    h200 = slots["node-c/gpu0"]
    assert (h200.kind, h200.sm_count, h200.gpu_name) == (SlotKind.GPU, 132, "NVIDIA H200")
    for vm_name in ("vm-b-1", "vm-b-2"):
        vm_slot = slots[f"vm:{vm_name}"]
        assert vm_slot.kind is SlotKind.VM and vm_slot.vm is not None
        assert vm_slot.gpu_name == "NVIDIA GeForce RTX 4090"
        assert vm_slot.vm.mps is not None and vm_slot.vm.mps.daemon_running
        assert [pct for _, pct in vm_slot.vm.mps.thread_pct_by_server] == [60.0, 40.0]
    models = {b.name: (b.model, b.slot_id) for b in r.backends}
    assert models["sdxl-a0-gi1"] == ("sdxl", "node-a/gpu0/gi1")
    assert models["sdxl-a0-gi2"] == ("sdxl", "node-a/gpu0/gi2")
    assert models["sd15-a0-gi3"] == ("sd15", "node-a/gpu0/gi3")
    assert [models[n][0] for n in ("sd15-b0-gi1", "bert-base-b0-gi2", "resnet50-b0-gi3")] == [
        "sd15",
        "bert-base",
        "resnet50",
    ]
    assert models["sdxl-c0"] == ("sdxl", "node-c/gpu0")
    assert {n for n, (_, sid) in models.items() if sid == "vm:vm-b-1"} == {
        "sdxl-vm-b-1",
        "sd15-vm-b-1",
    }
    gpus = {(g.host, g.index): g for g in r.gpus}
    assert gpus["node-a", 0].name == "NVIDIA A100-SXM4-80GB" and gpus["node-a", 0].mig_enabled
    assert gpus["node-b", 0].name == "NVIDIA A100-PCIE-40GB"
    assert gpus["node-c", 0].sm_count == 132 and gpus["node-c", 0].mig_enabled is False


def test_every_mig_layout_of_the_demo_is_one_nvml_would_place() -> None:
    layouts = {}
    for gpu in default_fleet(random.Random(0)).gpus:
        if not gpu.mig_enabled:
            continue
        assert gpu.gpu_type.profiles is not None
        names = [s.profile for s in gpu.slots]
        assert gpu.gpu_type.profiles.validate_layout(names) == [], (gpu.host, names)
        # each instance placed where its profile may start, none overlapping
        cells = [set(range(s.placement[0], sum(s.placement))) for s in gpu.slots if s.placement]
        assert len(cells) == len(names) and sum(map(len, cells)) == len(set().union(*cells))
        layouts[gpu.host] = (names, [s.placement for s in gpu.slots])
    assert layouts["node-a"] == (["3g.40gb", "2g.20gb", "1g.10gb"], [(0, 4), (4, 2), (6, 1)])
    assert layouts["node-b"] == (["3g.20gb", "2g.10gb", "1g.5gb"], [(0, 4), (4, 2), (6, 1)])


def test_a_layout_nvml_would_refuse_is_refused_when_the_fleet_is_built() -> None:
    # 2 × 3g.40gb covers all 8 of an A100-80GB's memory slices: no start is left for a 1g.10gb
    with pytest.raises(ValueError, match=r"3g.40gb \+ 3g.40gb \+ 1g.10gb: no placement"):
        placed_starts(A100_80GB, ("3g.40gb", "3g.40gb", "1g.10gb"))
    assert A100_80GB.profiles is not None
    assert A100_80GB.profiles.validate_layout(["3g.40gb", "3g.40gb", "1g.10gb"]) != []


def test_every_entity_is_filled_and_consistent() -> None:
    r = run(build_sim_fleet(), 5)[-1]
    slot_ids = {s.id for s in r.slots}
    for s in r.slots:
        parse_slot_id(s.id)
        assert s.activity_pct is not None and 0.0 <= s.activity_pct <= 100.0
        assert s.mem_used_mib is not None and s.mem_total_mib is not None
        assert 0 < s.mem_used_mib < s.mem_total_mib
    for b in r.backends:
        assert b.slot_id in slot_ids and b.url and b.model and b.weight == 1.0
        assert b.state is BackendState.ACTIVE and b.ready and b.inflight is not None
    assert {lat.key for lat in r.latency} == {b.name for b in r.backends}
    for lat in r.latency:
        assert lat.p50_ms is not None and lat.p95_ms is not None and lat.p99_ms is not None
        assert lat.p50_ms <= lat.p95_ms <= lat.p99_ms
        assert lat.req_per_s and lat.req_per_s > 0 and lat.queue_ms is not None
    (q,) = r.queues
    assert (q.stream, q.group) == ("gen:queue", "g1")
    assert q.length is not None and q.pending is not None and q.lag is not None
    assert q.length == q.pending + q.lag and q.oldest_age_s is not None


def rate(r: Reading, name: str) -> float:
    stats = {lat.key: lat for lat in r.latency}[name]
    assert stats.req_per_s is not None
    return stats.req_per_s


def test_the_scheduler_sends_work_in_proportion_to_weight() -> None:
    fleet = build_sim_fleet()
    before = run(fleet, 60)[-1]
    # two SDXL servers on twin RTX 4090s
    assert rate(before, "sdxl-vm-b-1") == pytest.approx(rate(before, "sdxl-vm-b-2"), rel=0.2)
    fleet.set_weights({"sdxl-vm-b-1": 3.0, "sdxl-vm-b-2": 1.0})
    after = run(fleet, 120)[-1]
    assert rate(after, "sdxl-vm-b-1") > 2.0 * rate(after, "sdxl-vm-b-2")


def test_a_drained_backend_gets_no_new_work_and_its_inflight_goes_to_zero() -> None:
    fleet = build_sim_fleet()
    run(fleet, 30)
    name = "bert-base-b0-gi2"  # busy enough to have work in flight at any moment
    assert fleet.pending_for(name) > 0
    version = fleet.registry_version()
    fleet.set_backend_state(name, BackendState.DRAINING, "alice@host", "drain for test")
    assert fleet.registry_version() == version + 1
    pending = []
    for _ in range(20):
        fleet.step(1.0)
        pending.append(fleet.pending_for(name))
    assert pending == sorted(pending, reverse=True)  # never a new request
    assert pending[-1] == 0
    b = fleet.backend(name)
    assert (b.state, b.owner, b.reason, b.inflight) == (
        BackendState.DRAINING,
        "alice@host",
        "drain for test",
        0,
    )
    later = run(fleet, 60)[-1]
    assert rate(later, name) < 0.05 * rate(later, "resnet50-b0-gi3")
    assert {x.name: x for x in later.backends}[name].inflight == 0


def test_losing_capacity_raises_queue_depth_and_p95() -> None:
    def sdxl_load(drain: bool) -> tuple[float, float]:
        fleet = build_sim_fleet(seed=11)
        if drain:
            for name in ("sdxl-c0", "sdxl-vm-b-1"):
                fleet.set_backend_state(name, BackendState.DRAINED, "t", "capacity test")
        readings = run(fleet, 240)[-120:]
        p95 = statistics.mean(
            lat.p95_ms or 0.0 for r in readings for lat in r.latency if lat.key == "sdxl-a0-gi1"
        )
        depth = statistics.mean(float(r.queues[0].length or 0) for r in readings)
        return p95, depth

    p95_full, depth_full = sdxl_load(drain=False)
    p95_less, depth_less = sdxl_load(drain=True)
    assert p95_less > 1.3 * p95_full
    assert depth_less > 1.5 * depth_full


def test_bad_weights_are_refused_and_change_nothing() -> None:
    fleet = build_sim_fleet()
    version = fleet.registry_version()
    bad_weights: list[dict[str, float]] = [
        {"sdxl-a0-gi1": 2.0, "sdxl-c0": math.nan},
        {"sdxl-c0": -1.0},
        {"sdxl-c0": math.inf},
        {"sdxl-c0": True},
    ]
    for bad in bad_weights:
        with pytest.raises(ValueError, match="weights\\['sdxl-c0'\\]"):
            fleet.set_weights(bad)
    with pytest.raises(KeyError, match="nope"):
        fleet.set_weights({"sdxl-a0-gi1": 2.0, "nope": 1.0})
    with pytest.raises(KeyError, match="nope"):
        fleet.set_backend_state("nope", BackendState.DRAINING, None, None)
    with pytest.raises(ValueError, match="state: expected one of active, draining"):
        fleet.set_backend_state("sdxl-c0", "resting", None, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dt_s"):
        fleet.step(math.inf)
    assert fleet.registry_version() == version
    assert fleet.backend("sdxl-a0-gi1").weight == 1.0
    assert fleet.backend("sdxl-c0").state is BackendState.ACTIVE


def test_reads_and_writes_from_two_threads_do_not_collide() -> None:
    fleet = build_sim_fleet()
    names = fleet.backend_names()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            i = 0
            while not stop.is_set():
                name = names[i % len(names)]
                fleet.set_backend_state(name, BackendState.DRAINING, "w", None)
                fleet.set_weights({name: 0.5 + (i % 3)})
                fleet.set_backend_state(name, BackendState.ACTIVE, "w", None)
                i += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        readings = run(fleet, 200)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert fleet.registry_version() > 0 and len(readings[-1].backends) == len(names)
