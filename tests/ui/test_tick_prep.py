"""Showing a snapshot on the UI thread applies what the hub's thread worked out for it.

With the hub's own thread running (as in ``gpucon demo``), each snapshot's rows (keys and
names), problem rows, the sort column's values, alert counts and GPU order are worked out on
that thread before the snapshot is posted (``widgets.tick_prep``); the UI thread builds rows
itself only for a snapshot nothing prepared (the first one, shown when the screen mounts).
A key clears the hub's ``ui_idle`` so its tick gives way, and holds the cyclic garbage
collector, for a moment.
"""

from __future__ import annotations

import gc
import threading

import pytest

import gpucon.app
from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.screens.fleet import FleetScreen
from gpucon.sim import DEMO_SLO_P95_MS
from gpucon.sim.source import SimSource
from gpucon.widgets.row_builder import build_rows
from tests.ui.rig import sim_rig, table_of, wait_until

SIZE = (160, 40)


async def test_the_hub_thread_prepares_each_snapshot_and_the_ui_only_applies_it() -> None:
    source = SimSource.for_demo(7, "backend-down", 64)
    hub = Hub([source], refresh_s=0.1, slo_p95_ms_by_model=DEMO_SLO_P95_MS)
    hub.poll_once()
    hub.tick()  # the first frame's snapshot, made before the hub's thread starts
    app = GpuconApp(hub)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        table = table_of(app)
        table.set_sort("activity", True)  # a live column: its values are prepared too
        prep = screen.prep
        await wait_until(pilot, lambda: prep.builds["gpucon-hub"] >= 6)
        assert app.snapshot is not None and app.snapshot.seq >= 5
        # the UI thread built rows for the snapshot shown at mount, then (nearly) never again
        assert prep.builds[threading.main_thread().name] <= 2
        assert prep.prepared >= 6
        shown = app.snapshot
        fresh = build_rows(shown, screen.default_slo_ms)
        top = table.order.keys[0]
        assert table.order.rows[top] == fresh[top]
        values = [fresh[k].activity for k in table.order.keys[:30]]
        known = [v for v in values if v is not None]
        assert known == sorted(known, reverse=True)

        # paused, the screen shows none of the next snapshots: none is worked out ahead
        await pilot.press("z")
        prepared, seq = prep.prepared, shown.seq
        await wait_until(pilot, lambda: app.snapshot is not None and app.snapshot.seq >= seq + 4)
        assert prep.prepared <= prepared + 1  # one may have been under way
        await pilot.press("z")
        await wait_until(pilot, lambda: prep.prepared >= prepared + 3)


async def test_a_key_makes_the_hub_and_the_collector_wait_and_then_lets_them_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpucon.app, "KEY_HOLD_S", 0.5)
    rig = sim_rig(size=64)
    app = rig.app(warmup=5)
    was_on = gc.isenabled()
    gc.enable()
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert rig.hub.ui_idle.is_set()
            await pilot.press("s")
            # the tick and the cyclic collector wait while the key is answered
            assert not rig.hub.ui_idle.is_set() and not gc.isenabled()
            await wait_until(pilot, rig.hub.ui_idle.is_set)
            assert gc.isenabled()
            gc.disable()  # a collector that was off (the first frame's) is left off
            await pilot.press("s")
            assert not rig.hub.ui_idle.is_set()
            await wait_until(pilot, rig.hub.ui_idle.is_set)
            assert not gc.isenabled()
    finally:
        if was_on:
            gc.enable()
        else:
            gc.disable()
