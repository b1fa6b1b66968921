"""The filter and the sorts on a simulated fleet give what working them out afresh gives.

``RowOrder`` keeps the last unfiltered order and the names index between keys: typing into
the filter re-filters that order, a live sort's values come from the snapshot's entities, and
a tick whose live values stayed in their places keeps the order. Each result is compared with
a fresh ``RowOrder`` on fully built rows.
"""

from __future__ import annotations

from gpucon.widgets.row_builder import RowBuilder
from gpucon.widgets.row_order import SORT_VALUE, RowOrder, search_text
from tests.ui.rig import sim_rig


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
