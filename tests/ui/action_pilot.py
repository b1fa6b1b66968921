"""An action driven from the keyboard in a pilot, step by step: its plan screen opened, its
confirm pressed and its progress screen up, or a bad param refused (the UI and lab tests)."""

from __future__ import annotations

from typing import TypeVar

from textual.pilot import Pilot
from textual.widgets import Input, Static

from gpucon.screens.plan import PlanScreen
from gpucon.screens.progress import ProgressScreen
from tests.ui.rig import wait_until

R = TypeVar("R")


async def open_plan(pilot: Pilot[R], *keys: str, timeout_s: float = 10.0) -> PlanScreen:
    """Press ``keys`` (none: the plan is already on its way) and wait for the plan screen."""
    app = pilot.app
    if keys:
        await pilot.press(*keys)
    await wait_until(pilot, lambda: isinstance(app.screen, PlanScreen), timeout_s)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, PlanScreen)
    return screen


async def confirm_plan(pilot: Pilot[R], timeout_s: float = 10.0) -> ProgressScreen:
    """Click the plan's confirm button and wait for the progress screen it opens."""
    app = pilot.app
    await pilot.click("#confirm")
    await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), timeout_s)
    progress = app.screen
    assert isinstance(progress, ProgressScreen)
    return progress


async def refused(pilot: Pilot[R], screen: PlanScreen, box: Input, said: str) -> None:
    """Confirm with a bad value in ``box``: the plan stays, nothing applied, and the error
    (starting with ``said``) names the field, marked invalid and focused."""
    app = pilot.app
    await pilot.pause(0.3)  # a button ignores clicks while it shows the last one
    await pilot.click("#confirm")
    await pilot.pause()
    assert app.screen is screen  # still asking: nothing applied
    error = str(screen.query_one("#param-error", Static).render())
    assert error.startswith(said), error
    assert box.has_class("-invalid") and app.focused is box
