"""The NOC wall's header fits its width: least important parts go first, whole words only.

A lab-like fleet (three sources, Prometheus down, a fleet name) on the read-only wall at every
width from 60 to 200 columns: the header never runs past the terminal, never cuts a word
(``backe…``), always names the broken source with its age and keeps the alert counts, the
badges and the clock; at 150 and 120 columns nothing is cut at all (SVG snapshots in
test_snapshots.py show which parts are left out).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.model.reading import failed_reading
from gpucon.widgets.status_bar import StatusBar
from tests.ui.fleet_fixture import FrozenClock, HandSource


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def lab_wall() -> GpuconApp:
    """A wall on a fleet read by three sources (the lab's), Prometheus down 12 s (shown 10s)."""
    clock = FrozenClock()
    sources = [HandSource(name=n) for n in ("redis", "readiness", "prometheus")]
    hub = Hub(sources, refresh_s=1.0, clock=clock)
    for tick in range(1, 33):
        for source in sources:
            source.step = tick  # each reading stamped T0 + step: the clock's time
        clock.now += 1.0
        if tick > 20:  # from here on Prometheus is not read
            hub.record(failed_reading("prometheus", clock.now, 2.0, "ConnectionRefusedError"))
            for source in sources[:-1]:
                hub.record(source.read())
        else:
            hub.poll_once()
        hub.tick()
    return GpuconApp(
        hub, autostart=False, clock=clock, noc=True, fleet_name="lab-east", mode="live"
    )


async def test_the_header_fits_every_width_without_cutting_a_word() -> None:
    app = lab_wall()
    async with app.run_test(size=(200, 30)) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(StatusBar)
        full = bar.header(0).plain
        assert "prometheus  DOWN  10s │" in full and "backends" in full
        words = set(full.split()) | {"+2", "1/1"}  # healthy sources counted, page number only
        seen = set()
        for width in range(200, 59, -10):
            await pilot.resize_terminal(width, 30)
            await pilot.pause()
            shown = bar.render_line(0).text.rstrip()
            seen.add(shown)
            assert len(shown) <= width
            # every word on screen is a whole word of the full header (the last may be "…")
            assert set(shown.removesuffix("…").split()) <= words, (width, shown)
            assert "NOC" in shown and "14:13:52" in shown and "crit" in shown
            if width >= 80:
                assert "prometheus  DOWN  10s" in shown and "warn" in shown
                assert not shown.endswith("…")
        assert len(seen) >= 5  # it squeezes step by step, not all or nothing


@pytest.mark.parametrize(
    ("width", "kept", "dropped"),
    [
        # the product name and the counts go first
        (150, ("lab-east", "problems first", "readiness ok <2s"), ("gpucon", "GPUs", "backends")),
        # then the page's subtitle, the healthy sources' ages and the fleet's name
        (120, ("page 1/1", "readiness ok │", "redis ok │"), ("lab-east", "<2s", "problems")),
    ],
)
async def test_at_150_and_120_columns(
    width: int, kept: tuple[str, ...], dropped: tuple[str, ...]
) -> None:
    app = lab_wall()
    async with app.run_test(size=(width, 30)) as pilot:
        await pilot.pause()
        shown = app.screen.query_one(StatusBar).render_line(0).text.rstrip()
        assert "…" not in shown and "prometheus  DOWN  10s" in shown
        for part in kept:
            assert part in shown, (part, shown)
        for part in dropped:
            assert part not in shown, (part, shown)
