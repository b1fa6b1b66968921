"""The fleet screen driven with Pilot: data, sort, filter, detail, help, palette, keymap."""

from __future__ import annotations

import re
import threading

import pytest
from textual.message import Message

from gpucon.app import GpuconApp
from gpucon.messages import SnapshotArrived
from gpucon.model.snapshot import Snapshot
from gpucon.screens.detail import DetailScreen
from gpucon.screens.fleet import FleetScreen
from gpucon.screens.help import HelpScreen
from gpucon.widgets.panels import AlertsPanel, QueuePanel
from gpucon.widgets.slot_rows import COLUMNS
from tests.ui.rig import Rig, table_lines, table_of

SIZE = (160, 45)


async def test_table_fills_with_every_slot_and_backend() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = table_of(app)
        assert table.row_count == 11
        lines = table_lines(app)
        assert lines[0].startswith("HOST")
        assert any("sdxl-gpu-a-gi1" in line for line in lines)
        assert any("n/a" in line and "gi9" in line for line in lines)  # unknown activity
        status = app.screen.query_one("#status").render()
        assert "DEMO" in str(status) and "hand ok" in str(status)


def count_shown(app: GpuconApp) -> list[int]:
    """The seq of every snapshot ``app`` shows from now on, in order."""
    shown: list[int] = []
    original = app.show_snapshot

    def counting(snapshot: Snapshot) -> None:
        shown.append(snapshot.seq)
        original(snapshot)

    app.show_snapshot = counting  # type: ignore[method-assign]
    return shown


async def test_snapshot_message_is_replaceable_and_applied() -> None:
    rig = Rig()
    app = rig.app()
    first, second = rig.step(), rig.step()
    assert SnapshotArrived(second).can_replace(SnapshotArrived(first))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = count_shown(app)
        app.post_message(SnapshotArrived(first))
        app.post_message(SnapshotArrived(second))
        await pilot.pause()
        assert app.snapshot is second
        assert shown == [second.seq]  # the older pending snapshot was replaced, never applied


async def test_hub_thread_keeps_one_snapshot_waiting_for_the_ui() -> None:
    """The UI busy while the hub ticks: one SnapshotArrived waits, not one a tick (each holds
    a whole fleet), and the UI then shows the newest snapshot, once."""
    rig = Rig()
    app = rig.app()
    snapshots = [rig.step() for _ in range(4)]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = count_shown(app)
        posted: list[Message] = []
        post = app.post_message

        def posting(message: Message) -> bool:
            posted.append(message)
            return post(message)

        app.post_message = posting  # type: ignore[method-assign]

        def hub_ticks(ticks: list[Snapshot]) -> None:
            for snapshot in ticks:
                app._from_hub_thread(snapshot)

        # the UI's thread is held here (the test does not await) while the hub's posts three
        hub = threading.Thread(target=hub_ticks, args=(snapshots[:3],))
        hub.start()
        hub.join(timeout=30)
        assert len([m for m in posted if isinstance(m, SnapshotArrived)]) == 1
        await pilot.pause()
        assert shown == [snapshots[2].seq] and app.snapshot is snapshots[2]
        # and the next tick is posted again, not held back by the one already shown
        hub = threading.Thread(target=hub_ticks, args=(snapshots[3:],))
        hub.start()
        hub.join(timeout=30)
        await pilot.pause()
        assert shown == [snapshots[2].seq, snapshots[3].seq]
        assert len([m for m in posted if isinstance(m, SnapshotArrived)]) == 2


async def test_sort_keys_and_header_click() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        table = table_of(app)
        # the default order holds still: problems first, then host, GPU, slot
        assert table.order.sort_key == "default" and not table.order.reverse
        await pilot.press("s")
        assert table.order.sort_key == "host"
        await pilot.press("S")
        assert table.order.sort_key == "host" and table.order.reverse
        # click the BACKEND header: sort by backend
        x = next(x for c, x, _ in table._columns() if c.key == "backend")
        await pilot.click(table, offset=(x + 1, 0))
        assert table.order.sort_key == "backend"
        names = [k[1] for k in table.order.keys]
        assert names == sorted(names, reverse=table.order.reverse)
        await pilot.click(table, offset=(x + 1, 0))
        assert [k[1] for k in table.order.keys] == sorted(names, reverse=table.order.reverse)
        assert "BACKEND ▼" in table_lines(app)[0] or "BACKEND ▲" in table_lines(app)[0]


