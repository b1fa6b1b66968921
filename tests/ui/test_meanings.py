"""Saying what things mean: help explains each column, the palette lists "Keys" once, cells
carry glyphs as well as colours, and the detail plots have a time axis and the SLO line."""

from __future__ import annotations

from gpucon.screens.help import HelpScreen
from gpucon.widgets.plot import Plot, limit_row, time_axis
from gpucon.widgets.row_builder import build_rows
from gpucon.widgets.slot_cells import cell
from gpucon.widgets.slot_rows import COLUMN_BY_KEY
from tests.ui.rig import Rig, sim_rig, table_of

SIZE = (180, 48)


async def test_help_explains_every_column_with_the_trend_span_and_rate_window() -> None:
    app = sim_rig().app(warmup=10)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        width = table_of(app).trend_width
        assert width > 0
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        for title in ("WT", "INFL", "P95/SLO ms", "TREND", "ACT%", "REQ/S", "MEM GiB", "STATE"):
            assert f"\n{title}" in text, title
        assert f"the last {width} samples (one per 1 s refresh: {width} s)" in text
        assert "a rate over 10s" in text  # the simulator's rate window
        assert "NOT READY" in text and "active?" in text
        assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in text


async def test_palette_lists_keys_once() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert titles.count("Keys") == 1


def test_cells_say_in_glyphs_what_colour_says() -> None:
    rows = build_rows(sim_rig(scenario="burst").step(120), 2500.0)
    p95 = COLUMN_BY_KEY["p95"]
    seen: dict[str, str] = {}
    for row in rows.values():
        text, style = cell("p95", row, p95.width, "")
        seen.setdefault(style, text)
    assert seen["breach"].startswith("!")  # over the SLO: "!" as well as red
    first = next(iter(rows.values()))
    text, _ = cell("mem", first, 11, "")
    assert not text.endswith("G")  # the header names the unit (MEM GiB)
    row = first._replace(p95=None, slo=14000.0, backend="b")
    assert cell("p95", row, p95.width, "") == ("n/a/14000", "na")  # ms, as every row
    # the no-data form fits the column whole, whatever the SLO (never cut to "n/a/25…")
    for slo in (2500.0, 800.0, 999.0, 14000.0, 120000.0, 9500.0):
        text, _ = cell("p95", row._replace(slo=slo), p95.width, "")
        assert len(text) <= p95.width and "…" not in text, text
    hot, style = cell("activity", first._replace(activity=99.0), 10, "")
    assert style == "hot" and "!" in hot


def test_time_axis_and_limit_row() -> None:
    axis = time_axis(120, 1.0)
    assert axis.startswith("-2m") and axis.endswith("now") and "-60s" in axis
    assert len(axis) == 120 and time_axis(30, 1.0).startswith("-30s")
    assert limit_row(100.0, 100.0, 4) == 0  # at the top of the chart
    assert limit_row(50.0, 100.0, 4) == 2
    assert limit_row(150.0, 100.0, 4) is None


async def test_p95_plot_draws_the_slo_line_and_a_time_axis() -> None:
    # 10 s into the burst: the p95 has just crossed its SLO (later it is many times the SLO,
    # whose line then falls on the chart's bottom row)
    app = sim_rig(scenario="burst").app(warmup=20)
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.pause()
        app.open_detail("node-a/gpu0/gi3")
        await pilot.pause()
        await pilot.pause()
        plot = next(p for p in app.screen.query(Plot) if p.limit_name == "SLO")
        text = str(plot.render())
        assert "╌" in text and "SLO" in text.splitlines()[0]
        assert text.splitlines()[-1].strip().endswith("now")


def test_slot_names_its_gpu_while_the_gpu_column_is_dropped() -> None:
    from gpucon.widgets.slot_rows import layout

    narrow = {c.key: c for c, _, _ in layout(78)}
    assert "gpu" not in narrow and narrow["slot"].title == "GPU/SLOT"
    wide = {c.key: c for c, _, _ in layout(178)}
    assert "gpu" in wide and wide["slot"].title == "SLOT" and not wide["slot"].cell_key
    rows = build_rows(sim_rig().step(3), 2500.0)
    mig = rows[("node-a/gpu0/gi1", "sdxl-a0-gi1")]
    assert cell("gpu_slot", mig, 8, "") == ("0/gi1", "")
    vm = next(r for k, r in rows.items() if k[0].startswith("vm:"))
    assert cell("gpu_slot", vm, 8, "")[0] == vm.slot  # a VM's name says which it is


def test_p95_sorts_by_its_ratio_to_the_slo() -> None:
    from gpucon.widgets.row_order import RowOrder

    base = next(iter(build_rows(sim_rig().step(3), 2500.0).values()))
    rows = {
        ("a", "fast-but-tight"): base._replace(p95=90.0, slo=80.0),  # 1.125x: over its SLO
        ("b", "slow-but-fine"): base._replace(p95=9000.0, slo=14000.0),  # 0.64x
        ("c", "no-latency"): base._replace(p95=None, slo=14000.0),
    }
    order = RowOrder("p95", reverse=True)
    order.update(rows)
    assert [k[1] for k in order.keys] == ["fast-but-tight", "slow-but-fine", "no-latency"]
