"""Stale values on screen (Pilot): a stale cell is dimmed in the theme's stale colour with its
age, a stale rate is no rate, the queue panel and the detail plots say so, and fresh data
brings the normal style back."""

from __future__ import annotations

from rich.color import Color

from gpucon.screens.detail import DetailScreen
from gpucon.widgets.panels import QueuePanel
from gpucon.widgets.plot import Plot
from tests.ui.rig import Rig, table_of

SIZE = (160, 45)
ROW = "sdxl-gpu-a-gi1"


def segments_of(app: object, backend: str) -> list[tuple[str, Color | None, bool]]:
    """(text, foreground colour, italic) of each segment of the table line of ``backend``."""
    table = table_of(app)  # type: ignore[arg-type]
    for y in range(1, table.size.height):
        strip = table.render_line(y)
        if backend in strip.text:
            return [
                (seg.text, seg.style.color if seg.style else None, bool(seg.style.italic))
                for seg in strip
                if seg.style is not None
            ]
    raise AssertionError(f"{backend} is not on screen")


async def test_a_stale_cell_is_dimmed_and_shows_its_age() -> None:
    rig = Rig()
    app = rig.app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        stale_colour = Color.parse(app.theme_variables["stale"])
        fresh = segments_of(app, ROW)
        assert not any("·" in text for text, _, _ in fresh)
        assert not any(colour == stale_colour for _, colour, _ in fresh)

        rig.clock.now += 45.0  # the source is not read for 45 s: 45 cadences
        app.show_snapshot(rig.hub.tick())
        await pilot.pause()
        stale = segments_of(app, ROW)
        dimmed = [text for text, colour, italic in stale if colour == stale_colour and italic]
        joined = " ".join(dimmed)
        p95 = rig.hub.latest.latency[ROW].p95_ms  # type: ignore[union-attr]
        # the last p95, with its SLO and its age
        assert p95 is not None and f"{p95:.0f}/2500·45s" in joined
        assert "n/a·45s" in joined  # a rate from a stale source is not shown as current
        assert "active" in joined  # the registry state: dimmed (too narrow for the age)
        activity = next(text for text in dimmed if "%" in text)
        assert activity.strip().endswith("·45s") and "█" not in activity  # no bar: not current
        trend = next(text for text in dimmed if "▃" in text)
        assert trend.endswith(" ")  # the sparkline has a gap where the stale sample is
        queue = str(app.screen.query_one(QueuePanel).render())
        assert "stale 45s" in queue

        app.open_detail("gpu-a/gpu0/gi1")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        plot = app.screen.query_one("#plot-activity", Plot)
        assert plot._values[-1] is None  # the plot stops where fresh data stops
        shown = str(plot.render())
        assert "now n/a (last 1 sample stale or missing)" in shown
        assert "[stale 45s]" in str(app.screen.query_one("#detail-info").render())
        app.pop_screen()
        await pilot.pause()

        rig.source.step += 45  # type: ignore[attr-defined]  # the source reads again, now
        app.show_snapshot(rig.step())  # a fresh reading: normal style again
        await pilot.pause()
        again = segments_of(app, ROW)
        assert not any("·" in text for text, _, _ in again)
        assert not any(colour == stale_colour for _, colour, _ in again)
