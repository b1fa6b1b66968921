"""The slot table's pure parts: rows from a snapshot, column layout, sort and filter order."""

from __future__ import annotations

from gpucon.model.fleet import Health
from gpucon.widgets import fmt
from gpucon.widgets.p95_cell import WIDTH
from gpucon.widgets.row_builder import build_rows
from gpucon.widgets.row_order import RowOrder
from gpucon.widgets.slot_cells import cell
from gpucon.widgets.slot_rows import COLUMNS, RowKey, RowValues, layout
from tests.ui.fleet_fixture import FrozenClock, HandSource, advance, hub_with


def snapshot_rows() -> dict[RowKey, RowValues]:
    source, clock = HandSource(), FrozenClock()
    hub = hub_with(source, clock)
    return build_rows(advance(hub, source, clock, 3), 2500.0)


def test_one_row_per_slot_and_backend() -> None:
    rows = snapshot_rows()
    # 6 MIG slices and an H200 with one backend each, 2 VMs with two MPS servers each
    assert len(rows) == 11
    vm_rows = [k for k in rows if k[0] == "vm:vm-gpu-a-1"]
    assert sorted(b for _, b in vm_rows) == ["sd-vm-gpu-a-1-a", "sd-vm-gpu-a-1-b"]


def test_unknown_activity_shows_na_not_zero() -> None:
    rows = snapshot_rows()
    row = rows[("gpu-a/gpu0/gi9", "sd15-gpu-a-gi9")]
    assert row.activity is None
    assert cell("activity", row, 10, "") == ("n/a", "na")
    assert fmt.pct(None) == "n/a" and fmt.mem(None, None) == "n/a"


def test_stale_source_marks_rows() -> None:
    source, clock = HandSource(), FrozenClock()
    hub = hub_with(source, clock)
    advance(hub, source, clock, 2)
    source.health = Health.DOWN
    rows = build_rows(advance(hub, source, clock), 2500.0)
    assert all(r.stale for r in rows.values())


def test_a_stale_value_is_dimmed_with_its_age_and_a_stale_rate_is_not_a_rate() -> None:
    source, clock = HandSource(), FrozenClock()
    hub = hub_with(source, clock)
    fresh = build_rows(advance(hub, source, clock, 3), 2500.0)
    key = ("gpu-a/gpu0/gi1", "sdxl-gpu-a-gi1")
    assert not fresh[key].stale
    assert cell("p95", fresh[key], 12, "")[1] != "stale"
    clock.now += 45.0  # not read for 45 s: older than two cadences
    row = build_rows(hub.tick(), 2500.0)[key]
    assert row.stale_age("p95") == "45s" and row.stale_age("activity") == "45s"
    assert row.p95 is not None
    assert cell("p95", row, WIDTH, "") == (f"{row.p95:.0f}/2500·45s", "stale")
    assert cell("rps", row, 7, "") == ("n/a·45s", "stale")
    text, style = cell("activity", row, 10, "")
    assert style == "stale" and text.endswith("·45s") and "█" not in text
    assert cell("weight", row, 4, "")[1] == "stale"  # too narrow for the age: dimmed


def test_layout_fits_and_drops_low_priority_columns_first() -> None:
    for width in (60, 80, 120, 160, 240):
        placed = layout(width)
        right = max(x + w for _, x, w in placed)
        assert right <= width
    narrow = {c.key for c, _, _ in layout(80)}
    assert "trend" not in narrow and "activity" in narrow and "p95" in narrow
    assert len(layout(300)) == len(COLUMNS)


def test_order_sorts_unknowns_last_both_ways() -> None:
    rows = snapshot_rows()
    order = RowOrder("activity", reverse=True)
    order.update(rows)
    values = [rows[k].activity for k in order.keys]
    known = [v for v in values if v is not None]
    assert known == sorted(known, reverse=True)
    assert values[-1] is None
    order.set_sort("activity", reverse=False)
    values = [rows[k].activity for k in order.keys]
    assert values[-1] is None and values[0] == min(v for v in values if v is not None)


def test_filter_matches_host_slot_backend_and_model() -> None:
    rows = snapshot_rows()
    order = RowOrder()
    order.update(rows)
    order.set_filter("BERT")
    assert [k[1] for k in order.keys] == ["bert-gpu-b-gi5"]
    order.set_filter("vm-gpu-a-2")
    assert len(order.keys) == 2
    order.set_filter("gpu-b/")
    assert len(order.keys) == 3
    order.set_filter("")
    assert len(order.keys) == len(rows)


def test_resorts_only_when_sort_values_change() -> None:
    rows = snapshot_rows()
    order = RowOrder("host", reverse=False)
    order.update(rows)
    sorts = order.sorts
    key = next(iter(rows))
    busier = dict(rows)
    busier[key] = rows[key]._replace(activity=(rows[key].activity or 0) + 1, inflight=99)
    changed = order.update(busier)
    assert changed == {key}
    assert order.sorts == sorts  # host did not change: no re-sort
    moved = dict(busier)
    moved[key] = busier[key]._replace(host="zzz")
    order.update(moved)
    assert order.sorts == sorts + 1
    assert order.keys[-1] == key


