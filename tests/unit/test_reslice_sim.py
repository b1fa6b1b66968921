"""Re-slice in the demo: the simulated GPU's slots and capacity change, its backends are out
briefly (drained, then on their new slots), and their p95 settles where the new SMs put it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gpucon.actions import reslice, reslice_apply
from gpucon.actions.guard import execute
from gpucon.actions.plan import ProgressEvent
from gpucon.config import GpuconConfig
from gpucon.errors import BadParams
from gpucon.model.fleet import BackendState, SlotKind
from gpucon.model.snapshot import Snapshot
from gpucon.session import demo_controls
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.runner import DemoFleetRunner

GPU = "node-a/gpu0"
NEW = "4g.40gb+2g.20gb+1g.10gb"


def mig_slots(snapshot: Snapshot) -> dict[str, tuple[str | None, int | None]]:
    return {
        s.id: (s.profile, s.sm_count)
        for s in snapshot.slots.values()
        if s.kind is SlotKind.MIG and s.id.startswith(GPU)
    }


def test_a_demo_reslice_changes_slots_and_capacity_with_a_brief_outage(tmp_path: Path) -> None:
    runner = DemoFleetRunner(build_sim_fleet(7))
    fleet = runner.fleet
    fleet.step(120.0)
    before = runner.snapshot()
    assert mig_slots(before) == {
        f"{GPU}/gi1": ("3g.40gb", 42),
        f"{GPU}/gi2": ("2g.20gb", 28),
        f"{GPU}/gi3": ("1g.10gb", 14),
    }
    started = time.perf_counter()
    plan = reslice.plan_reslice(
        before,
        {"gpu": GPU, "layout": NEW, "executor": "simulated", "poll_s": 0.01, "timeout_s": 60},
    )
    plan_ms = (time.perf_counter() - started) * 1000
    assert plan.ok, plan.failed_preconditions
    assert plan_ms < 100, plan_ms  # pure and small: about 1 ms here
    assert "capacity of sdxl on node-a/gpu0: 70 → 84 SMs, 58.8 → 58.8 GiB" in plan.changes
    assert "capacity of sd15 on node-a/gpu0: 14 → 14 SMs, 9.5 → 9.5 GiB" in plan.changes

    controls = demo_controls(GpuconConfig(audit_path=tmp_path / "a.jsonl"), fleet)
    seen: dict[tuple[str, str], float] = {}
    took_work_while_out: list[str] = []

    def progress(event: ProgressEvent) -> None:
        seen.setdefault((event.step, str(event.status)), fleet.virtual_time)
        if event.step.startswith("create:"):  # mid-way: no backend of the GPU takes work
            for name in plan.blast_radius.backends:
                if fleet.backend(name).state is BackendState.ACTIVE:
                    took_work_while_out.append(name)

    stop = threading.Event()

    def tick() -> None:  # the demo's fleet moves on while the action runs
        while not stop.wait(0.005):
            fleet.step(0.5)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        outcome = execute(reslice_apply.apply_reslice, plan, controls, progress)
    finally:
        stop.set()
        ticker.join()
    assert outcome.ok, outcome
    assert took_work_while_out == []
    out_from = min(t for (step, _), t in seen.items() if step.startswith("draining:"))
    out_to = max(t for (step, _), t in seen.items() if step.startswith("active:"))
    assert 0 < out_to - out_from < 30  # a brief outage: simulated seconds (1 tick = 1 s)

    fleet.step(60.0)
    after = runner.snapshot()
    assert mig_slots(after) == {
        f"{GPU}/gi1": ("4g.40gb", 56),
        f"{GPU}/gi2": ("2g.20gb", 28),
        f"{GPU}/gi3": ("1g.10gb", 14),
    }
    moved = {n: after.backends[n] for n in plan.blast_radius.backends}
    assert all(b.state is BackendState.ACTIVE and b.weight for b in moved.values())
    # the bigger slot (3g → 4g) serves sdxl faster; both within the SLO again
    p95 = {n: after.latency[n].p95_ms or 0.0 for n in moved if n.startswith("sdxl")}
    was = {n: before.latency[n].p95_ms or 0.0 for n in p95}
    on_4g = next(n for n, b in moved.items() if b.slot_id == f"{GPU}/gi1")
    on_2g = next(n for n, b in moved.items() if b.slot_id == f"{GPU}/gi2")
    assert 0 < p95[on_4g] < was[on_4g]
    assert p95[on_2g] > p95[on_4g]
    assert all(0 < v < after.slo_p95_ms[n] for n, v in p95.items())


def test_an_unknown_gpu_or_a_bad_layout_is_refused_by_field() -> None:
    snapshot = DemoFleetRunner(build_sim_fleet(7)).snapshot()
    with pytest.raises(BadParams, match="gpu: unknown GPU"):
        reslice.plan_reslice(snapshot, {"gpu": "node-z/gpu9", "layout": "7g.80gb"})
    with pytest.raises(BadParams, match="layout: item 1"):
        reslice.plan_reslice(snapshot, {"gpu": GPU, "layout": "lots"})
    plan = reslice.plan_reslice(snapshot, {"gpu": "node-c/gpu0", "layout": "7g.141gb"})
    assert [p.name for p in plan.failed_preconditions] == ["mig_enabled"]
    plan = reslice.plan_reslice(snapshot, {"gpu": GPU, "layout": "7g.80gb", "drain": False})
    assert {p.name for p in plan.failed_preconditions} == {
        "drained:sdxl-a0-gi1",
        "drained:sdxl-a0-gi2",
        "drained:sd15-a0-gi3",
    }


def test_a_model_with_no_other_backend_needs_force() -> None:
    snapshot = DemoFleetRunner(build_sim_fleet(7)).snapshot()
    params = {"gpu": "node-b/gpu0", "layout": "7g.40gb"}  # bert-base and resnet50 live only here
    plan = reslice.plan_reslice(snapshot, params)
    failed = {p.name: p.text for p in plan.failed_preconditions}
    assert set(failed) == {"others_serving:bert-base", "others_serving:resnet50"}
    assert "nothing would serve model bert-base" in failed["others_serving:bert-base"]
    assert reslice.plan_reslice(snapshot, {**params, "force": True}).ok
