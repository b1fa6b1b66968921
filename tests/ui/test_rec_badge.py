"""``--record``: the status bar says REC with the file and its size while the recording runs,
and REC FAILED when the disk fills (a real SQLite file capped with ``max_page_count``) while
the console goes on showing new snapshots."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.recording.recorder import Recorder
from gpucon.sim.source import SimSource
from gpucon.widgets.status_bar import StatusBar
from tests.ui.fleet_fixture import FrozenClock


async def _until(pilot: Pilot[int], check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if check():
            return
    raise AssertionError(f"timed out waiting for {what}")


def _bar(app: GpuconApp) -> str:
    return app.screen.query_one(StatusBar).render_line(0).text


async def test_the_rec_badge_shows_the_file_then_its_failure(tmp_path: Path) -> None:
    clock = FrozenClock(1_790_000_000.0)
    hub = Hub([SimSource.for_demo(7, None, None, clock=clock)], clock=clock)
    path = tmp_path / "night.sqlite"
    recorder = Recorder(path, fleet="demo", refresh_s=1.0)
    hub.subscribe(recorder)

    def tick() -> None:
        hub.poll_once()
        hub.tick()
        clock.now += 1.0

    app = GpuconApp(hub, autostart=False, mode="demo", read_only=True, recording=recorder.status)
    try:
        async with app.run_test(size=(160, 24)) as pilot:
            tick()
            await _until(pilot, lambda: recorder.frames_written >= 1, "a frame written")
            app.screen.query_one(StatusBar).show_snapshot(hub.latest)  # type: ignore[arg-type]
            await _until(pilot, lambda: "REC night.sqlite" in _bar(app), "the REC badge")
            assert "KiB" in _bar(app) or "MiB" in _bar(app)
            # the disk is full: no page beyond those the file has
            pages = int(recorder.store.db.execute("PRAGMA page_count").fetchone()[0])
            recorder.store.db.execute(f"PRAGMA max_page_count = {pages}")
            for _ in range(30):
                if recorder.error:
                    break
                tick()
                await pilot.pause(0.1)
            assert recorder.error is not None and "full" in recorder.error
            seq = hub.latest.seq if hub.latest else 0
            tick()  # the console goes on: the hub still ticks, the recorder takes nothing
            assert hub.latest is not None and hub.latest.seq == seq + 1
            assert recorder.status().waiting == 0
            app.screen.query_one(StatusBar).show_snapshot(hub.latest)
            await _until(pilot, lambda: "REC FAILED night.sqlite" in _bar(app), "REC FAILED")
    finally:
        recorder.close()
