"""The P95/SLO cell: one format for every row (ms over ms, the SLO always shown, a stale p95 with
its age), and no latency shown as current for a backend its readiness says is down."""

from __future__ import annotations

import re

from gpucon.widgets.p95_cell import MIN_WIDTH, WIDTH, p95_text
from gpucon.widgets.row_builder import RowBuilder, build_rows
from gpucon.widgets.row_order import SORT_VALUE, RowOrder
from gpucon.widgets.slot_cells import cell
from gpucon.widgets.slot_rows import COLUMN_BY_KEY, RowKey, RowValues, layout, natural_widths
from tests.ui.fleet_fixture import FrozenClock, HandSource, advance, hub_with

DEAD = ("vm:vm-gpu-a-2", "sd-vm-gpu-a-2-b")  # its /v2/health/ready answers 503
ALIVE = ("vm:vm-gpu-a-2", "sd-vm-gpu-a-2-a")
# glyph, p95 digits (or n/a, —), "/", SLO digits, and "·age" when stale: nothing else
FORMAT = re.compile(r"^[!~]?(\d+(\.\d)?[kM]?|n/a|—)/(\d+(\.\d)?[kM]?|n/a)(·\d+[smhd])?$")


def snapshot_rows() -> dict[RowKey, RowValues]:
    source, clock = HandSource(), FrozenClock()
    hub = hub_with(source, clock)
    return build_rows(advance(hub, source, clock, 3), 2500.0)


def test_a_not_ready_backend_shows_no_latency_from_the_first_tick_readiness_says_so() -> None:
    rows = snapshot_rows()
    dead = rows[DEAD]
    # its latency source still reports the p95 and rate from before it stopped
    assert dead.ready is False and dead.p95 is not None and dead.rps is not None
    assert cell("state", dead, 9, "")[0] == "NOT READY"
    assert cell("p95", dead, WIDTH, "") == ("n/a/2500", "na")
    assert cell("rps", dead, 9, "") == ("n/a", "na")
    # its latency source stale too: the same cells, no age (readiness, not the source, says)
    both = dead._replace(stale=(("p95", "15s"), ("rps", "15s")))
    assert cell("p95", both, WIDTH, "") == ("n/a/2500", "na")
    assert cell("rps", both, 9, "") == ("n/a", "na")
    # a draining backend that is not ready is NOT READY too; drained is "—", not n/a
    assert cell("p95", dead._replace(state="draining"), WIDTH, "") == ("n/a/2500", "na")
    assert cell("p95", dead._replace(state="drained"), WIDTH, "") == ("—/2500", "dim")
    # it sorts as it shows: absent, below every backend with a current p95
    assert SORT_VALUE["p95"](dead) is None and SORT_VALUE["rps"](dead) is None
    alive = rows[ALIVE]
    assert alive.ready is True and SORT_VALUE["p95"](alive) is not None
    assert cell("p95", alive, WIDTH, "")[0] == f"{alive.p95:.0f}/2500"


def test_a_sort_reads_not_ready_as_absent_as_the_rows_show_it() -> None:
    source, clock = HandSource(), FrozenClock()
    snapshot = advance(hub_with(source, clock), source, clock, 3)
    built = RowBuilder(2500.0).build(snapshot)  # sorted off the snapshot's entities
    plain = build_rows(snapshot, 2500.0)  # sorted off the rows' values
    for rows in (built, plain):
        for key in ("p95", "rps"):
            for reverse in (False, True):
                order = RowOrder(key, reverse=reverse)
                order.update(rows)
                # unknowns sort last in both directions: only absent values after it
                after = order.keys[order.keys.index(DEAD) + 1 :]
                assert all(SORT_VALUE[key](plain[k]) is None for k in after), (key, reverse)


def test_every_row_has_one_format_with_the_slo_in_ms() -> None:
    row = snapshot_rows()[ALIVE]._replace(p95=15.0, slo=2500.0)
    forms = {
        "fresh": row,
        "breach": row._replace(p95=2710.0),
        "near": row._replace(p95=2100.0),
        "none": row._replace(p95=None),
        "stale": row._replace(stale=(("p95", "6s"),)),
        "stale none": row._replace(p95=None, stale=(("p95", "45s"),)),
        "not ready": row._replace(ready=False),
        "drained": row._replace(state="drained"),
    }
    shown = {name: cell("p95", r, WIDTH, "") for name, r in forms.items()}
    assert shown == {
        "fresh": ("15/2500", ""),
        "breach": ("!2710/2500", "breach"),
        "near": ("~2100/2500", "warn"),
        "none": ("n/a/2500", "na"),
        "stale": ("15/2500·6s", "stale"),  # the SLO kept, the age after it
        "stale none": ("n/a/2500·45s", "stale"),
        "not ready": ("n/a/2500", "na"),
        "drained": ("—/2500", "dim"),
    }


