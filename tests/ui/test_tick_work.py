"""A tick's work follows what changed and what is on screen, not the fleet's size.

On the 512-GPU simulated fleet (about 3,400 rows) with a frozen clock: in the default order a
tick works out only the rows the table shows and re-sorts nothing; a sort by a live column
reads that column's values off the entities and still builds only the rows shown; the hub
hands on the last merged fleet while no source has read anything new.
"""

from __future__ import annotations

from gpucon.screens.fleet import FleetScreen
from gpucon.widgets.row_builder import build_rows
from tests.ui.rig import sim_rig, table_of

SIZE = (160, 40)


async def test_a_tick_builds_only_the_rows_on_screen_and_does_not_resort() -> None:
    rig = sim_rig(size=512)
    app = rig.app(warmup=5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        table = table_of(app)
        assert table.row_count > 3000
        for _ in range(4):
            built, sorts = screen.rows.rows_built, table.order.sorts
            app.show_snapshot(rig.step())
            await pilot.pause()
            # the rows the table shows (and nothing else) were worked out again
            assert screen.rows.rows_built - built <= table.page_rows
            assert table.order.sorts == sorts  # no name changed, no alert came or went
        # what is shown is the newest snapshot's values
        top = table.order.keys[0]
        assert app.snapshot is not None
        assert table.order.rows[top] == build_rows(app.snapshot, screen.default_slo_ms)[top]

        # a live column: its values are read off the entities, rows are still built lazily
        table.set_sort("activity", True)
        built, sorts = screen.rows.rows_built, table.order.sorts
        app.show_snapshot(rig.step())
        await pilot.pause()
        assert screen.rows.rows_built - built <= table.page_rows
        assert table.order.sorts == sorts + 1  # activity moved: sorted again
        shown = [table.order.rows[k].activity for k in table.order.keys[:20]]
        known = [v for v in shown if v is not None]
        assert known == sorted(known, reverse=True)


def test_the_hub_reuses_the_merged_fleet_while_no_source_read_anything_new() -> None:
    rig = sim_rig(size=8)
    first = rig.step()
    rig.clock.now += 1.0
    again = rig.hub.tick()  # no read in between
    assert again.slots is first.slots and again.backends is first.backends
    assert again.seq == first.seq + 1 and again.history.times[-1] == rig.clock.now
    fresh = rig.step()  # a new reading: merged again
    assert fresh.slots is not first.slots


def test_live_columns_sort_on_the_values_the_rows_show() -> None:
    """Sorts on lazily built rows (live values read off the entities, names off the names)
    give the order the built rows give, for every column and both directions."""
    from gpucon.widgets.row_builder import RowBuilder
    from gpucon.widgets.row_order import SORT_VALUE, RowOrder

    rig = sim_rig(size=16, scenario="backend-down")
    snapshot = rig.step(20)
    rows = RowBuilder(2500.0).build(snapshot)
    built = dict(rows.items())
    for column in SORT_VALUE:
        for reverse in (False, True):
            lazy, plain = RowOrder(column, reverse), RowOrder(column, reverse)
            lazy.update(rows)
            plain.update(built)
            assert lazy.keys == plain.keys, column
        assert any(SORT_VALUE[column](r) is not None for r in built.values())


def test_row_keys_are_reused_while_no_row_comes_or_goes() -> None:
    from msgspec.structs import replace

    from gpucon.widgets.row_builder import RowBuilder

    rig = sim_rig(size=8)
    builder = RowBuilder(2500.0)
    first = builder.build(rig.step())
    second = builder.build(rig.step())
    assert second.keys_dict is first.keys_dict  # values moved, no row came or went
    snapshot = rig.step()
    name, backend = next(iter(snapshot.backends.items()))
    moved = dict(snapshot.backends)
    moved[name] = replace(backend, slot_id="elsewhere")
    third = builder.build(replace(snapshot, backends=moved))
    assert third.keys_dict is not first.keys_dict
    assert ("elsewhere", name) in third and (backend.slot_id, name) not in third
    assert set(third) == set(build_rows(replace(snapshot, backends=moved), 2500.0))
