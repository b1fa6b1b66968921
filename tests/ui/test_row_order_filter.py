"""The filter and the sorts on a simulated fleet give what working them out afresh gives.

``RowOrder`` keeps the last unfiltered order and the names index between keys: typing into
the filter re-filters that order, a live sort's values come from the snapshot's entities, and
a tick whose live values stayed in their places keeps the order. Each result is compared with
a fresh ``RowOrder`` on fully built rows.
"""

from __future__ import annotations

from gpucon.widgets.row_builder import RowBuilder
from gpucon.widgets.row_order import SORT_VALUE, RowOrder, search_text
from tests.ui.rig import sim_rig, table_of


def test_typing_a_filter_under_every_sort_matches_a_fresh_order() -> None:
    rig = sim_rig(size=32, scenario="backend-down")
    builder = RowBuilder(2500.0)
    rows = builder.build(rig.step(10))
    built = dict(rows.items())
    for column in ("default", *SORT_VALUE):
        for reverse in (False, True):
            order = RowOrder(column, reverse)
            order.update(rows)
            unfiltered = list(order.keys)
            for text in ("g", "gpu", "gpu-01", "gpu-0", "llama", "", "zz"):
                order.set_filter(text)
                fresh = RowOrder(column, reverse)
                fresh.update(built)
                fresh.set_filter(text)
                assert order.keys == fresh.keys, (column, reverse, text)
                needle = text.strip().lower()
                expected = [k for k in unfiltered if needle in search_text(built[k])]
                assert order.keys == expected, (column, reverse, text)


def test_a_live_sort_keeps_its_order_while_values_stay_in_place_and_follows_them_otherwise() -> (
    None
):
    rig = sim_rig(size=32)
    builder = RowBuilder(2500.0)
    order = RowOrder("activity", True)
    for _ in range(8):
        rows = builder.build(rig.step())
        sorts = order.sorts
        before = list(order.keys)
        order.update(rows)
        fresh = RowOrder("activity", True)
        fresh.update(dict(rows.items()))
        assert order.keys == fresh.keys
        if order.sorts == sorts:  # not sorted again: the order it had was still the order
            assert order.keys == before
    # a tick with no new reading: the same values, so nothing is sorted again
    rig.clock.now += 1.0
    sorts, before = order.sorts, list(order.keys)
    order.update(builder.build(rig.hub.tick()))
    assert order.sorts == sorts and order.keys == before


async def test_the_filter_box_is_mounted_hidden_after_the_first_frame_and_slash_shows_it() -> None:
    from textual.widgets import Input

    from tests.ui.rig import wait_until

    app = sim_rig(size=8).app(warmup=3)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert not list(screen.query("#filter"))  # not built for the first frame

        def mounted() -> bool:
            return bool(list(screen.query("#filter")))

        await wait_until(pilot, mounted)
        box = screen.query_one("#filter", Input)
        assert not box.display and not box.has_focus
        await pilot.press("slash")
        assert box.display and box.has_focus
        table = table_of(app)
        every = list(table.order.keys)
        text = every[-1][0]  # one slot's id
        await pilot.press(*text)
        shown = table.order.keys
        assert shown and len(shown) < len(every)
        assert all(text in search_text(table.order.rows[k]) for k in shown)
