"""The key bar never cuts Help: at 120 columns the demo's bar ended `b R…▏^p Commands`, Help
(the key that lists every other one) cut with the rest."""

from __future__ import annotations

import pytest

from gpucon.widgets.keybar import KeyBar
from tests.ui.rig import sim_rig


@pytest.mark.parametrize("width", [80, 120, 150, 200])
async def test_help_stays_on_the_bar_at_every_width(width: int) -> None:
    app = sim_rig().app(warmup=2)
    async with app.run_test(size=(width, 30)) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(KeyBar).render_line(0).text
        assert len(bar) == width
        # short of room, the palette's key keeps its key and drops its word first
        assert bar.rstrip().endswith(("? Help ▏^p Commands", "? Help ▏^p")), bar
        if width >= 200:
            assert bar.rstrip().endswith("? Help ▏^p Commands"), bar
        assert bar.count("? Help") == 1
        assert bar.startswith(" ⏎ Detail")  # the first keys still lead
