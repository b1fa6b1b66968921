"""The fleet screen's action keys on the simulated fleet: `d` plans, confirms and drains."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button, Input, Static

from gpucon.actions.audit import read_audit
from gpucon.model.fleet import BackendState
from gpucon.screens.audit import AuditScreen
from gpucon.screens.plan import PlanScreen
from gpucon.screens.progress import ProgressScreen
from tests.ui.action_pilot import confirm_plan, open_plan, refused
from tests.ui.rig import demo_console, wait_until

SIZE = (160, 45)


async def test_drain_key_in_the_demo_drains_the_selected_backend(tmp_path: Path) -> None:
    app, fleet, _ = demo_console(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        plan_screen = await open_plan(pilot, "d")
        name = plan_screen.plan.target
        assert app.focused is not None and app.focused.id == "cancel"
        assert str(plan_screen.query_one("#confirm", Button).label) == f"Drain {name}"
        progress = await confirm_plan(pilot)
        # the simulated fleet moves on while the drain waits for in-flight work
        await wait_until(pilot, lambda: progress.finished, step=lambda: fleet.step(0.5))
        assert progress.outcome is not None and progress.outcome.ok, progress.outcome
        backend = fleet.backend(name)
        assert backend.state is BackendState.DRAINED and backend.owner == "demo@test"
        fleet.step(20.0)
        assert fleet.backend(name).inflight == 0  # the demo's traffic went elsewhere
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ProgressScreen))
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, AuditScreen))
    # the demo's own file, its fleet named; the live fleet's file is untouched
    records = read_audit(tmp_path / "audit-demo.jsonl")
    assert records[0].event == "intent" and records[-1].event == "outcome"
    assert {r.fleet for r in records} == {"simulated"}
    assert not (tmp_path / "audit.jsonl").exists()


async def test_probe_key_in_the_demo_probes_any_backend(tmp_path: Path) -> None:
    app = demo_console(tmp_path).app
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"bert", "enter")  # select the bert-base backend's row
        await pilot.pause()
        plan_screen = await open_plan(pilot, "p")
        # no probe target is configured: in the demo the selected backend is the target
        assert plan_screen.plan.target == "bert-base-b0-gi2"
        assert plan_screen.plan.params["simulated"] is True
        assert app.focused is not None and app.focused.id == "cancel"
        # a fast backend: many requests by default, chosen from its observed service time
        assert int(plan_screen.query_one("#param-count", Input).value) >= 100
        params_line = next(p for p in plan_screen.plan.preconditions if p.name == "params")
        assert "service time" in params_line.text
        # edit: 30 requests at 60/s, seen in the plan on Enter, then applied
        plan_screen.query_one("#param-count", Input).value = "30"
        plan_screen.query_one("#param-rate", Input).value = "60"
        plan_screen.query_one("#param-rate", Input).focus()
        await pilot.press("enter")
        await pilot.pause()
        assert "send up to 30 requests at 60/s" in plan_screen.plan.steps[0].text
        edited = next(p for p in plan_screen.plan.preconditions if p.name == "params")
        assert edited.text.startswith("count, rate as given; the rest defaults from service")
        progress = await confirm_plan(pilot)
        await wait_until(pilot, lambda: progress.finished)
        outcome = progress.outcome
        assert outcome is not None and outcome.ok, outcome
        assert outcome.details["mode"] == "sim" and outcome.details["succeeded"] == 30
        shown = progress.outcome_text().plain
        assert (
            "probe of bert-base-b0-gi2 ran, verdict " in shown
            and "30/30 ok" in shown
            and "p95" in shown
        )
        # 30 samples within its SLO: the verdict is the backend's, not "too short"
        assert outcome.details["verdict"]["kind"] in ("ok", "slow"), outcome.details["verdict"]
        assert "probe" in progress.steps_text().plain and "report" in progress.steps_text().plain
    records = read_audit(tmp_path / "audit-demo.jsonl")
    assert records[0].event == "intent" and records[-1].status == "ok"


async def test_a_bad_probe_param_is_named_and_nothing_is_sent(tmp_path: Path) -> None:
    app, _, controls = demo_console(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"bert", "enter")
        await pilot.pause()
        plan_screen = await open_plan(pilot, "p")
        for field, value, said in (
            ("rate", "fast", "rate: expected a number"),
            ("concurrency", "99", "concurrency: 99 exceeds the cap 16"),
            ("count", "0", "count: must be ≥ 1"),
        ):
            plan_screen.query_one("#param-rate", Input).value = "20"
            plan_screen.query_one("#param-concurrency", Input).value = "1"
            plan_screen.query_one("#param-count", Input).value = "20"
            box = plan_screen.query_one(f"#param-{field}", Input)
            box.value = value
            await refused(pilot, plan_screen, box, said)
        assert controls.prober is not None
        assert controls.prober.last_sender is None  # type: ignore[attr-defined]
        await pilot.press("escape")
        await pilot.pause()
    assert not (tmp_path / "audit-demo.jsonl").exists()  # no intent was ever written


async def test_a_slow_backends_probe_shows_progress_before_its_first_answer(
    tmp_path: Path,
) -> None:
    app = demo_console(tmp_path).app
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"sd15", "enter")  # a diffusion backend: seconds a request
        await pilot.pause()
        plan_screen = await open_plan(pilot, "p")
        plan = plan_screen.plan
        assert plan.target.startswith("sd15")
        service_s = plan.params["service_s"]
        assert service_s is not None and service_s > 0.5
        # its defaults: a timeout longer than its service time, a rate it sustains
        assert float(plan.params["timeout"]) > 2 * service_s
        assert float(plan.params["rate"]) * service_s <= float(plan.params["concurrency"])
        # a short probe on purpose: 3 requests cannot judge a p95
        plan_screen.query_one("#param-count", Input).value = "3"
        plan_screen.query_one("#param-rate", Input).value = "2"
        plan_screen.query_one("#param-concurrency", Input).value = "3"
        progress = await confirm_plan(pilot)
        # progress from the first request, long before its first answer comes back
        await wait_until(pilot, lambda: "probe" in progress.lines, timeout_s=service_s)
        _status, line, _ = progress.lines["probe"]
        assert "0 ok, 0 failed" in line and "sent" in line and "p50 n/a" in line, line
        await wait_until(pilot, lambda: progress.finished, timeout_s=60.0)
        outcome = progress.outcome
        assert outcome is not None and outcome.ok, outcome
        assert outcome.details["verdict"]["kind"] == "too short"
        shown = progress.outcome_text().plain
        assert "TOO SHORT: " in shown and " sample(s)" in shown, shown
        assert "offered 2" not in shown or "/s of 2/s planned" in shown  # a rate that means it


async def test_mps_restart_key_restarts_the_selected_vms_daemon(tmp_path: Path) -> None:
    """`m` on a VM's row: a tier-2 plan naming the VM (drain first), then the restart; the
    VM's daemon is back and its servers serve again."""
    app, fleet, _ = demo_console(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"sd15-vm-b-1", "enter")  # select the VM's row
        plan_screen = await open_plan(pilot, "m")
        plan = plan_screen.plan
        assert (plan.action, plan.target) == ("mps-restart", "vm-b-1")
        assert plan.steps[0].key.startswith("draining:")
        assert app.focused is not None and app.focused.id == "cancel"
        assert "vm-b-1" in str(plan_screen.query_one("#confirm", Button).label)
        progress = await confirm_plan(pilot)
        await wait_until(
            pilot, lambda: progress.finished, step=lambda: fleet.step(0.5), timeout_s=60
        )
        assert progress.outcome is not None and progress.outcome.ok, progress.outcome
    mps = fleet.vm_mps("vm-b-1")
    assert mps is not None and mps.daemon_running is True
    assert fleet.backend("sdxl-vm-b-1").state is BackendState.ACTIVE
    assert fleet.backend("sdxl-vm-b-1").ready is True


