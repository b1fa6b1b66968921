"""Read-only and NOC modes, actions seam, themes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpucon.app import ACTIONS, READ_ONLY_ACTIONS, GpuconApp, known_binding_ids
from gpucon.config import GpuconConfig
from gpucon.controls.base import Controls
from gpucon.screens.fleet import ActionFleetScreen, FleetScreen
from gpucon.session import demo_controls
from gpucon.sim.fleet import build_sim_fleet
from tests.ui.fleet_fixture import HandSource
from tests.ui.rig import Rig, table_of

SIZE = (160, 45)


def binding_ids(app: GpuconApp) -> set[str]:
    return {a.binding.id for a in app.screen.active_bindings.values() if a.binding.id}


@pytest.fixture
def controls(tmp_path: Path) -> Controls:
    """Controls that could write (to a simulated fleet): read-only and NOC consoles drop them."""
    return demo_controls(GpuconConfig(audit_path=tmp_path / "audit.jsonl"), build_sim_fleet(7))


async def test_read_only_has_no_action_bindings_and_no_controls(controls: Controls) -> None:
    app = Rig().app(read_only=True, controls=controls)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.controls is None
        assert type(app.screen) is FleetScreen
        assert not hasattr(app.screen, "action_act")
        # the write actions are not bound; the audit log (a read) is
        assert not binding_ids(app) & (set(ACTIONS) - set(READ_ONLY_ACTIONS))
        assert "audit" in binding_ids(app)
        assert "READ-ONLY" in str(app.screen.query_one("#status").render())
        before = list(app._notifications)
        await pilot.press("d", "u", "b", "p")
        await pilot.pause()
        assert list(app._notifications) == before  # nothing happened at all
        assert type(app.screen) is FleetScreen
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Drain" not in titles


async def test_noc_is_read_only_high_contrast_and_cycles_pages(controls: Controls) -> None:
    rig = Rig(source=HandSource(hosts=8))
    app = rig.app(noc=True, controls=controls, page_s=3600)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        assert app.read_only and app.controls is None
        assert app.theme == "gpucon-noc"
        status = str(app.screen.query_one("#status").render())
        assert "NOC" in status and "READ-ONLY" in status and "hand ok" in status
        assert time.strftime("%H:%M:%S", time.localtime(rig.clock.now)) in status  # the clock
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        table = table_of(app)
        pages = -(-table.row_count // table.page_rows)
        assert pages > 1
        assert f"page 1/{pages} problems first" in str(screen.query_one("#status").render())
        screen.next_page()
        await pilot.pause()
        assert round(table.scroll_y) == table.page_rows
        assert f"page 2/{pages}" in str(screen.query_one("#status").render())
        # page 1, then the next pages in rotation, then the alerts page
        for _ in range(min(pages, FleetScreen.PAGES_PER_CYCLE) - 2):
            screen.next_page()
        await pilot.pause()
        assert not screen.has_class("-alerts-page")
        screen.next_page()
        await pilot.pause()
        assert screen.has_class("-alerts-page")
        assert "ALERTS" in str(screen.query_one("#status").render())
        screen.next_page()
        assert not screen.has_class("-alerts-page") and screen.page == 0


async def test_action_keys_hand_over_to_the_fleet_screen_s_action_flow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, str | None, str | None]] = []

    def start_action(
        screen: ActionFleetScreen, name: str, slot_id: str | None, backend: str | None
    ) -> None:
        calls.append((name, slot_id, backend))

    monkeypatch.setattr(ActionFleetScreen, "start_action", start_action)
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        assert type(app.screen) is ActionFleetScreen
        table = table_of(app)
        await pilot.press("d")
        key = table.cursor_key
        assert key is not None
        assert calls == [("drain", key[0], key[1] or None)]  # the selected row's slot, backend
        await pilot.press("u", "b", "p")
        assert [c[0] for c in calls] == ["drain", "undrain", "rebalance", "probe"]


async def test_themes_are_registered_with_app_variables() -> None:
    app = Rig().app(theme="gpucon-light")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "gpucon-light"
        for name in ("gpucon-dark", "gpucon-light", "gpucon-noc"):
            assert name in app.available_themes
        for var in ("util-hot", "latency-breach", "stale"):
            assert var in app.theme_variables
        await pilot.press("t")
        assert app.theme == "gpucon-noc"


async def test_bad_theme_gives_one_notification_not_a_crash(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "mine"\nprimary = "not a colour"\n')
    for theme in ("no-such-theme", str(broken)):
        app = Rig().app(theme=theme)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert app.theme == "gpucon-dark"
            assert len(app._notifications) == 1
            assert "using gpucon-dark" in next(iter(app._notifications)).message


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ('"util-hot" = 5', "variables.util-hot: expected a colour string"),
        ('stale = "zzz"', "variables.stale: expected a colour such as"),
    ],
)
async def test_theme_variables_that_are_not_colours_give_one_notification(
    tmp_path: Path, variables: str, said: str
) -> None:
    """Once a StylesheetError with a Rich traceback (a number) or "CSS parsing failed" at
    start (a word that is no colour): now the theme is refused by name and the default used."""
    theme = tmp_path / "mine.toml"
    theme.write_text(f'name = "mine"\nprimary = "#4aa8ff"\n[variables]\n{variables}\n')
    app = Rig().app(theme=str(theme))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "gpucon-dark" and app.is_running
        (notification,) = app._notifications
        assert said in notification.message and "using gpucon-dark" in notification.message


async def test_theme_file_is_loaded(tmp_path: Path) -> None:
    good = tmp_path / "mine.toml"
    good.write_text('name = "mine"\nprimary = "#ff00ff"\n[variables]\nstale = "#123456"\n')
    app = Rig().app(theme=str(good))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "mine"
        assert app.theme_variables["stale"] == "#123456"
        assert "util-hot" in app.theme_variables  # from the defaults


async def test_source_not_read_yet_shows_waiting_not_down() -> None:
    rig = Rig()
    app = rig.app(warmup=0)
    async with app.run_test(size=SIZE) as pilot:
        app.show_snapshot(rig.hub.tick())  # no read has finished yet
        await pilot.pause()
        status = str(app.screen.query_one("#status").render())
        assert "hand waiting" in status and "DOWN" not in status
        app.show_snapshot(rig.step())
        await pilot.pause()
        assert "hand ok" in str(app.screen.query_one("#status").render())


async def test_read_only_console_still_opens_the_audit_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, controls: Controls
) -> None:
    from gpucon.screens.audit import AuditScreen

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    app = Rig().app(read_only=True, controls=controls)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("A")
        await pilot.pause()
        assert isinstance(app.screen, AuditScreen)
        assert app.controls is None  # reading the log built nothing that writes


def test_every_screen_s_keys_can_be_remapped() -> None:
    ids = known_binding_ids()
    for binding_id in ("cancel_plan", "close_progress", "close_audit", "open_detail", "audit"):
        assert binding_id in ids, binding_id


def test_config_check_knows_the_binding_ids_the_screens_bind() -> None:
    """``config check`` validates [keys] without importing the UI: its list must be the UI's."""
    from gpucon.config.keys import BINDING_IDS

    assert known_binding_ids() == BINDING_IDS


