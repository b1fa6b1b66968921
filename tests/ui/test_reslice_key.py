"""The re-slice key in the demo: `X` asks for the layout, shows the dry run, unlocks only when
the GPU's name is typed, and re-slices the simulated GPU; on a row no GPU source reports, it
says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, Input

from gpucon.actions.audit import read_audit
from gpucon.errors import BadParams
from gpucon.model.fleet import Backend, SlotKind
from gpucon.model.snapshot import Snapshot
from gpucon.screens.actions_flow import reslice_target
from gpucon.screens.reslice_prompt import ReslicePrompt
from tests.ui.action_pilot import confirm_plan, open_plan
from tests.ui.rig import demo_console, wait_until
from tests.ui.test_action_screens_demo import SIZE

GPU = "node-a/gpu0"


async def test_reslice_key_needs_the_gpu_name_typed_then_reslices(tmp_path: Path) -> None:
    app, fleet, _ = demo_console(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"node-a", "enter")  # a row of the A100 on node-a
        await pilot.pause()
        await pilot.press("X")
        await wait_until(pilot, lambda: isinstance(app.screen, ReslicePrompt))
        prompt = app.screen
        assert isinstance(prompt, ReslicePrompt) and prompt.gpu == GPU
        assert prompt.now == "1 × 3g.40gb + 1 × 2g.20gb + 1 × 1g.10gb"
        await pilot.press(*"4g.40gb+2g.20gb+1g.10gb", "enter")
        plan_screen = await open_plan(pilot)
        assert plan_screen.plan.action == "reslice" and plan_screen.plan.target == GPU
        assert plan_screen.query_one("#dry-run")  # tier 3: the dry run is shown first
        confirm = plan_screen.query_one("#confirm", Button)
        assert confirm.disabled
        box = plan_screen.query_one("#confirm-name", Input)
        box.focus()
        await pilot.press(*"node-a")  # not the name yet
        await pilot.pause()
        assert confirm.disabled
        await pilot.press(*"/gpu0")
        await pilot.pause()
        assert not confirm.disabled
        progress = await confirm_plan(pilot)
        await wait_until(pilot, lambda: progress.finished, step=lambda: fleet.step(0.5))
        assert progress.outcome is not None and progress.outcome.ok, progress.outcome
    reading = fleet.reading(0.0)
    profiles = sorted(
        (s.id, s.profile) for s in reading.slots if s.kind is SlotKind.MIG and s.id.startswith(GPU)
    )
    assert profiles == [
        (f"{GPU}/gi1", "4g.40gb"),
        (f"{GPU}/gi2", "2g.20gb"),
        (f"{GPU}/gi3", "1g.10gb"),
    ]
    records = read_audit(tmp_path / "audit-demo.jsonl")
    assert records[0].event == "intent" and records[-1].status == "ok"
    assert {r.action for r in records} == {"reslice"}


async def test_reslice_key_on_a_gpu_without_mig_says_why(tmp_path: Path) -> None:
    app = demo_console(tmp_path, operator=None).app
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"vm-b-1", "enter")  # an RTX 4090 passed through to a VM
        await pilot.pause()
        await pilot.press("X")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ReslicePrompt)
        shown = [str(n.message) for n in app._notifications]
        assert any("offers no MIG profiles" in m for m in shown), shown


def test_reslice_on_a_slot_no_gpu_source_reports_says_so() -> None:
    # the lab: backends name their slots, no NVML, DCGM or libvirt source reports a GPU
    snap = Snapshot(taken_at=1.0, backends={"lab-b0": Backend("lab-b0", slot_id="lab/gpu0/gi1")})
    with pytest.raises(BadParams) as caught:
        reslice_target(snap, "lab/gpu0/gi1")
    assert caught.value.field == "gpu"
    assert str(caught.value) == (
        "gpu: no GPU source (NVML, DCGM or libvirt) reports lab/gpu0 nor slot lab/gpu0/gi1: "
        "nothing to re-slice there"
    )
    with pytest.raises(BadParams, match="the selected row has no slot"):
        reslice_target(snap, None)
