"""Plan, progress and audit screens, and the whole flow from a key's call to a drained backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis
from textual.app import App, ComposeResult
from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import Button, Input, Static

from gpucon.actions import drain
from gpucon.actions.audit import read_audit
from gpucon.actions.plan import (
    BlastRadius,
    Outcome,
    OutcomeStatus,
    Plan,
    Precondition,
    ProgressEvent,
    Step,
    StepStatus,
    Tier,
)
from gpucon.actions.registry_snapshot import read_registry
from gpucon.app import GpuconApp
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.snapshot import Snapshot
from gpucon.registry import keys
from gpucon.screens.audit import AuditScreen
from gpucon.screens.fleet import ActionFleetScreen
from gpucon.screens.plan import PlanScreen
from gpucon.screens.progress import ProgressScreen
from tests.ui.action_pilot import confirm_plan, open_plan
from tests.ui.rig import StaticFeed, wait_until

SIZE = (120, 40)
R = TypeVar("R")


def make_plan(tier: Tier, target: str = "b1", ok: bool = True) -> Plan:
    return Plan(
        action="drain" if tier is Tier.DISRUPTIVE else "reslice",
        target=target,
        tier=tier,
        preconditions=(Precondition("state", ok, "active" if ok else "already drained"),),
        steps=(Step("a", "do the first thing"), Step("b", "do the second thing")),
        blast_radius=BlastRadius(("b1",), ("h/gpu0/gi1",), 25.0),
        undo="gpucon undrain b1",
    )


class Host(App[None]):
    """A bare app: the screens under test are pushed onto it; ``answers`` keeps dismissals."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[bool | None] = []

    def compose(self) -> ComposeResult:
        yield Static("host")


def label_of(button: Button) -> str:
    """The label as shown: Textual turns any label into Content (parsing a str as markup)."""
    label = button.label
    assert isinstance(label, Content)
    return label.plain


def focused_id(app: App[R]) -> str | None:
    return app.focused.id if app.focused is not None else None


async def type_the_name_and_confirm(pilot: Pilot[None], app: Host, name: str) -> None:
    """Type ``name`` into the tier-3 plan's box: its confirm stays locked until the last
    character, then confirms (the plan's answer: True)."""
    screen = app.screen
    confirm = screen.query_one("#confirm", Button)
    screen.query_one("#confirm-name", Input).focus()
    await pilot.press(*name[:-1])
    await pilot.pause()
    assert confirm.disabled  # not the whole name yet
    await pilot.press(name[-1])
    await pilot.pause()
    assert not confirm.disabled
    await pilot.click("#confirm")
    await pilot.pause()
    assert app.answers == [True]


async def test_tier1_plan_has_cancel_focused_and_enter_cancels() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlanScreen(make_plan(Tier.REVERSIBLE)), app.answers.append)
        await pilot.pause()
        assert focused_id(app) == "cancel"
        assert str(app.screen.query_one("#confirm", Button).label) == "Apply"
        body = str(app.screen.query_one("#plan-body", Static).render())
        for part in (
            "PASS",
            "do the first thing",
            "1 backend(s), 1 slot(s); 25% of fleet capacity",
            "undrain b1",
        ):
            assert part in body
        await pilot.press("enter")  # a stray Enter cancels
        await pilot.pause()
        assert app.answers == [False]


async def test_tier2_confirm_button_names_the_target_and_confirms() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlanScreen(make_plan(Tier.DISRUPTIVE)), app.answers.append)
        await pilot.pause()
        assert focused_id(app) == "cancel"
        assert str(app.screen.query_one("#confirm", Button).label) == "Drain b1"
        await pilot.click("#confirm")
        await pilot.pause()
        assert app.answers == [True]