def test_the_default_keys_config_knows_are_the_screens_bindings() -> None:
    """``key_collisions`` reasons over DEFAULT_KEYS: each id's keys and screen must be what the
    BINDINGS say, or a collision would go unnamed (or a harmless remap be refused)."""
    from textual.binding import Binding

    from gpucon.config.keys import APP, DEFAULT_KEYS
    from gpucon.screens.audit import AuditScreen
    from gpucon.screens.detail import DetailScreen
    from gpucon.screens.fleet import ActionFleetScreen, FleetScreen
    from gpucon.screens.help import HelpScreen
    from gpucon.screens.plan import PlanScreen
    from gpucon.screens.progress import ProgressScreen
    from gpucon.screens.reslice_prompt import ReslicePrompt
    from gpucon.widgets.panels import AlertsPanel
    from gpucon.widgets.slot_table import SlotTable

    where = {
        APP: (GpuconApp,),
        "fleet": (FleetScreen, ActionFleetScreen, SlotTable, AlertsPanel),
        "detail": (DetailScreen,),
        "help": (HelpScreen,),
        "plan": (PlanScreen,),
        "progress": (ProgressScreen,),
        "audit": (AuditScreen,),
        "reslice": (ReslicePrompt,),
    }
    bound = {
        # the app's replay keys are live only in a replay: a place of their own
        b.id: ("replay" if b.id.startswith("replay_") else screen, b.key)
        for screen, classes in where.items()
        for cls in classes
        for b in cls.BINDINGS
        if isinstance(b, Binding) and b.id
    }
    assert bound == DEFAULT_KEYS
