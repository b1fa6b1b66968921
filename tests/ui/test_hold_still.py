"""The table that holds still: the stable default order, the pause key, and the jump from an
alert to its row (then `d` drains it), on the simulated fleet with a frozen clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from textual.widgets import Static

from gpucon.config import GpuconConfig
from gpucon.model.alerts import Severity
from gpucon.model.fleet import BackendState
from gpucon.screens.fleet import FleetScreen
from gpucon.screens.plan import PlanScreen
from gpucon.screens.progress import ProgressScreen
from gpucon.session import demo_controls
from gpucon.widgets.panels import AlertsPanel
from gpucon.widgets.status_bar import StatusBar
from tests.ui.rig import sim_rig, table_lines, table_of, wait_until

SIZE = (120, 30)


def down_backend(app: Any) -> str:
    """The backend the backend-down scenario took down, from its critical alert."""
    alerts = [a for a in app.snapshot.alerts if a.severity is Severity.CRITICAL]
    down = next(a for a in alerts if "down" in a.message)
    return str(down.target)


async def test_default_order_puts_problems_first_and_does_not_move_with_values() -> None:
    rig = sim_rig(scenario="backend-down")
    app = rig.app(warmup=30)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = table_of(app)
        assert table.order.sort_key == "default"
        assert table.order.keys[0][1] == down_backend(app)  # the row with an alert leads
        keys, rows = list(table.order.keys), dict(table.order.rows)
        for _ in range(5):  # live values move; the order does not
            app.show_snapshot(rig.step())
            await pilot.pause()
        assert table.order.rows != rows
        assert table.order.keys == keys
        # the rows with problems lead (the backends that took its traffic may have p95
        # alerts by now); without problems, host, GPU and slot order the rest
        led = len(table.order.problems)
        assert led >= 1 and all(k in table.order.problems for k in keys[:led])
        rest = [(table.order.rows[k].host, table.order.rows[k].gpu, k[0]) for k in keys[led:]]
        assert rest == sorted(rest)


async def test_pause_holds_order_and_values_and_keeps_source_health_live() -> None:
    rig = sim_rig(scenario="burst")
    app = rig.app(warmup=30)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        table = table_of(app)
        table.set_sort("activity", True)  # a live sort: without the pause rows would move
        await pilot.press("z")
        banner = screen.query_one("#pause-banner", Static)
        assert banner.display and "PAUSED — live data held since" in str(banner.render())
        assert "z to resume" in str(banner.render())
        held_lines, held_keys = table_lines(app), list(table.order.keys)
        alerts_text = str(screen.query_one(AlertsPanel).render())
        for _ in range(5):
            latest = rig.step()
            app.show_snapshot(latest)
            await pilot.pause()
        assert table_lines(app) == held_lines and table.order.keys == held_keys
        assert str(screen.query_one(AlertsPanel).render()) == alerts_text
        assert screen.query_one(StatusBar).snapshot is latest  # source health stays live
        await pilot.press("z")
        assert not banner.display
        await wait_until(pilot, lambda: table_lines(app) != held_lines)


async def test_enter_on_an_alert_selects_its_row_and_d_drains_it(tmp_path: Path) -> None:
    rig = sim_rig(scenario="backend-down", size=64)
    fleet = rig.source.fleet  # type: ignore[attr-defined]
    controls = demo_controls(
        GpuconConfig(audit_path=tmp_path / "audit.jsonl", operator="noc@test"), fleet
    )
    app = rig.app(warmup=30, controls=controls)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = table_of(app)
        target = down_backend(app)
        # sort so the dead backend's row is far off the first page, the cursor at the top
        table.set_sort("backend", True)
        table.move_cursor(0)
        await pilot.pause()
        assert table.cursor_key is not None and table.cursor_key[1] != target
        assert table.order.keys.index(next(k for k in table.order.keys if k[1] == target)) > 20
        # the keystrokes: focus the alerts, Enter on the top one, d, Tab to confirm, Enter
        await pilot.press("exclamation_mark")
        assert isinstance(app.focused, AlertsPanel)
        assert app.focused.selected is not None and app.focused.selected.target == target
        await pilot.press("enter")
        assert table.cursor_key is not None and table.cursor_key[1] == target
        assert table.has_focus
        top = round(table.scroll_y)
        assert top <= table.cursor < top + table.page_rows  # in view
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, PlanScreen))
        plan_screen = app.screen
        assert isinstance(plan_screen, PlanScreen) and plan_screen.plan.target == target
        await pilot.press("tab", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await wait_until(pilot, lambda: progress.finished, step=lambda: fleet.step(0.5))
        assert fleet.backend(target).state is BackendState.DRAINED


async def test_g_jumps_to_the_top_alert_from_the_table() -> None:
    rig = sim_rig(scenario="backend-down", size=64)
    app = rig.app(warmup=30, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = table_of(app)
        target = app.snapshot.alerts[0].target if app.snapshot else ""
        table.set_sort("backend", False)
        table.move_cursor(0)
        await pilot.press("g")
        assert table.cursor_key is not None and target in (table.cursor_key[1], table.cursor_key[0])
        assert table.has_focus
        await pilot.press("tab")  # Tab from the table reaches the alerts too
        assert isinstance(app.focused, AlertsPanel)
        await pilot.press("tab")
        assert table.has_focus


async def test_selected_row_keeps_its_warning_glyph_and_colour() -> None:
    rig = sim_rig(scenario="backend-down")
    app = rig.app(warmup=30)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = table_of(app)
        table.move_cursor(0)  # the dead backend's row: its STATE says so in words
        await pilot.pause()
        strip = table.render_line(1)
        assert "down" in strip.text
        breach = table._style_map()["breach"].color
        down = next(s for s in strip if "down" in s.text)
        assert down.style is not None and down.style.color == breach


async def test_the_chosen_alert_keeps_the_highlight_when_alerts_reorder() -> None:
    rig = sim_rig(scenario="burst")
    app = rig.app(warmup=150)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("exclamation_mark", "down", "down")
        panel = app.screen.query_one(AlertsPanel)
        chosen = panel.selected
        assert chosen is not None and panel.cursor == 2
        snapshot = app.snapshot
        assert snapshot is not None
        # the same alerts in another order (a newer one on top, say)
        app.show_snapshot(
            msgspec.structs.replace(snapshot, alerts=tuple(reversed(snapshot.alerts)))
        )
        await pilot.pause()
        assert panel.selected is not None and panel.selected.key == chosen.key


async def test_key_bar_at_80_columns_names_the_keys_of_the_2am_flow_first() -> None:
    from gpucon.widgets.keybar import KeyBar

    rig = sim_rig(scenario="backend-down", size=64)
    app = rig.app(warmup=30)  # not read-only: the action keys are bound
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        bar = str(app.screen.query_one(KeyBar).render())
        for part in (" d Drain ", " g Go to alert ", " ! Alerts ", " z Pause "):
            assert part in bar, bar