def test_the_cell_fits_its_column_whatever_the_values() -> None:
    row = snapshot_rows()[ALIVE]
    for width in (MIN_WIDTH, WIDTH):
        for slo in (80.0, 800.0, 2500.0, 14000.0, 120000.0):
            for p95 in (None, 4.2, 38.0, 1840.0, 13999.0, 112000.0, 2_500_000.0):
                for stale in ((), (("p95", "45s"),), (("p95", "12m"),)):
                    shown = row._replace(p95=p95, slo=slo, stale=stale)
                    text, _ = cell("p95", shown, width, "")
                    assert len(text) <= width and FORMAT.match(text), (p95, slo, stale, text)
                    assert "s/" not in text  # never seconds beside ms
    # ms digits as long as they fit; thousands only for a text that would not
    assert p95_text(112000.0, 14000.0, glyph="!") == "!112000/14000"
    assert p95_text(112000.0, 14000.0, age="45s") == "112k/14k·45s"
    assert p95_text(7590.0, 14000.0, age="30s") == "7590/14000·30s"
    assert p95_text(7590.0, 14000.0, MIN_WIDTH, age="30s") == "7590/14k·30s"
    assert p95_text(4.2, None) == "4.2/n/a"


def test_the_column_takes_its_full_width_only_once_the_names_have_theirs() -> None:
    natural = natural_widths(snapshot_rows().values())
    wide = {c.key: w for c, _, w in layout(150, natural)}
    assert wide["p95"] == WIDTH and wide["backend"] == natural["backend"]
    narrow = {c.key: w for c, _, w in layout(100, natural)}
    # short of room, a name is served first: the cell compacts rather than cut a backend
    assert narrow["p95"] == MIN_WIDTH and COLUMN_BY_KEY["p95"].width == MIN_WIDTH


async def test_a_down_backend_shows_no_rate_while_its_window_winds_down() -> None:
    from tests.ui.rig import sim_rig, table_lines

    rig = sim_rig(scenario="backend-down")
    app = rig.app(warmup=20)  # down since tick 13; its 10 s window still counts ~0.1 req/s
    snapshot = app.snapshot
    assert snapshot is not None
    down = next(b for b in snapshot.backends.values() if b.state.value == "down")
    rate = snapshot.latency[down.name].req_per_s
    assert rate is not None and rate > 0  # what the latency source still reports
    async with app.run_test(size=(150, 30)) as pilot:
        await pilot.pause()
        line = next(x for x in table_lines(app) if f" {down.name} " in x)
        # P95/SLO and REQ/S both say it takes no requests: no number that reads as live traffic
        assert line.split()[-2:] == ["—/14000", "—"], line
    row = build_rows(snapshot, 2500.0)
    key = next(k for k in row if k[1] == down.name)
    assert SORT_VALUE["rps"](row[key]) is None  # sorts as it shows: absent
    for state in ("drained", "down"):
        assert cell("rps", row[key]._replace(state=state), 7, "") == ("—", "dim")


def test_a_stale_rate_sorts_as_the_n_a_it_shows() -> None:
    from gpucon.model.reading import failed_reading
    from gpucon.widgets.row_order import live_values
    from tests.ui.rig import sim_rig

    rig = sim_rig()
    rig.step(20)
    rig.clock.now += 30  # the sim source is not read for 30 s: its rates are no rate now
    rig.hub.record(failed_reading("sim", rig.clock.now, 2.0, "TimeoutError: read timed out"))
    snapshot = rig.hub.tick()
    built = RowBuilder(2500.0).build(snapshot)  # sorted off the snapshot's entities
    plain = build_rows(snapshot, 2500.0)  # sorted off the rows' values
    backends = [k for k in plain if k[1]]
    assert backends and all(plain[k].rps is not None for k in backends)  # the last rates
    for k in backends:
        assert cell("rps", plain[k], 9, "")[0] == "n/a·30s"
        assert SORT_VALUE["rps"](plain[k]) is None  # it sorted by the rate it hides
    values = live_values(built, "rps")
    assert values is not None and all(values[k] is None for k in backends)
