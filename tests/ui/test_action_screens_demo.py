"""The fleet screen's action keys on the simulated fleet: `d` plans, confirms and drains."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.widgets import Button

from gpucon.actions.audit import read_audit
from gpucon.controls.sim_registry import build_sim_controls
from gpucon.model.fleet import BackendState
from gpucon.screens.audit import AuditScreen
from gpucon.screens.plan import PlanScreen
from gpucon.screens.progress import ProgressScreen
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
    controls = build_sim_controls(
        fleet, read_only=False, audit_path=tmp_path / "audit.jsonl", operator="demo@test"
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
    events = [r.event for r in read_audit(tmp_path / "audit.jsonl")]
    assert events[0] == "intent" and events[-1] == "outcome"


async def test_probe_key_in_the_demo_probes_any_backend(tmp_path: Path) -> None:
    rig = sim_rig()
    source: Any = rig.source
    controls = build_sim_controls(
        source.fleet, read_only=False, audit_path=tmp_path / "audit.jsonl", operator="demo@test"
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
    records = read_audit(tmp_path / "audit.jsonl")
    assert records[0].event == "intent" and records[-1].status == "ok"