async def test_tier3_needs_the_target_typed_and_shows_dry_run() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlanScreen(make_plan(Tier.DESTRUCTIVE, "node-a/gpu0")), app.answers.append)
        await pilot.pause()
        screen = app.screen
        assert "DRY RUN" in str(screen.query_one("#dry-run", Static).render())
        assert screen.query_one("#confirm", Button).disabled
        await pilot.click("#confirm")
        await pilot.pause()
        assert app.answers == []  # a disabled button does nothing
        await type_the_name_and_confirm(pilot, app, "node-a/gpu0")


async def test_failed_precondition_cannot_be_confirmed_and_escape_cancels() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlanScreen(make_plan(Tier.DISRUPTIVE, ok=False)), app.answers.append)
        await pilot.pause()
        assert app.screen.query_one("#confirm", Button).disabled
        assert "FAIL" in str(app.screen.query_one("#plan-body", Static).render())
        await pilot.press("escape")
        await pilot.pause()
        assert app.answers == [False]


async def test_fleet_text_is_shown_literally_never_as_markup() -> None:
    hostile = "[bold red]evil[/]\x1b[2J"
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlanScreen(make_plan(Tier.DISRUPTIVE, target=hostile)))
        await pilot.pause()
        body = str(app.screen.query_one("#plan-body", Static).render())
        assert "[bold red]evil[/]" in body and "\x1b" not in body
        label = app.screen.query_one("#confirm", Button).label
        # the tier-2 confirm names the exact target: brackets and all, no escape code
        assert isinstance(label, Content) and label.plain == "Drain [bold red]evil[/]"
        assert not label.spans


# a closing tag with no opening one (MarkupError), an injected action, a style that eats text
MARKUP_NAMES = ["b[/x]", "b[@click=app.quit]y[/]", "b[bold]x[/bold]", "[bold red]evil[/]"]


@pytest.mark.parametrize("name", MARKUP_NAMES)
async def test_a_name_with_markup_confirms_through_the_plan_screen(name: str) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlanScreen(make_plan(Tier.DISRUPTIVE, target=name)), app.answers.append)
        await pilot.pause()
        confirm = app.screen.query_one("#confirm", Button)
        assert label_of(confirm) == f"Drain {name}"
        lines = [confirm.render_line(y) for y in range(confirm.size.height)]
        shown = "".join(segment.text for line in lines for segment in line)
        assert name in shown  # what the operator reads is the exact name
        await pilot.click("#confirm")
        await pilot.pause()
        assert app.answers == [True]
        assert app.is_running  # no action was run from the name (app.quit)


@pytest.mark.parametrize("name", MARKUP_NAMES)
async def test_tier3_typing_a_name_with_markup_literally_unlocks(name: str) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlanScreen(make_plan(Tier.DESTRUCTIVE, target=name)), app.answers.append)
        await pilot.pause()
        screen = app.screen
        assert label_of(screen.query_one("#confirm", Button)) == f"Reslice {name}"
        await type_the_name_and_confirm(pilot, app, name)
        assert app.is_running


async def test_tier3_name_with_control_codes_is_confirmed_as_shown() -> None:
    name = "gpu\x1b[31m0\u202e"
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlanScreen(make_plan(Tier.DESTRUCTIVE, target=name)), app.answers.append)
        await pilot.pause()
        screen = app.screen
        field = screen.query_one("#confirm-name", Input)
        assert "\x1b" not in str(field.placeholder) and "gpu0" in str(field.placeholder)
        field.focus()
        await pilot.press(*"gpu0")  # what the operator sees is what they type
        await pilot.pause()
        assert not screen.query_one("#confirm", Button).disabled


