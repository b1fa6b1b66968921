"""SVG snapshots of the screens on the simulator (seed 7, frozen clock), grouped by feature.

Regenerate after an intended change with ``pytest tests/ui/test_snapshots.py --snapshot-update``
and look at the report before committing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from textual.pilot import Pilot

from gpucon.screens.fleet import FleetScreen
from tests.ui.rig import Rig, sim_rig
from tests.ui.test_hostile_and_rendering import hostile_rig

SIZE = (160, 45)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The NOC clock shows local time: pin it so snapshots match on any machine."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_fleet_default_demo(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(sim_rig().app(warmup=60), terminal_size=SIZE)


def test_fleet_sorted_by_p95_and_filtered(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig().app(warmup=60)

    async def sort_and_filter(pilot: Pilot[int]) -> None:
        await pilot.pause()  # the fleet screen is the default screen: composed just after start
        app.screen.query_one("SlotTable").set_sort("p95", True)  # type: ignore[attr-defined]
        await pilot.press("slash", *"sdxl", "enter", "down")

    assert snap_compare(app, terminal_size=SIZE, run_before=sort_and_filter)


def test_fleet_narrow_terminal_drops_columns(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(sim_rig().app(warmup=60), terminal_size=(100, 30))


def test_detail_of_a_vm_with_mps(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig().app(warmup=90)

    async def open_detail(pilot: Pilot[int]) -> None:
        app.open_detail("vm:vm-b-1")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 60), run_before=open_detail)


def test_detail_of_a_mig_slice(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig(scenario="slice-memory-leak").app(warmup=90)

    async def open_detail(pilot: Pilot[int]) -> None:
        app.open_detail("node-a/gpu0/gi3")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 50), run_before=open_detail)


def test_help_screen(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(sim_rig().app(warmup=5), terminal_size=SIZE, press=["question_mark"])


def test_read_only_badge_and_no_action_keys(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(sim_rig().app(warmup=30, read_only=True), terminal_size=SIZE)


def test_incident_backend_down_with_alerts(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(sim_rig(scenario="backend-down").app(warmup=90), terminal_size=SIZE)


def test_noc_alerts_page(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig(scenario="burst").app(warmup=90, noc=True, page_s=3600)

    async def to_alerts(pilot: Pilot[int]) -> None:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        screen.next_page()  # one page of table, then the alerts page
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=to_alerts)


def test_light_theme(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(sim_rig().app(warmup=30, theme="gpucon-light"), terminal_size=SIZE)


def test_stale_source_marks_rows_and_header(snap_compare) -> None:  # type: ignore[no-untyped-def]
    rig = sim_rig()
    rig.step(20)
    rig.clock.now += 30  # the sim source is not read for 30 s: its data goes stale
    rig.hub.record(
        __import__("gpucon.model.reading", fromlist=["x"]).failed_reading(
            "sim", rig.clock.now, 2.0, "TimeoutError: read timed out"
        )
    )
    rig.hub.tick()
    assert snap_compare(Rig.app(rig, warmup=0), terminal_size=SIZE)


def test_hostile_names_render_literally(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(hostile_rig().app(), terminal_size=SIZE)


def test_gpu_health_and_node_state(snap_compare) -> None:  # type: ignore[no-untyped-def]
    from tests.ui.test_gpu_health_view import troubled_rig

    assert snap_compare(troubled_rig().app(warmup=20), terminal_size=SIZE)


def test_detail_with_gpu_health_and_node(snap_compare) -> None:  # type: ignore[no-untyped-def]
    from tests.ui.test_gpu_health_view import troubled_rig

    app = troubled_rig().app(warmup=20)

    async def open_detail(pilot: Pilot[int]) -> None:
        app.open_detail("gpu-b/gpu0/gi1")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 60), run_before=open_detail)


def test_incident_gpu_fault(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(sim_rig(scenario="gpu-fault").app(warmup=90), terminal_size=SIZE)


# -- the 2 AM sizes: a laptop's 80x24, a big terminal's 180x48, and the NOC wall's pages ----


def test_backend_down_at_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig(scenario="backend-down", size=64).app(warmup=60)
    assert snap_compare(app, terminal_size=(80, 24))


def test_backend_down_at_180x48(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig(scenario="backend-down", size=64).app(warmup=60)
    assert snap_compare(app, terminal_size=(180, 48))


def test_alerts_focused_at_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig(scenario="burst").app(warmup=150)
    assert snap_compare(app, terminal_size=(80, 24), press=["exclamation_mark", "down"])


def test_paused_table(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig(scenario="backend-down").app(warmup=60)
    assert snap_compare(app, terminal_size=(120, 30), press=["z"])


def test_noc_first_page_at_180x48(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig(scenario="backend-down", size=64).app(warmup=60, noc=True, page_s=3600)
    assert snap_compare(app, terminal_size=(180, 48))


def test_noc_alerts_page_at_180x48(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = sim_rig(scenario="burst").app(warmup=150, noc=True, page_s=3600)

    async def to_alerts(pilot: Pilot[int]) -> None:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        while not screen.has_class("-alerts-page"):
            screen.next_page()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(180, 48), run_before=to_alerts)


def test_noc_header_fits_150_columns(snap_compare) -> None:  # type: ignore[no-untyped-def]
    from tests.ui.test_noc_header import lab_wall

    assert snap_compare(lab_wall(), terminal_size=(150, 40))


def test_noc_header_fits_120_columns(snap_compare) -> None:  # type: ignore[no-untyped-def]
    from tests.ui.test_noc_header import lab_wall

    assert snap_compare(lab_wall(), terminal_size=(120, 40))
