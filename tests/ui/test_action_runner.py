"""The action runner's typed messages: plans made off the UI thread come back as ``PlanReady``
or ``PlanFailed`` (naming the param at fault), a newer plan supersedes an older one, and an
apply's ``ActionProgress`` and ``ActionFinished`` reach the progress screen."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.message import Message
from textual.widgets import Button, Static

from gpucon.actions.audit import read_audit
from gpucon.actions.catalog import ActionSpec, get_action
from gpucon.actions.plan import (
    BlastRadius,
    Outcome,
    OutcomeStatus,
    Plan,
    Precondition,
    Progress,
    ProgressEvent,
    Step,
    StepStatus,
    Tier,
)
from gpucon.config import GpuconConfig
from gpucon.controls.base import Controls
from gpucon.errors import BadParams
from gpucon.model.snapshot import Snapshot
from gpucon.screens.action_runner import (
    ActionFinished,
    ActionProgress,
    ActionRunner,
    PlanFailed,
    PlanReady,
)
from gpucon.screens.actions_flow import params_for
from gpucon.screens.fleet import ActionFleetScreen
from gpucon.screens.progress import ProgressScreen
from gpucon.session import demo_controls
from gpucon.sim.fleet import SimFleet, build_sim_fleet
from gpucon.sim.source import SimSource
from tests.ui.rig import sim_rig, wait_until

SIZE = (140, 40)


class Host(App[None]):
    """A bare app the runner works for: it keeps every runner message it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[Message] = []

    def compose(self) -> ComposeResult:
        yield Static("host")

    def on_plan_ready(self, message: PlanReady) -> None:
        self.got.append(message)

    def on_plan_failed(self, message: PlanFailed) -> None:
        self.got.append(message)


@pytest.fixture
def fleet() -> SimFleet:
    fleet = build_sim_fleet(7)
    fleet.step(30.0)
    return fleet


@pytest.fixture
def controls(fleet: SimFleet, tmp_path: Path) -> Iterator[Controls]:
    controls = demo_controls(
        GpuconConfig(audit_path=tmp_path / "audit.jsonl", operator="runner@test"), fleet
    )
    yield controls
    controls.close()


def snapshot_of(fleet: SimFleet) -> Snapshot:
    from gpucon.sim.runner import DemoFleetRunner

    return DemoFleetRunner(fleet).snapshot()


def step_plan(target: str = "b1") -> Plan:
    return Plan(
        action="check",
        target=target,
        tier=Tier.REVERSIBLE,
        preconditions=(Precondition("always", True, "nothing to check"),),
        steps=(Step("one", "the first step"), Step("two", "the second step")),
        blast_radius=BlastRadius(("b1",)),
        undo="nothing to undo",
    )


def any_plan(snapshot: Snapshot, params: Mapping[str, object]) -> Plan:
    return step_plan()


