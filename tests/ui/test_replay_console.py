"""``gpucon replay``: the same console on a recording, read-only, the recorded time always on
screen, and the timeline keys moving it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from gpucon.app import GpuconApp
from gpucon.recording.replay import ReplayFeed
from gpucon.recording.store import RecordingStore
from gpucon.screens.audit import AuditScreen
from gpucon.screens.detail import DetailScreen
from gpucon.screens.fleet import ActionFleetScreen
from gpucon.widgets.panels import AlertsPanel
from gpucon.widgets.replay_banner import ReplayBanner, clock_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "noisy-neighbour.recording.sqlite"
SIZE = (160, 45)


async def _until(pilot: Pilot[int], check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if check():
            return
    raise AssertionError(f"timed out waiting for {what}")


def _banner(app: GpuconApp) -> str:
    banners = app.screen.query(ReplayBanner)
    return str(banners.first().render()) if banners else ""


async def test_replay_keys_move_the_timeline_and_the_time_is_always_shown(
    tmp_path: Path,
) -> None:
    store = RecordingStore(EXAMPLE, readonly=True)
    feed = ReplayFeed(store, paused=True)
    audit = tmp_path / "audit.jsonl"
    audit.write_text("")
    app = GpuconApp(
        feed, mode="replay", read_only=True, replay=feed, audit_file=audit, fleet_name=feed.fleet
    )
    start = feed.timeline.start
    assert start is not None
    try:
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: clock_text(start) in _banner(app), "the banner")
            assert "paused" in _banner(app)
            assert not isinstance(app.screen, ActionFleetScreen)  # read-only: no action keys
            assert "READ-ONLY" in app.badges and "REPLAY" in app.badges
            await pilot.press("right_curly_bracket")  # +1 min
            await _until(pilot, lambda: clock_text(start + 60) in _banner(app), "+1 min")
            await pilot.press("left_square_bracket")  # -10 s
            await _until(pilot, lambda: clock_text(start + 50) in _banner(app), "-10 s")
            await pilot.press("full_stop")  # a step
            await _until(pilot, lambda: clock_text(start + 51) in _banner(app), "a step")
            # to the first alert's start: the alert is on screen, at its recorded time
            first = min(s.start for s in store.alert_spans())
            await pilot.press("left_curly_bracket", "n")
            await _until(pilot, lambda: clock_text(first) in _banner(app), "the first alert")
            panel = app.screen.query_one(AlertsPanel)
            await _until(pilot, lambda: "noisy" in str(panel.render()).lower() or "co-tenant"
                         in str(panel.render()), "the alert in the panel")  # fmt: skip
            await pilot.press("x", "space")  # ×10 and play
            await _until(pilot, lambda: "×10" in _banner(app), "×10")
            await _until(
                pilot,
                lambda: app.snapshot is not None and app.snapshot.taken_at >= first + 10,
                "playing at ×10",
            )
            # the detail screen and the audit screen carry the banner too
            await pilot.press("enter")
            await _until(pilot, lambda: isinstance(app.screen, DetailScreen), "detail")
            await _until(pilot, lambda: "REPLAY" in _banner(app), "the banner on the detail")
            await pilot.press("escape", "A")
            await _until(pilot, lambda: isinstance(app.screen, AuditScreen), "audit")
            await _until(pilot, lambda: "REPLAY" in _banner(app), "the banner on the audit")
    finally:
        feed.stop()
        store.close()


async def test_the_replay_keys_do_not_exist_in_a_live_console() -> None:
    from tests.ui.rig import Rig

    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = {b.binding.id for b in app.screen.active_bindings.values()}
        assert not any(i and i.startswith("replay_") for i in shown)
        assert app.check_action("replay_pause", ()) is False
        await pilot.press("space", "n")  # nothing to move; nothing breaks
        assert not app.screen.query(ReplayBanner)