async def test_mps_restart_key_on_a_slot_without_a_daemon_says_so(tmp_path: Path) -> None:
    app = demo_console(tmp_path, operator=None).app
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"bert", "enter")
        await pilot.press("m")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, PlanScreen)
        said = [n.message for n in app._notifications]
        assert any("no MPS daemon serves the selected slot" in m for m in said), said


async def test_a_reason_typed_in_the_drain_plan_is_recorded(tmp_path: Path) -> None:
    app, fleet, _ = demo_console(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        plan_screen = await open_plan(pilot, "d")
        name = plan_screen.plan.target
        box = plan_screen.query_one("#param-reason", Input)
        assert box.value == "drained with gpucon"  # the plan's own reason to start with
        # refused, the field named: a control character, then a reason over the cap
        for typed, said in (
            ("disk\x1b[31m swap", "reason: must not contain control or format characters"),
            ("x" * 501, "reason: "),
        ):
            box.value = typed
            await refused(pilot, plan_screen, box, said)
        # left blank, the plan's default reason comes back
        box.value = "  "
        box.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert box.value == "drained with gpucon" and not box.has_class("-invalid")
        box.value = "ECC errors on gi2, ticket OPS-42"
        await pilot.press("enter")
        await pilot.pause()
        assert "reason: ECC errors on gi2, ticket OPS-42" in str(
            plan_screen.query_one("#plan-body", Static).render()
        )
        await pilot.pause(0.3)
        progress = await confirm_plan(pilot)
        await wait_until(pilot, lambda: progress.finished, step=lambda: fleet.step(0.5))
        assert progress.outcome is not None and progress.outcome.ok, progress.outcome
        backend = fleet.backend(name)
        assert backend.state is BackendState.DRAINED
        assert backend.reason == "ECC errors on gi2, ticket OPS-42"
    records = read_audit(tmp_path / "audit-demo.jsonl")
    intent = next(r for r in records if r.event == "intent")
    assert intent.text.endswith("(reason: ECC errors on gi2, ticket OPS-42)"), intent.text