async def test_filter_with_slash_then_escape() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        table = table_of(app)
        await pilot.press("slash", "b", "e", "r", "t")
        assert table.row_count == 1
        await pilot.press("enter")
        assert table.has_focus and table.row_count == 1
        await pilot.press("escape")
        assert table.row_count == 11


async def test_cursor_keys_and_enter_open_detail() -> None:
    rig = Rig()
    app = rig.app()
    async with app.run_test(size=SIZE) as pilot:
        table = table_of(app)
        await pilot.press("end")
        assert table.cursor == table.row_count - 1
        await pilot.press("home", "down", "down", "up")
        assert table.cursor == 1
        slot_id = table.order.keys[1][0]
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        assert app.screen.slot_id == slot_id
        app.show_snapshot(rig.step())  # the detail follows new snapshots
        await pilot.pause()
        info = app.screen.query_one("#detail-info").render()
        assert slot_id in str(info)
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)


async def test_detail_names_the_activity_metric_and_mps() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        app.open_detail("vm:vm-gpu-a-1")
        await pilot.pause()
        info = str(app.screen.query_one("#detail-info").render())
        assert "nvidia-smi utilization" in info
        assert "MPS share" in info and "sd-a: 60%" in info
        backends = str(app.screen.query_one("#detail-backends").render())
        assert "sd-vm-gpu-a-1-a" in backends and "sd-vm-gpu-a-1-b" in backends
        app.pop_screen()
        app.open_detail("gpu-a/gpu0/gi9")
        await pilot.pause()
        assert "n/a: no source reports activity" in str(
            app.screen.query_one("#detail-info").render()
        )


async def test_not_ready_backend_in_table_detail_and_alerts() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        row = next(line for line in table_lines(app) if "sd-vm-gpu-a-2-b" in line)
        assert "NOT READY" in row
        alerts = str(app.screen.query_one("#alerts").render())
        assert "sd-vm-gpu-a-2-b  not ready: http status 503" in alerts
        app.open_detail("vm:vm-gpu-a-2")
        await pilot.pause()
        backends = str(app.screen.query_one("#detail-backends").render())
        lines = backends.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("sd-vm-gpu-a-2-b"))
        # how long it has said so (at least as long as this console has watched), how long ago
        assert "NOT READY" in lines[at + 1]
        assert re.search(r"http: status 503 for ≥\d+s, 0\.0s ago", lines[at + 1]), lines[at + 1]
        ok = next(i for i, line in enumerate(lines) if line.startswith("sd-vm-gpu-a-2-a"))
        assert "serving" in lines[ok + 1] and "http: ready" in lines[ok + 1]


async def test_click_selects_and_double_click_opens() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        table = table_of(app)
        await pilot.click(table, offset=(5, 3))
        assert table.cursor == 2
        await pilot.click(table, offset=(5, 3), times=2)
        assert isinstance(app.screen, DetailScreen)


async def test_help_lists_keys_with_their_ids() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        for binding_id in ("filter", "sort", "open_detail", "quit", "drain"):
            assert binding_id in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_keys_are_remappable_from_config() -> None:
    app = Rig().app(keys={"filter": "f", "sort": "o", "quit": "x"})
    async with app.run_test(size=SIZE) as pilot:
        table = table_of(app)
        await pilot.press("o")
        assert table.order.sort_key == "host"
        await pilot.press("f", "b", "e", "r", "t", "enter")
        assert table.row_count == 1
        await pilot.press("x")
        await pilot.pause()
    assert app.return_code == 0


async def test_unknown_key_id_gives_one_notification() -> None:
    app = Rig().app(keys={"no_such_binding": "z"})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert [n.message for n in app._notifications] == [
            "[keys]: unknown binding id 'no_such_binding'"
        ]


async def test_command_palette_offers_gpucon_commands() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for column in COLUMNS:
            assert f"Sort by {column.title}" in titles
        assert "Filter slots" in titles and "Drain" in titles
        sort_by_host = next(
            c for c in app.get_system_commands(app.screen) if c.title == "Sort by HOST"
        )
        sort_by_host.callback()
        await pilot.pause()
        assert table_of(app).order.sort_key == "host"
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "CommandPalette"