async def test_progress_screen_streams_steps_and_closes_only_when_finished() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        screen = ProgressScreen(make_plan(Tier.DISRUPTIVE))
        app.push_screen(screen, app.answers.append)
        await pilot.pause()
        screen.add_event(ProgressEvent("wait:b1", StepStatus.STARTED, "waiting"))
        screen.add_event(ProgressEvent("wait:b1", StepStatus.RUNNING, "3 in flight"))
        screen.add_event(ProgressEvent("wait:b1", StepStatus.RUNNING, "1 in flight", 2 / 3))
        await pilot.pause()
        steps = str(screen.query_one("#progress-steps", Static).render())
        assert "1 in flight" in steps and "3 in flight" not in steps  # one line per step
        assert "[#######...]  67%" in steps
        assert screen.query_one("#close", Button).disabled
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen  # still running: it stays
        screen.add_event(ProgressEvent("wait:b1", StepStatus.FAILED, "timed out"))
        screen.finish(
            Outcome("drain", "b1", OutcomeStatus.TIMEOUT, "timed out", "d", state_left="draining")
        )
        await pilot.pause()
        outcome = str(screen.query_one("#progress-outcome", Static).render())
        assert "TIMEOUT: timed out" in outcome and "state: draining" in outcome
        assert focused_id(app) == "close"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is not screen


@pytest.fixture
def registry_client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    yield c
    c.close()


def registry_app(snapshot: Snapshot, controls: Controls | None) -> GpuconApp:
    """The console on a snapshot read from the real registry, writing through ``controls``."""
    return GpuconApp(StaticFeed(snapshot), mode="live", autostart=False, controls=controls)


def fleet_screen(app: GpuconApp) -> ActionFleetScreen:
    screen = app.screen
    assert isinstance(screen, ActionFleetScreen)
    return screen