def spec_with(
    plan: Callable[[Snapshot, Mapping[str, object]], Plan] = any_plan,
    apply: Callable[[Plan, Controls, Progress], Outcome] | None = None,
) -> ActionSpec:
    def no_apply(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
        raise AssertionError("not applied in this test")

    return ActionSpec("check", Tier.REVERSIBLE, "Check", plan, apply or no_apply)


async def test_plan_failed_names_the_field(fleet: SimFleet, controls: Controls) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        ActionRunner(app).plan(get_action("drain"), snapshot_of(fleet), {"backend": "x"}, controls)
        await wait_until(pilot, lambda: bool(app.got))
        [message] = app.got
        assert isinstance(message, PlanFailed)
        assert isinstance(message.error, BadParams) and message.field == "backend"
        assert message.text.startswith("drain: backend: unknown backend 'x'")


async def test_plan_ready_carries_the_plan_made_off_the_ui_thread(
    fleet: SimFleet, controls: Controls
) -> None:
    threads: list[threading.Thread] = []

    def plan(snapshot: Snapshot, params: Mapping[str, object]) -> Plan:
        threads.append(threading.current_thread())
        return step_plan(str(params["target"]))

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        ActionRunner(app).plan(spec_with(plan), snapshot_of(fleet), {"target": "b7"}, controls)
        await wait_until(pilot, lambda: bool(app.got))
        [message] = app.got
        assert isinstance(message, PlanReady)
        assert message.plan.target == "b7" and message.spec.name == "check"
        assert threads and threads[0] is not threading.main_thread()


async def test_an_error_that_is_not_an_action_error_is_named_with_its_type(
    fleet: SimFleet, controls: Controls
) -> None:
    def plan(snapshot: Snapshot, params: Mapping[str, object]) -> Plan:
        raise ConnectionError("registry unreachable")

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        ActionRunner(app).plan(spec_with(plan), snapshot_of(fleet), {}, controls)
        await wait_until(pilot, lambda: bool(app.got))
        [message] = app.got
        assert isinstance(message, PlanFailed) and message.field is None
        assert message.text == "check: ConnectionError: registry unreachable"
        assert app.is_running  # the console keeps going


async def test_a_newer_plan_supersedes_one_still_being_made(
    fleet: SimFleet, controls: Controls
) -> None:
    release = threading.Event()
    first_started = threading.Event()

    def plan(snapshot: Snapshot, params: Mapping[str, object]) -> Plan:
        if params["target"] == "old":
            first_started.set()
            release.wait(5.0)  # still reading when the operator asks again
        return step_plan(str(params["target"]))

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        runner = ActionRunner(app)
        snapshot = snapshot_of(fleet)
        first = runner.plan(spec_with(plan), snapshot, {"target": "old"}, controls)
        await wait_until(pilot, first_started.is_set)  # the worker starts from the event loop
        runner.plan(spec_with(plan), snapshot, {"target": "new"}, controls)
        await wait_until(pilot, lambda: bool(app.got))
        release.set()
        await wait_until(pilot, lambda: first.is_finished)
        await pilot.pause(0.1)
        assert [m.plan.target for m in app.got if isinstance(m, PlanReady)] == ["new"]
        assert len(app.got) == 1


async def test_apply_reports_each_step_then_the_outcome_to_the_progress_screen(
    controls: Controls,
) -> None:
    steps_seen: list[str] = []

    def apply(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
        for step in plan.steps:
            progress(ProgressEvent(step.key, StepStatus.STARTED, step.text))
            progress(ProgressEvent(step.key, StepStatus.DONE, f"{step.key} done"))
            steps_seen.append(step.key)
        return Outcome(plan.action, plan.target, OutcomeStatus.OK, "all done", plan.digest)

    plan = step_plan()
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = ProgressScreen(plan)
        app.push_screen(screen)
        ActionRunner(app).apply(spec_with(apply=apply), plan, controls, screen)
        await wait_until(pilot, lambda: screen.finished)
        assert screen.outcome is not None and screen.outcome.ok
        assert steps_seen == ["one", "two"]
        steps = screen.steps_text().plain
        assert "one done" in steps and "two done" in steps
        assert "OK: all done" in screen.outcome_text().plain
        assert any("check b1: ok" in n.message for n in app._notifications)
    # it ran under the guard: intent and outcome are in the audit log
    events = [r.event for r in read_audit(Path(controls.audit.path))]
    assert events[0] == "intent" and events[-1] == "outcome"


async def test_an_apply_that_raises_still_finishes_with_an_outcome(
    fleet: SimFleet, controls: Controls
) -> None:
    def apply(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
        raise RuntimeError("the registry went away")

    plan = step_plan()
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = ProgressScreen(plan)
        app.push_screen(screen)
        ActionRunner(app).apply(spec_with(apply=apply), plan, controls, screen)
        await wait_until(pilot, lambda: screen.finished)
        assert screen.outcome is not None and not screen.outcome.ok
        assert "the registry went away" in screen.outcome_text().plain
        assert not screen.query_one("#close", Button).disabled  # it can be closed now


async def test_action_finished_reaches_the_screen_and_unlocks_close() -> None:
    plan = step_plan("node-a")
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = ProgressScreen(plan)
        app.push_screen(screen)
        await pilot.pause()
        screen.post_message(
            ActionProgress(plan, ProgressEvent("one", StepStatus.FAILED, "timed out"))
        )
        outcome = Outcome("check", "node-a", OutcomeStatus.TIMEOUT, "timed out", plan.digest)
        screen.post_message(ActionFinished(plan, outcome))
        await wait_until(pilot, lambda: screen.finished)
        await pilot.pause()
        assert screen.outcome is outcome
        assert "TIMEOUT: timed out" in str(screen.query_one("#progress-outcome", Static).render())
        assert app.focused is not None and app.focused.id == "close"
        [note] = [n for n in app._notifications if "node-a" in n.message]
        assert note.message == "check node-a: timeout" and note.severity == "error"


def test_a_step_s_queued_update_replaces_its_older_one_only() -> None:
    plan = step_plan()
    older = ActionProgress(plan, ProgressEvent("wait", StepStatus.RUNNING, "3 in flight"))
    newer = ActionProgress(plan, ProgressEvent("wait", StepStatus.RUNNING, "2 in flight"))
    other = ActionProgress(plan, ProgressEvent("report", StepStatus.STARTED, "report"))
    another_plan = ActionProgress(step_plan(), ProgressEvent("wait", StepStatus.DONE, "done"))
    assert older.can_replace(newer)
    assert not older.can_replace(other)
    assert not older.can_replace(another_plan)
    assert not older.can_replace(ActionFinished(plan, Outcome("c", "b1", OutcomeStatus.OK, "", "")))


async def test_the_fleet_screen_names_the_field_of_a_bad_selection(tmp_path: Path) -> None:
    rig = sim_rig()
    source = rig.source
    assert isinstance(source, SimSource)
    controls = demo_controls(
        GpuconConfig(audit_path=tmp_path / "audit.jsonl", operator="t@h"), source.fleet
    )
    app = rig.app(controls=controls)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ActionFleetScreen)
        screen.start_action("drain", None, None)  # a row with no backend
        await wait_until(pilot, lambda: bool(list(app._notifications)))
        messages = [n.message for n in app._notifications]
        assert messages == ["drain: backend: the selected row has no backend"]
        screen.start_action("undrain", None, "ghost")  # planned in a worker: refused there
        await wait_until(pilot, lambda: len(list(app._notifications)) == 2)
        assert "undrain: backend: unknown backend 'ghost'" in list(app._notifications)[-1].message
        assert app.screen is screen  # no plan screen for a plan that failed


def test_a_live_console_probes_only_its_configured_targets(controls: Controls) -> None:
    from gpucon.controls.probe_live import LiveProber

    snapshot = Snapshot(taken_at=0.0)
    demo = params_for("probe", snapshot, None, "b1", controls=controls, config=None)
    assert demo == {"target": "b1", "simulated": True}
    live = dataclasses.replace(controls, prober=LiveProber())
    params = params_for("probe", snapshot, None, "b1", controls=live, config=None)
    assert params == {"target": "b1", "probe_targets": ()}
