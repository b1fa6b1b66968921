"""The fleet screen's action keys on the simulated fleet: `d` plans, confirms and drains."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.widgets import Button

from gpucon.actions.audit import read_audit
from gpucon.config import GpuconConfig
from gpucon.model.fleet import BackendState
from gpucon.screens.audit import AuditScreen
from gpucon.screens.plan import PlanScreen
from gpucon.screens.progress import ProgressScreen
from gpucon.session import demo_controls
from tests.ui.rig import sim_rig

SIZE = (160, 45)


async def wait_for(pilot: Any, check: Any, step: Any = None, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        if step is not None:
            step()
        await pilot.pause(0.02)


async def test_drain_key_in_the_demo_drains_the_selected_backend(tmp_path: Path) -> None:
    rig = sim_rig()
    source: Any = rig.source
    fleet = source.fleet
    controls = demo_controls(
        GpuconConfig(audit_path=tmp_path / "audit.jsonl", operator="demo@test"), fleet
    )
    app = rig.app(controls=controls)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        await pilot.pause()
        plan_screen = app.screen
        assert isinstance(plan_screen, PlanScreen)
        name = plan_screen.plan.target
        assert app.focused is not None and app.focused.id == "cancel"
        assert str(plan_screen.query_one("#confirm", Button).label) == f"Drain {name}"
        await pilot.click("#confirm")
        await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        # the simulated fleet moves on while the drain waits for in-flight work
        await wait_for(pilot, lambda: progress.finished, step=lambda: fleet.step(0.5))
        assert progress.outcome is not None and progress.outcome.ok, progress.outcome
        backend = fleet.backend(name)
        assert backend.state is BackendState.DRAINED and backend.owner == "demo@test"
        fleet.step(20.0)
        assert fleet.backend(name).inflight == 0  # the demo's traffic went elsewhere
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ProgressScreen))
        await pilot.press("A")
        await wait_for(pilot, lambda: isinstance(app.screen, AuditScreen))
    # the demo's own file, its fleet named; the live fleet's file is untouched
    records = read_audit(tmp_path / "audit-demo.jsonl")
    assert records[0].event == "intent" and records[-1].event == "outcome"
    assert {r.fleet for r in records} == {"simulated"}
    assert not (tmp_path / "audit.jsonl").exists()


async def test_probe_key_in_the_demo_probes_any_backend(tmp_path: Path) -> None:
    rig = sim_rig()
    source: Any = rig.source
    controls = demo_controls(
        GpuconConfig(audit_path=tmp_path / "audit.jsonl", operator="demo@test"), source.fleet
    )
    app = rig.app(controls=controls)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"bert", "enter")  # select the bert-base backend's row
        await pilot.pause()
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        await pilot.pause()
        plan_screen = app.screen
        assert isinstance(plan_screen, PlanScreen)
        # no probe target is configured: in the demo the selected backend is the target
        assert plan_screen.plan.target == "bert-base-b0-gi2"
        assert plan_screen.plan.params["simulated"] is True
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.click("#confirm")
        await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await wait_for(pilot, lambda: progress.finished)
        outcome = progress.outcome
        assert outcome is not None and outcome.ok, outcome
        assert outcome.details["mode"] == "sim" and outcome.details["succeeded"] == 40
        shown = progress.outcome_text().plain
        assert "probe of bert-base-b0-gi2: 40/40 ok" in shown and "p95" in shown
        assert "probe" in progress.steps_text().plain and "report" in progress.steps_text().plain
    records = read_audit(tmp_path / "audit-demo.jsonl")
    assert records[0].event == "intent" and records[-1].status == "ok"


async def test_mps_restart_key_restarts_the_selected_vms_daemon(tmp_path: Path) -> None:
    """`m` on a VM's row: a tier-2 plan naming the VM (drain first), then the restart; the
    VM's daemon is back and its servers serve again."""
    rig = sim_rig()
    source: Any = rig.source
    fleet = source.fleet
    controls = demo_controls(
        GpuconConfig(audit_path=tmp_path / "audit.jsonl", operator="demo@test"), fleet
    )
    app = rig.app(controls=controls)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"sd15-vm-b-1", "enter")  # select the VM's row
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        await pilot.pause()
        plan_screen = app.screen
        assert isinstance(plan_screen, PlanScreen)
        plan = plan_screen.plan
        assert (plan.action, plan.target) == ("mps-restart", "vm-b-1")
        assert plan.steps[0].key.startswith("draining:")
        assert app.focused is not None and app.focused.id == "cancel"
        assert "vm-b-1" in str(plan_screen.query_one("#confirm", Button).label)
        await pilot.click("#confirm")
        await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await wait_for(pilot, lambda: progress.finished, step=lambda: fleet.step(0.5), timeout_s=60)
        assert progress.outcome is not None and progress.outcome.ok, progress.outcome
    mps = fleet.vm_mps("vm-b-1")
    assert mps is not None and mps.daemon_running is True
    assert fleet.backend("sdxl-vm-b-1").state is BackendState.ACTIVE
    assert fleet.backend("sdxl-vm-b-1").ready is True


async def test_mps_restart_key_on_a_slot_without_a_daemon_says_so(tmp_path: Path) -> None:
    rig = sim_rig()
    source: Any = rig.source
    controls = demo_controls(GpuconConfig(audit_path=tmp_path / "audit.jsonl"), source.fleet)
    app = rig.app(controls=controls)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"bert", "enter")
        await pilot.press("m")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, PlanScreen)
        said = [n.message for n in app._notifications]
        assert any("no MPS daemon serves the selected slot" in m for m in said), said
