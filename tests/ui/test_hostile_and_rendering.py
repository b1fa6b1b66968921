"""Hostile fleet names render literally; the slot table draws only visible, changed rows."""

from __future__ import annotations

from msgspec.structs import replace

from gpucon.model.fleet import Backend, BackendState
from gpucon.widgets.slot_table import SlotTable
from tests.ui.fleet_fixture import HandSource
from tests.ui.rig import Rig, table_lines, table_of

SIZE = (160, 45)
MARKUP = "[bold red]x[/]"
ESCAPE = "\x1b[31mevil\x1b]0;pwned\x07"
WIDE = "推理服务器🚀" * 12


def hostile_rig() -> Rig:
    source = HandSource(
        host_names=(MARKUP, ESCAPE),
        extra_backends=[
            Backend(name=WIDE, slot_id="gpu-z/gpu0/gi1", model=MARKUP, weight=1.0),
            Backend(name="[link=http://x]click[/link]\x1b[2J", slot_id=None, model="m"),
        ],
    )
    return Rig(source=source)


async def test_hostile_names_render_literally_without_breaking_layout() -> None:
    app = hostile_rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = table_of(app)
        width = table.size.width
        for y in range(table.size.height):
            strip = table.render_line(y)
            assert strip.cell_length == width, f"line {y} is {strip.cell_length} wide"
            for segment in strip:
                assert "\x1b" not in segment.text and "\x07" not in segment.text
        text = "\n".join(table_lines(app))
        assert MARKUP[:8] in text  # "[bold re" literally (the column may cut the rest)
        assert "evil" in text and "pwned" not in text  # the OSC title is dropped whole
        assert "推理" in text and "[link=" in text
        # open the detail of the hostile host's slot: still literal, still one line each
        table.move_cursor(next(i for i, k in enumerate(table.order.keys) if k[1] == WIDE))
        await pilot.press("enter")
        await pilot.pause()
        svg = app.export_screenshot()
        assert "\x1b" not in svg
        await pilot.press("escape")
        # the alerts and queue panels got the same names
        alerts = str(app.screen.query_one("#alerts").render())
        assert "\x1b" not in alerts


async def test_hostile_alert_targets_stay_literal() -> None:
    app = hostile_rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        alerts = app.screen.query_one("#alerts").render()
        plain = str(alerts)
        assert "evil/gpu0/gi13" in plain  # the low-memory alert on the hostile host's slice
        assert "\x1b" not in plain and "pwned" not in plain
        # a markup-named backend shows its brackets, and no span styles its text
        assert f"sd-vm-{MARKUP}-2-b" in plain
        assert all(
            "red" not in str(span.style) or "x[/]" not in plain[span.start : span.end]
            for span in getattr(alerts, "spans", [])
        )


async def test_only_visible_rows_are_rendered_at_3500_rows() -> None:
    rig = Rig(source=HandSource(hosts=320))  # 320 copies x 11 rows = 3,520 rows
    app = rig.app(warmup=2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = table_of(app)
        assert table.row_count == 3520
        assert 0 < table.row_renders <= table.size.height
        before = table.row_renders
        await pilot.press("pagedown", "pagedown", "end")
        await pilot.pause()
        assert table.row_renders - before <= 3 * table.size.height
        assert table.cursor == 3519


async def test_a_tick_re_renders_only_changed_rows() -> None:
    rig = Rig()
    app = rig.app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = table_of(app)
        assert app.snapshot is not None
        snap = app.snapshot
        # the same values again: nothing is drawn
        before = table.row_renders
        app.show_snapshot(replace(snap, seq=snap.seq + 1))
        await pilot.pause()
        assert table.row_renders == before
        # one backend's inflight changes: exactly its row is drawn again
        backends = dict(snap.backends)
        name = "sdxl-gpu-a-gi1"
        backends[name] = replace(backends[name], inflight=(backends[name].inflight or 0) + 50)
        app.show_snapshot(replace(snap, seq=snap.seq + 2, backends=backends))
        await pilot.pause()
        assert table.row_renders == before + 1
        # a VM slot's memory changes: both of its backends' rows are drawn again
        slots = dict(snap.slots)
        slots["vm:vm-gpu-a-1"] = replace(slots["vm:vm-gpu-a-1"], mem_used_mib=1000.0)
        app.show_snapshot(replace(snap, seq=snap.seq + 3, backends=backends, slots=slots))
        await pilot.pause()
        assert table.row_renders == before + 3


async def test_theme_change_redraws_rows() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.screen.query_one(SlotTable)
        before = table.row_renders
        app.theme = "gpucon-light"
        await pilot.pause()
        assert table.row_renders >= before + table.row_count


async def test_hostile_owner_and_reason_in_the_detail() -> None:
    source = HandSource(
        extra_backends=[
            Backend(
                name="evil-owner",
                slot_id="gpu-a/gpu0/gi1",
                state=BackendState.DRAINED,
                owner="\x1b]0;pwned\x07[red]root[/red]",
                reason="\x1b[2Jwiped [blink]x[/blink]",
            )
        ]
    )
    app = Rig(source=source).app()
    async with app.run_test(size=SIZE) as pilot:
        app.open_detail("gpu-a/gpu0/gi1")
        await pilot.pause()
        text = str(app.screen.query_one("#detail-backends").render())
        assert "[red]root[/red]" in text and "wiped [blink]x[/blink]" in text
        assert "\x1b" not in text and "pwned" not in text


async def test_a_changed_value_repaints_only_its_cells() -> None:
    """Textual writes only repainted cells: a changed inflight costs its column, not a line."""
    from textual.geometry import Region

    rig = Rig()
    app = rig.app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = table_of(app)
        assert app.snapshot is not None
        snap = app.snapshot
        painted: list[Region] = []
        original = table.refresh

        def spy(
            *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
        ) -> SlotTable:
            painted.extend(regions)
            return original(*regions, repaint=repaint, layout=layout, recompose=recompose)

        table.refresh = spy  # type: ignore[method-assign,assignment]
        backends = dict(snap.backends)
        name = "sdxl-gpu-a-gi1"
        backends[name] = replace(backends[name], inflight=(backends[name].inflight or 0) + 50)
        app.show_snapshot(replace(snap, seq=snap.seq + 1, backends=backends))
        await pilot.pause()
        columns = {c.key: (x, w) for c, x, w in table._columns()}
        x, w = columns["inflight"]
        index = next(i for i, key in enumerate(table.order.keys) if key[1] == name)
        y = index - round(table.scroll_y) + 1
        assert painted == [Region(x, y, w + 1, 1)]
        # the cursor moving to the row repaints the whole line, both lines
        painted.clear()
        table.move_cursor(table.cursor + 1)
        assert all(r.x == 0 and r.width == table.content_width for r in painted)


def test_ages_are_coarse_and_change_rarely() -> None:
    from gpucon.widgets import fmt

    assert [fmt.since(v) for v in (None, 0.0, 1.9, 2.0, 9.9, 10.0, 59.0, 60.0, 7199.0)] == [
        "n/a",
        "<2s",
        "<2s",
        "2s",
        "9s",
        "10s",
        "55s",
        "1m",
        "1h",
    ]
    assert fmt.since(7200.0) == "2h"
    # one age format: a stale cell, the status bar and an alert say the same for one outage
    assert all(fmt.since(t / 4) == fmt.age(t / 4) for t in range(0, 4 * 90_000, 37))
    # one text for every second of a 1 s-cadence source's age: the status bar stays put
    assert {fmt.since(t / 10) for t in range(0, 15)} == {"<2s"}