async def test_activity_header_tooltip_names_the_metrics() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        table = table_of(app)
        x = next(x for c, x, _ in table._columns() if c.key == "activity")
        await pilot.hover(table, offset=(x + 1, 0))
        tip = str(table.tooltip)
        assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in tip and "GPM SM_OCCUPANCY" in tip
        host_x = next(x for c, x, _ in table._columns() if c.key == "host")
        await pilot.hover(table, offset=(host_x + 1, 0))
        assert table.tooltip == "host name"


async def test_selected_row_stays_in_view_when_the_table_resorts() -> None:
    from tests.ui.rig import sim_rig

    app = sim_rig(size=64).app(warmup=3)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        table = table_of(app)
        assert table.row_count > 3 * table.page_rows
        table.set_sort("activity", True)  # a live sort: rows move as values change
        table.move_cursor(0)
        table.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        await pilot.press("down", "down", "down")
        key = table.cursor_key
        assert key is not None and table.cursor == 3
        # sort by slot id, reversed: the selected row moves far below the first page
        table.set_sort("slot", not (table.order.sort_key == "slot" and table.order.reverse))
        await pilot.pause()
        top = round(table.scroll_y)
        assert table.cursor_key == key and table.cursor >= table.page_rows
        assert top <= table.cursor < top + table.page_rows  # still on screen
        assert table.cursor - top == 3  # on the line it was on
        assert key[1] and key[1] in table_lines(app)[table.cursor - top + 1]
        # scrolled away by hand (cursor out of view): a re-sort does not pull the view back
        table.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        table.set_sort("slot", not table.order.reverse)
        await pilot.pause()
        assert round(table.scroll_y) == 0


async def test_noc_pages_do_not_follow_the_cursor_on_a_resort() -> None:
    from tests.ui.rig import sim_rig

    app = sim_rig(size=64).app(warmup=3, noc=True, page_s=3600)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        table = table_of(app)
        assert round(table.scroll_y) == 0 and table.cursor == 0
        table.set_sort("slot", not (table.order.sort_key == "slot" and table.order.reverse))
        await pilot.pause()
        assert table.cursor >= table.page_rows  # the selected row moved off the page...
        assert round(table.scroll_y) == 0  # ...and the wall screen's page stayed put


async def test_key_bar_names_each_screens_keys_as_remapped() -> None:
    from gpucon.widgets.keybar import KeyBar

    app = Rig().app(keys={"filter": "f"})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bar = str(app.screen.query_one(KeyBar).render())
        assert " f Filter " in bar and " s Sort " in bar and " d Drain " in bar
        assert bar.rstrip().endswith("^p Commands")  # the palette's key on the right
        await pilot.press("enter")  # the detail screen: its own keys
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        bar = str(app.screen.query_one(KeyBar).render())
        assert "Back" in bar and "Drain" not in bar


async def test_the_panels_come_after_the_first_frame_and_nothing_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first frame draws the status bar, the table and the keys over an empty bottom of
    the right size; the queue, GPU and alert panels are mounted into it once it is drawn,
    showing the snapshot the table shows, and the table keeps its place."""
    at_first_frame: list[tuple[object, object, int]] = []
    mount = FleetScreen._mount_panels

    async def noting(self: FleetScreen) -> None:
        if not at_first_frame:
            bottom = self.query_one("#bottom")
            at_first_frame.append((self.table.region, bottom.region, len(bottom.children)))
        await mount(self)

    monkeypatch.setattr(FleetScreen, "_mount_panels", noting)
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table_region, bottom_region, children = at_first_frame[0]
        assert children == 0  # drawn without them
        assert table_region == table_of(app).region
        assert bottom_region == app.screen.query_one("#bottom").region
        assert table_region.height > 0 and bottom_region.height >= 10
        alerts = app.screen.query_one(AlertsPanel)
        queues = app.screen.query_one(QueuePanel)
        assert alerts.snapshot is app.snapshot
        assert "gen" in str(queues.render())  # the rig's queue, shown once mounted


async def test_a_key_for_the_alerts_before_the_panels_come_waits_for_them() -> None:
    app = Rig().app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("exclamation_mark")  # before any pause: the panels may not be there
        await pilot.pause()
        assert app.focused is app.screen.query_one(AlertsPanel)