@pytest.mark.integration
async def test_drain_flow_from_key_to_drained_backend(
    registry_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(registry, AuditLog(tmp_path / "audit.jsonl"), "ui@test")
    snapshot, _ = read_registry(registry_client)
    app = registry_app(snapshot, controls)
    async with app.run_test(size=SIZE) as pilot:
        fleet_screen(app).start_action("drain", "h/gpu0/gi1", "b1")
        await open_plan(pilot)
        assert focused_id(app) == "cancel"
        assert str(app.screen.query_one("#confirm", Button).label) == "Drain b1"
        progress = await confirm_plan(pilot)
        await wait_until(pilot, lambda: progress.finished)
        assert progress.outcome is not None and progress.outcome.ok
        assert registry_client.hget(keys.backend_key("b1"), "state") == "drained"
        steps = str(progress.query_one("#progress-steps", Static).render())
        assert "draining:b1" in steps and "drained:b1" in steps
        # cancel leaves everything as it was
        await pilot.press("escape")  # close the progress screen
        await wait_until(pilot, lambda: app.screen is not progress)
        app.show_snapshot(read_registry(registry_client)[0])
        fleet_screen(app).start_action("undrain", None, "b1")
        await open_plan(pilot)
        assert focused_id(app) == "cancel"
        await pilot.press("enter")  # Cancel has focus
        await pilot.pause()
        assert registry_client.hget(keys.backend_key("b1"), "state") == "drained"
        # the audit screen shows what happened
        fleet_screen(app).start_action("audit", None, None)
        await wait_until(pilot, lambda: isinstance(app.screen, AuditScreen))
        audit = app.screen
        assert isinstance(audit, AuditScreen)
        await wait_until(pilot, lambda: bool(audit.records))
        text = str(audit.query_one("#audit-body", Static).render())
        assert "intent" in text and "ui@test" in text and "drained:b1" in text
    assert read_audit(tmp_path / "audit.jsonl")[0].event == "intent"
    registry.close()


@pytest.mark.integration
@pytest.mark.parametrize("name", ["b[/x]", "b[@click=app.quit]y[/]"])
async def test_drain_flow_of_a_backend_named_with_markup(
    registry_client: redis.Redis, redis_url: str, tmp_path: Path, name: str
) -> None:
    """What pressing ``d`` on such a backend does: plan, confirm, progress; nothing crashes."""
    register_backends(registry_client, [BackendRecord(name, "http://127.0.0.1:3", "m", "h/g/3")])
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(registry, AuditLog(tmp_path / "audit.jsonl"), "ui@test")
    snapshot, _ = read_registry(registry_client)
    app = registry_app(snapshot, controls)
    async with app.run_test(size=SIZE) as pilot:
        fleet_screen(app).start_action("drain", None, name)
        await open_plan(pilot)
        assert label_of(app.screen.query_one("#confirm", Button)) == f"Drain {name}"
        progress = await confirm_plan(pilot)
        await wait_until(pilot, lambda: progress.finished)
        await pilot.pause()
        assert progress.outcome is not None and progress.outcome.ok
        assert name in str(progress.query_one("#progress-title", Static).render())
        assert app.is_running
    assert registry_client.hget(keys.backend_key(name), "state") == "drained"
    registry.close()


@pytest.mark.integration
async def test_the_selected_row_is_acted_on_by_its_real_name_control_codes_and_all(
    registry_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """A registry name with an escape code once locked the operator out ("must not contain
    control or format characters"): the console drains the selected row by its real name."""
    name = "b\x1b[31m3"
    register_backends(registry_client, [BackendRecord(name, "http://127.0.0.1:3", "m", "h/g/3")])
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(registry, AuditLog(tmp_path / "audit.jsonl"), "ui@test")
    snapshot, _ = read_registry(registry_client)
    app = registry_app(snapshot, controls)
    async with app.run_test(size=SIZE) as pilot:
        fleet_screen(app).start_action("drain", "h/g/3", name)  # what pressing d on it does
        await open_plan(pilot)
        assert "\x1b" not in label_of(app.screen.query_one("#confirm", Button))
        progress = await confirm_plan(pilot)
        await wait_until(pilot, lambda: progress.finished)
        assert progress.outcome is not None and progress.outcome.ok
    assert registry_client.hget(keys.backend_key(name), "state") == "drained"
    registry.close()


async def test_without_controls_actions_only_notify() -> None:
    app = registry_app(Snapshot(taken_at=0.0), None)
    async with app.run_test(size=SIZE) as pilot:
        fleet_screen(app).start_action("drain", None, "b1")
        await pilot.pause()
        assert not isinstance(app.screen, PlanScreen)
        assert any("no write path" in n.message for n in app._notifications)


@pytest.mark.integration
async def test_bad_selection_is_refused_with_the_field(
    registry_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    snapshot, _ = read_registry(registry_client)
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(registry, AuditLog(tmp_path / "audit.jsonl"), "ui@test")
    app = registry_app(snapshot, controls)
    async with app.run_test(size=SIZE) as pilot:
        fleet_screen(app).start_action("drain", None, "ghost")
        await wait_until(pilot, lambda: bool(list(app._notifications)))
        message = next(iter(app._notifications)).message
        assert "backend: unknown backend 'ghost'" in message
        assert drain.plan_drain(snapshot, {"backend": "b1"}).ok
    registry.close()


async def test_a_long_plan_scrolls_and_its_buttons_stay_on_an_80x24_terminal() -> None:
    long_plan = Plan(
        "rebalance",
        "registry:weights",
        Tier.REVERSIBLE,
        (Precondition("changes", True, "40 weights change"),),
        tuple(Step(f"s{i}", f"step number {i}") for i in range(40)),
        BlastRadius(),
        "undo it",
        changes=tuple(f"b{i}: 1 → 2" for i in range(40)),
    )
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(PlanScreen(long_plan), app.answers.append)
        await pilot.pause()
        screen = app.screen
        for button_id in ("#cancel", "#confirm"):
            region = screen.query_one(button_id, Button).region
            assert region.height > 0 and region.bottom <= 24, (button_id, region)
        scroll = screen.query_one("#plan-scroll")
        assert scroll.max_scroll_y > 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert scroll.scroll_y > 0
        assert focused_id(app) == "cancel"
