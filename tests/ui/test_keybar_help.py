"""The key bar never cuts Help: at 120 columns the demo's bar ended `b R…▏^p Commands`, Help
(the key that lists every other one) cut with the rest. Nor a key in the middle of its word:
the lab's console at 150 columns ended `q Qui… ? Help`; short of room, whole keys go."""

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
        assert "…" not in bar  # whole keys only


async def test_a_narrow_bar_leaves_out_whole_keys() -> None:
    app = sim_rig().app(warmup=2)
    async with app.run_test(size=(240, 30)) as pilot:
        await pilot.pause()
        keybar = app.screen.query_one(KeyBar)
        full = keybar.render_line(0).text.split("▏")[0].removesuffix("? Help ").split()
        for width in range(60, 240, 7):
            await pilot.resize_terminal(width, 30)
            await pilot.pause()
            left = keybar.render_line(0).text.split("▏")[0].rstrip().removesuffix("? Help")
            words = left.split()
            assert words == full[: len(words)], (width, left)  # a prefix of whole words
            if len(words) < len(full):  # ends before a key (one character), not in a pair
                assert len(full[len(words)]) == 1, (width, left)
