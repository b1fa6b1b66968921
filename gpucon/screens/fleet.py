"""The fleet screen: status bar, slot table, queue, GPU/node and alert panels, the `/` filter.

``FleetScreen`` holds no action bindings at all (read-only and NOC use it as is; its audit
key only reads); ``ActionFleetScreen`` adds drain, undrain, rebalance and probe: it plans
them through an ``ActionRunner`` (thread workers), shows the ``PlanReady`` plan for
confirmation and hands the confirmed plan back to the runner, whose progress goes to the
progress screen. In NOC mode the screen cycles table pages and an alerts page.

The table holds still: its default order moves only when an alert starts or ends, and ``z``
pauses it altogether (order and values held, a banner says since when; the status bar keeps
showing each source's health). ``!`` or Tab focuses the alerts; Enter on one, or ``g``, puts
the table's selection on that alert's row, so the action keys act on it next.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from gpucon.model.snapshot import Snapshot
from gpucon.widgets.empty_table import empty_table_note
from gpucon.widgets.keybar import KeyBar
from gpucon.widgets.row_builder import RowBuilder
from gpucon.widgets.safe_text import clean
from gpucon.widgets.slot_table import SlotTable
from gpucon.widgets.status_bar import StatusBar
from gpucon.widgets.tick_prep import TickPrep, alert_counts

if TYPE_CHECKING:
    from textual.widget import AwaitMount

    from gpucon.app import GpuconApp
    from gpucon.recording.status import RecordingStatus
    from gpucon.screens.action_runner import ActionRunner, PlanFailed, PlanReady
    from gpucon.widgets.health_panel import HealthPanel
    from gpucon.widgets.panels import AlertsPanel, QueuePanel


# when the hidden filter box is mounted (seconds after the screen): after the first frame
FILTER_BOX_AFTER_S = 1.5


class FleetScreen(Screen[None]):
    """Every slot with its backend, the queues and the alerts; read-only."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort(1)", "Sort", id="sort"),
        Binding("S", "sort_reverse", "Reverse", id="sort_reverse"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="clear_filter"),
        # the audit log only reads, so it is there in read-only and NOC mode too
        Binding("A", "audit", "Audit", id="audit"),
        Binding("z", "pause", "Pause", id="pause"),
        Binding("exclamation_mark", "focus_alerts", "Alerts", id="focus_alerts"),
        Binding("g", "goto_alert", "Go to alert", id="goto_alert"),
    ]
    # narrower than this, the alerts take the bottom's whole width and the queues one line
    WIDE = 136

    def __init__(
        self,
        *,
        badges: Sequence[str],
        fleet_name: str = "",
        clock: Callable[[], float] = time.time,
        noc: bool = False,
        page_s: float = 10.0,
        default_slo_ms: float = 2500.0,
        recording: Callable[[], RecordingStatus] | None = None,
    ) -> None:
        super().__init__()
        self.badges = tuple(badges)
        self.recording = recording
        self.fleet_name = fleet_name
        self.clock = clock
        self.noc = noc
        self.page_s = page_s
        self.default_slo_ms = default_slo_ms
        self.page = 0
        self._in_cycle = 1  # table pages shown in this NOC cycle
        self._rotation = 1  # the table page the next cycle's rotation starts at
        self.snapshot: Snapshot | None = None
        self.rows = RowBuilder(default_slo_ms)
        # the rows (and what else showing a snapshot reads) worked out on the hub's thread
        # before the snapshot comes here (the app hands each one to ``prep.prepare`` there)
        self.prep = TickPrep(self.rows)
        # paused: since when (epoch s); the table, queues, GPUs and alerts hold what they show
        self.paused_at: float | None = None
        # the bottom's panels being mounted, or mounted (``_mount_panels``)
        self._panels_mounting: AwaitMount | None = None
        # the queues, the GPUs and the alerts once they are mounted
        self._bottom_panels: tuple[QueuePanel, HealthPanel, AlertsPanel] | None = None

    @property
    def gpucon(self) -> GpuconApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield StatusBar(
            self.badges,
            fleet_name=self.fleet_name,
            clock=self.clock,
            show_clock=self.noc,
            recording=self.recording,
            id="status",
        )
        # the pause banner (``z``) above the table and the filter box (``/``) under it are
        # mounted when first asked for; no container holds fewer than two widgets: each
        # widget is built, styled, laid out and drawn before the first frame
        yield SlotTable(id="slots")
        # the bottom's panels (queues, GPUs and nodes, alerts) are mounted into it right
        # after the first frame (``_mount_panels``): styling, laying out and drawing them
        # was a third of the first frame's work. The bottom itself is there from the start,
        # with its height and border, so the table does not move when they come
        # a plain Widget laid out like Horizontal (gpucon.tcss): one stylesheet source fewer
        # to parse before the first frame
        yield Widget(id="bottom")
        yield KeyBar()

    def _panels(self) -> tuple[list[Widget], tuple[QueuePanel, HealthPanel, AlertsPanel]]:
        """The bottom's widgets: queues over the GPUs (and nodes), the alerts beside them;
        and those three panels. (Their modules are imported here: after the first frame.)"""
        from gpucon.widgets.health_panel import HealthPanel
        from gpucon.widgets.panels import AlertsPanel, BottomLeft, QueuePanel

        queues, health, alerts = (
            QueuePanel(id="queues"),
            HealthPanel(id="health"),
            AlertsPanel(id="alerts"),
        )
        panels: list[Widget] = [BottomLeft(queues, health, id="bottom-left")]
        if self.noc:  # the wall's alerts page: counts to read from across a room
            from textual.widgets import Digits, Label

            panels.append(
                Horizontal(
                    Label("CRIT", classes="noc-label -crit"),
                    Digits("0", id="noc-crit"),
                    Label("WARN", classes="noc-label -warn"),
                    Digits("0", id="noc-warn"),
                    id="noc-counts",
                )
            )
        panels.append(alerts)
        return panels, (queues, health, alerts)

    def _mounted_panels(self) -> tuple[QueuePanel, HealthPanel, AlertsPanel] | None:
        """The queues, the GPUs and the alerts: None before they are mounted, or once the
        screen is being taken down."""
        panels = self._bottom_panels
        if panels is None or not all(panel.is_attached for panel in panels):
            return None
        return panels

    async def _mount_panels(self) -> None:
        """After the first frame: the bottom's panels, showing the snapshot the table shows
        (drawn in the frame after the first, tens of milliseconds later)."""
        if self._panels_mounting is not None:  # under way or done (a key asked for them)
            await self._panels_mounting
            return
        try:
            bottom = self.query_one("#bottom")
        except NoMatches:  # the screen is being taken down
            return
        widgets, bottom_panels = self._panels()
        self._panels_mounting = bottom.mount_all(widgets)
        await self._panels_mounting
        self._bottom_panels = bottom_panels
        self._fit_width(self.size.width)
        if self.snapshot is not None:
            self._show_panels(self.snapshot)

    @property
    def table(self) -> SlotTable:
        return self.query_one(SlotTable)

    def on_mount(self) -> None:
        self.table.focus()
        self.prep.order = self.table.order
        self.gpucon.tick_prep = self.prep
        self.table.follow_cursor = not self.noc  # NOC pages scroll by the clock, not the cursor
        if self.noc:
            self.add_class("-noc")
            self.set_interval(self.page_s, self.next_page)
        self._fit_width(self.size.width)
        if self.gpucon.snapshot is not None:
            self.show_snapshot(self.gpucon.snapshot)
        self.call_after_refresh(self._mount_panels)
        # the filter box is not needed for the first frame; mounted hidden a moment later, the
        # first `/` only shows it (mounting an Input took up to 250 ms under ticks)
        self.set_timer(FILTER_BOX_AFTER_S, self._filter_box)

    def on_resize(self) -> None:
        self._fit_width(self.size.width)
        if self.noc:  # how many rows a page holds is known once the table is laid out
            self.call_after_refresh(self._show_page_label)

    def _fit_width(self, width: int) -> None:
        """Alerts first: below ``WIDE`` columns they take the bottom's width, queues one line."""
        narrow = 0 < width < self.WIDE
        self.set_class(narrow, "-narrow")
        # a tall terminal gives the bottom (alerts) a third of its height
        try:
            bottom = self.query_one("#bottom")
        except NoMatches:
            return
        height = self.size.height
        if self.has_class("-alerts-page"):  # the wall's alerts page: the whole screen
            bottom.styles.height = "1fr"
        else:
            bottom.styles.height = 10 if height < 30 else max(13, height // 3)
        panels = self._mounted_panels()
        if panels is None:  # the panels come after the first frame (``_mount_panels``): sized then
            return
        queues = panels[0]
        if queues.compact != narrow:
            queues.compact = narrow
            if self.snapshot is not None:
                queues.show_snapshot(self.snapshot)

    def show_snapshot(self, snapshot: Snapshot) -> None:
        if self.paused_at is not None:
            # held: only the sources' health stays live (the operator must see a feed die)
            with contextlib.suppress(NoMatches):
                self.query_one(StatusBar).show_snapshot(snapshot)
            return
        self.snapshot = snapshot
        try:
            table = self.table
            status = self.query_one(StatusBar)
        except NoMatches:  # widgets not in the DOM (mounting or taken down): the next one paints
            return
        table.set_rate_window(snapshot.rate_window)
        rows = self.prep.rows(snapshot)
        table.show_rows(rows, snapshot.history, self.prep.problems(snapshot, rows))
        table.set_empty_note(empty_table_note(snapshot, filtered=bool(rows)))
        status.show_snapshot(snapshot)
        self._show_panels(snapshot)
        self._show_page_label()

    def _show_panels(self, snapshot: Snapshot) -> None:
        """The bottom's panels, once they are mounted (``_mount_panels``)."""
        panels = self._mounted_panels()
        if panels is None:  # not mounted yet: they show the newest snapshot when they are
            return
        queues, health, alerts = panels
        queues.show_snapshot(snapshot)
        health.show_snapshot(snapshot)
        alerts.show_snapshot(snapshot)
        if self.noc:
            self._show_counts(snapshot)

    # -- pause, alerts -----------------------------------------------------------------------

    def _pause_banner(self) -> Static:
        """The banner over the table that says the data is held, mounted the first time."""
        banner = next(self.query("#pause-banner").results(Static), None)
        if banner is None:
            banner = Static("", id="pause-banner")
            self.mount(banner, before=self.table)
        return banner

    def action_pause(self) -> None:
        """Hold the table's order and values (and the panels), or let them go live again."""
        banner = self._pause_banner()
        if self.paused_at is None:
            self.paused_at = self.clock()
            self.prep.held = True
            # the rings overwrite a view's samples after a few ticks: a held table keeps a
            # copy of what it plots (TREND: the slots' activity)
            self.table.history = self.table.history.frozen({("slot", "activity")})
            key = self.gpucon.get_key_display(self._binding("pause"))
            held = time.strftime("%H:%M:%S", time.localtime(self.paused_at))
            banner.update(
                Text(f" PAUSED — live data held since {held}, {key} to resume ", "bold reverse"),
                layout=False,  # one line whatever it says; showing it lays the screen out
            )
            # a class on the banner, not on the screen: a screen class restyles every widget
            # on it (~10 ms at 2,048 GPUs, while a key waits)
            banner.add_class("-shown")
        else:
            self.paused_at = None
            self.prep.held = False
            banner.remove_class("-shown")
            banner.update("", layout=False)
            latest = self.gpucon.snapshot
            if latest is not None:
                self.show_snapshot(latest)

    def _binding(self, binding_id: str) -> Binding:
        for active in self.active_bindings.values():
            if active.binding.id == binding_id:
                return active.binding
        return Binding(binding_id, binding_id)

    async def action_focus_alerts(self) -> None:
        await self._mount_panels()  # a key pressed before they came waits for them
        panels = self._mounted_panels()
        if panels is not None:
            panels[2].focus()

    async def action_goto_alert(self) -> None:
        """Jump to the row of the highlighted alert (the top one unless the alerts have focus)."""
        await self._mount_panels()
        panels = self._mounted_panels()
        if panels is None:  # the screen is being taken down
            return
        panel = panels[2]
        alerts = panel.snapshot.alerts if panel.snapshot is not None else ()
        if not alerts:
            self.notify("no alerts", title="gpucon")
            return
        alert = panel.selected if panel.has_focus else alerts[0]
        if alert is not None:
            self.jump_to(alert.target)

    def on_alerts_panel_jump(self, message: AlertsPanel.Jump) -> None:
        message.stop()
        self.jump_to(message.alert.target)

    def jump_to(self, target: str) -> None:
        """Select the row ``target`` names and give the table the focus."""
        table = self.table
        if table.select_target(target):
            table.focus()
        else:
            self.notify(
                f"{clean(target)}: no row in the table (a queue, a source or a node)",
                title="gpucon",
                markup=False,
            )

    def _show_counts(self, snapshot: Snapshot) -> None:
        from textual.widgets import Digits  # the NOC wall's alone: imported with its screen

        crit, warn = alert_counts(snapshot.alerts)
        try:
            self.query_one("#noc-crit", Digits).update(str(crit))
            self.query_one("#noc-warn", Digits).update(str(warn))
        except NoMatches:
            pass

    def _show_page_label(self) -> None:
        if not self.noc:
            return
        if self.has_class("-alerts-page"):
            label = "ALERTS"
        else:
            label = f"page {self.page + 1}/{self.table_pages}"
            if self.page == 0:
                label += " problems first"
        self.query_one(StatusBar).set_page_label(label)

    # -- sorting and filtering -------------------------------------------------------------

    def action_sort(self, step: int) -> None:
        self.table.cycle_sort(step)

    def action_sort_reverse(self) -> None:
        order = self.table.order
        self.table.set_sort(order.sort_key, not order.reverse)

    async def _filter_box(self) -> Input:
        """The filter box (hidden until ``/``), mounted the first time it is asked for."""
        box = next(self.query("#filter").results(Input), None)
        if box is None:
            box = Input(
                placeholder="filter: host, slot, backend or model (Enter keeps, Esc clears)",
                id="filter",
            )
            await self.mount(box, after=self.table)
        return box

    async def action_filter(self) -> None:
        box = await self._filter_box()
        box.add_class("-shown")
        box.focus()

    def action_audit(self) -> None:
        self.gpucon.open_audit()

    def action_clear_filter(self) -> None:
        box = next(self.query("#filter").results(Input), None)
        if box is not None:
            box.value = ""
            box.remove_class("-shown")
        self.table.set_filter("")
        self.table.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.table.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value:
                event.input.remove_class("-shown")
            self.table.focus()

    def on_slot_table_selected(self, event: SlotTable.Selected) -> None:
        self.gpucon.open_detail(event.key[0])

    # -- NOC pages -------------------------------------------------------------------------

    # table pages a NOC cycle shows before its alerts page: page 1 (the problems) and then
    # the next ones in rotation, so a 3,000-slot fleet shows its alerts every few pages, not
    # after a hundred
    PAGES_PER_CYCLE = 4

    @property
    def table_pages(self) -> int:
        table = self.table
        return max(1, -(-table.row_count // table.page_rows))

    def next_page(self) -> None:
        """Page 1, then the next table pages in rotation, then the alerts page; again."""
        table = self.table
        pages = self.table_pages
        if self.has_class("-alerts-page"):
            self.page, self._in_cycle = 0, 1
            self.remove_class("-alerts-page")
            self._fit_width(self.size.width)
            table.show_page(0)
        elif self._in_cycle >= min(self.PAGES_PER_CYCLE, pages):
            self.add_class("-alerts-page")
            self._fit_width(self.size.width)
        else:
            if not 1 <= self._rotation < pages:
                self._rotation = 1
            self.page = self._rotation
            self._rotation += 1
            self._in_cycle += 1
            table.show_page(self.page)
        self._show_page_label()


NO_WRITE_PATH = "no write path was built for this fleet (is its [redis] registry configured?)"


class ActionFleetScreen(FleetScreen):
    """The fleet screen with the action keys; built only when controls may exist."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "act('drain')", "Drain", id="drain"),
        Binding("u", "act('undrain')", "Undrain", id="undrain"),
        Binding("b", "act('rebalance')", "Rebalance", id="rebalance"),
        Binding("p", "act('probe')", "Probe", id="probe"),
        # destructive: kept off the key bar (listed in help); the plan asks for the GPU's name
        Binding("X", "reslice", "Re-slice MIG", show=False, id="reslice"),
        Binding("m", "act('mps-restart')", "MPS", id="mps_restart"),
    ]
    _runner: ActionRunner | None = None

    @property
    def runner(self) -> ActionRunner:
        """Built on the first action: its modules are not needed for the first frame."""
        if self._runner is None:
            from gpucon.screens.action_runner import ActionRunner

            self._runner = ActionRunner(self)
        return self._runner

    def action_act(self, name: str) -> None:
        key = self.table.cursor_key
        slot_id, backend = key if key is not None else (None, "")
        self.start_action(name, slot_id, backend or None)

    def action_reslice(self) -> None:
        """Ask for the selected GPU's new layout, then plan it like any action."""
        from gpucon.errors import ActionError
        from gpucon.screens.actions_flow import reslice_params, reslice_target
        from gpucon.screens.reslice_prompt import ReslicePrompt

        snapshot, controls = self.gpucon.snapshot, self.gpucon.controls
        if snapshot is None or controls is None:
            self.start_action("reslice", None, None)  # says why nothing can be done
            return
        key = self.table.cursor_key
        try:
            gpu, now, offered = reslice_target(snapshot, key[0] if key else None)
        except ActionError as error:
            self.runner.fail("reslice", error)
            return

        def chosen(layout: str | None) -> None:
            from gpucon.actions.catalog import get_action

            latest = self.gpucon.snapshot or snapshot
            if layout is not None:
                params = reslice_params(gpu, layout, controls)
                self.runner.plan(get_action("reslice"), latest, params, controls)

        self.app.push_screen(ReslicePrompt(gpu, now, offered), callback=chosen)

    def say(self, message: str, severity: SeverityLevel = "information") -> None:
        self.notify(clean(message), title="gpucon", severity=severity, markup=False)

    def start_action(self, name: str, slot_id: str | None, backend_name: str | None) -> None:
        """Plan ``name`` for the selection off the UI thread: ``PlanReady`` or ``PlanFailed``
        comes back. Without controls it only says why nothing can be done."""
        if name == "audit":
            self.gpucon.open_audit()
            return
        from gpucon.actions.catalog import get_action
        from gpucon.errors import ActionError
        from gpucon.screens.actions_flow import params_for

        app = self.gpucon
        controls = app.controls
        if controls is None:  # this screen exists only where writes may: they could not be built
            self.say(f"{name}: {NO_WRITE_PATH}", "warning")
            return
        snapshot = app.snapshot
        if snapshot is None:
            self.say(f"{name}: no fleet data yet", "warning")
            return
        try:
            spec = get_action(name)
            params = params_for(
                name, snapshot, slot_id, backend_name, controls=controls, config=app.config
            )
        except ActionError as error:
            self.runner.fail(name, error)
            return
        self.runner.plan(spec, snapshot, params, controls)

    def on_plan_failed(self, message: PlanFailed) -> None:
        message.stop()
        self.say(message.text, "error")

    def on_plan_ready(self, message: PlanReady) -> None:
        """Show the plan; on confirmation, apply it with its progress on a progress screen."""
        from gpucon.screens.plan import PlanScreen
        from gpucon.screens.progress import ProgressScreen

        message.stop()
        spec, plan = message.spec, message.plan

        screen = PlanScreen(plan, editable=spec.editable, replan=message.replan)

        def confirmed(answer: bool | None) -> None:
            controls = self.gpucon.controls
            chosen = screen.plan  # the plan as confirmed: its params may have been edited
            if not answer or controls is None:
                self.say(f"{chosen.action} {chosen.target}: cancelled, nothing changed")
                return
            progress = ProgressScreen(chosen)
            self.app.push_screen(progress)
            self.runner.apply(spec, chosen, controls, progress)

        self.app.push_screen(screen, callback=confirmed)