def test_builder_reuses_rows_of_unchanged_entities() -> None:
    from msgspec.structs import replace

    from gpucon.widgets.row_builder import RowBuilder

    source, clock = HandSource(), FrozenClock()
    hub = hub_with(source, clock)
    snap = advance(hub, source, clock, 2)
    builder = RowBuilder(2500.0)
    first = builder.build(snap)
    again = builder.build(snap)
    assert all(again[k] is first[k] for k in first)
    slots = dict(snap.slots)
    slots["gpu-a/gpu0/gi1"] = replace(slots["gpu-a/gpu0/gi1"], activity_pct=1.0)
    changed = builder.build(replace(snap, slots=slots))
    fresh = build_rows(replace(snap, slots=slots), 2500.0)
    assert changed == fresh
    assert [k for k in first if changed[k] is not first[k]] == [
        ("gpu-a/gpu0/gi1", "sdxl-gpu-a-gi1")
    ]


def test_spare_width_goes_to_names_up_to_their_length() -> None:
    from gpucon.widgets.slot_rows import natural_widths

    rows = snapshot_rows()
    natural = natural_widths(rows.values())
    assert natural["backend"] == max(len(r.backend) for r in rows.values())
    placed = {c.key: w for c, _, w in layout(200, natural)}
    assert placed["backend"] == natural["backend"]  # wide enough: no name is cut
    assert placed["host"] == max(8, natural["host"])  # no wider than its longest host
    narrow = {c.key: w for c, _, w in layout(150, natural)}
    # short of room, the backend column is served before the host column
    assert narrow["backend"] >= placed["backend"] or narrow["host"] == 8


def test_a_backend_that_is_not_ready_does_not_look_active() -> None:
    rows = snapshot_rows()
    dead = rows[("vm:vm-gpu-a-2", "sd-vm-gpu-a-2-b")]  # its /v2/health/ready answers 503
    assert dead.ready is False
    assert cell("state", dead, 9, "") == ("NOT READY", "breach")
    # its p95 and rate are from before it stopped: no latency or rate now
    assert cell("p95", dead, WIDTH, "") == ("n/a/2500", "na")
    assert cell("rps", dead, 7, "") == ("n/a", "na")
    alive = rows[("vm:vm-gpu-a-2", "sd-vm-gpu-a-2-a")]
    assert alive.ready is True and cell("state", alive, 9, "") == ("active", "ok")
    assert cell("rps", alive, 7, "") == ("4.0", "")
    # nothing vouches for it: not active-looking either
    assert cell("state", alive._replace(ready=None), 9, "") == ("active?", "warn")
    # taken out on purpose, and dead too: marked with a glyph, not colour alone
    assert cell("state", dead._replace(state="drained"), 9, "") == ("drained ✗", "warn")
    assert cell("state", alive._replace(state="drained"), 9, "") == ("drained", "dim")
    assert cell("state", dead._replace(state="draining"), 9, "")[0] == "NOT READY"


def test_a_drained_or_down_backend_shows_no_p95_as_current() -> None:
    from gpucon.widgets.row_order import SORT_VALUE

    rows = snapshot_rows()
    row = rows[("vm:vm-gpu-a-2", "sd-vm-gpu-a-2-a")]
    assert row.p95 is not None and cell("p95", row, 12, "")[0].endswith("/2500")
    for state in ("drained", "down"):
        # its source still reports the last p95: shown absent and dim, and it sorts as absent
        out = row._replace(state=state)
        assert cell("p95", out, WIDTH, "") == ("—/2500", "dim")
        assert SORT_VALUE["p95"](out) is None
    # a draining backend still finishes requests: its p95 is still a measure of them
    assert cell("p95", row._replace(state="draining"), 12, "")[0].endswith("/2500")


def test_a_fresh_not_ready_wins_over_a_stale_registry_state() -> None:
    rows = snapshot_rows()
    dead = rows[("vm:vm-gpu-a-2", "sd-vm-gpu-a-2-b")]  # its /v2/health/ready answers 503
    # Redis is down: the registry's last state, weight and in-flight are stale; the readiness
    # verdict (drawn from fresh signals only) still says not ready
    stale = dead._replace(stale=(("weight", "45s"), ("state", "45s"), ("inflight", "45s")))
    assert cell("state", stale, 9, "") == ("NOT READY", "breach")
    assert cell("weight", stale, 4, "")[1] == "stale"  # the registry part keeps its mark
    assert cell("inflight", stale, 6, "")[1] == "stale"
    # a drained one that is dead: still marked, in the stale style
    assert cell("state", stale._replace(state="drained"), 9, "") == ("drained ✗", "stale")
    # nothing fresh says otherwise: the stale registry state, dimmed
    assert cell("state", stale._replace(ready=None), 9, "") == ("active", "stale")


def test_a_slot_id_cut_short_keeps_its_end() -> None:
    rows = snapshot_rows()
    row = next(iter(rows.values()))._replace(slot="lab/gpu0/gi1", gpu="")
    for key in ("slot", "gpu_slot"):
        assert cell(key, row, 9, "")[0] == "…gpu0/gi1"  # not "lab/gpu0…": rows differ here
        assert cell(key, row._replace(slot="lab/gpu0/gi2"), 9, "")[0] == "…gpu0/gi2"
    assert cell("gpu_slot", row, 12, "")[0] == "lab/gpu0/gi1"  # room enough: whole
    assert cell("gpu_slot", row._replace(gpu="0 A100", slot="gi1"), 8, "")[0] == "0/gi1"
