"""The fleet screen: status bar, slot table, queue, GPU/node and alert panels, the `/` filter.

``FleetScreen`` holds no action bindings at all (read-only and NOC use it as is; its audit
key only reads); ``ActionFleetScreen`` adds drain, undrain, rebalance and probe: it plans
them through an ``ActionRunner`` (thread workers), shows the ``PlanReady`` plan for
confirmation and hands the confirmed plan back to the runner, whose progress goes to the
progress screen. In NOC mode the screen cycles table pages and an alerts page.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Input

from gpucon.model.snapshot import Snapshot
from gpucon.widgets.health_panel import HealthPanel
from gpucon.widgets.keybar import KeyBar
from gpucon.widgets.panels import AlertsPanel, QueuePanel, StatusBar
from gpucon.widgets.safe_text import clean
from gpucon.widgets.slot_rows import RowBuilder
from gpucon.widgets.slot_table import SlotTable

if TYPE_CHECKING:
    from gpucon.app import GpuconApp
    from gpucon.screens.action_runner import ActionRunner, PlanFailed, PlanReady


class FleetScreen(Screen[None]):
    """Every slot with its backend, the queues and the alerts; read-only."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort(1)", "Sort", id="sort"),
        Binding("S", "sort_reverse", "Reverse", id="sort_reverse"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="clear_filter"),
        # the audit log only reads, so it is there in read-only and NOC mode too
        Binding("A", "audit", "Audit", id="audit"),
    ]

    def __init__(
        self,
        *,
        badges: Sequence[str],
        fleet_name: str = "",
        clock: Callable[[], float] = time.time,
        noc: bool = False,
        page_s: float = 10.0,
        default_slo_ms: float = 2500.0,
    ) -> None:
        super().__init__()
        self.badges = tuple(badges)
        self.fleet_name = fleet_name
        self.clock = clock
        self.noc = noc
        self.page_s = page_s
        self.default_slo_ms = default_slo_ms
        self.page = 0
        self.snapshot: Snapshot | None = None
        self.rows = RowBuilder(default_slo_ms)

    @property
    def gpucon(self) -> GpuconApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield StatusBar(
            self.badges,
            fleet_name=self.fleet_name,
            clock=self.clock,
            show_clock=self.noc,
            id="status",
        )
        with Vertical(id="main"):
            yield SlotTable(id="slots")
            # the filter box is mounted on the first `/`: not built for the first frame
        with Horizontal(id="bottom"):
            with Vertical(id="bottom-left"):
                yield QueuePanel(id="queues")
                yield HealthPanel(id="health")
            yield AlertsPanel(id="alerts")
        yield KeyBar()

    @property
    def table(self) -> SlotTable:
        return self.query_one(SlotTable)

    def on_mount(self) -> None:
        self.table.focus()
        self.table.follow_cursor = not self.noc  # NOC pages scroll by the clock, not the cursor
        if self.noc:
            self.set_interval(self.page_s, self.next_page)
        if self.gpucon.snapshot is not None:
            self.show_snapshot(self.gpucon.snapshot)

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        try:
            table = self.table
            status = self.query_one(StatusBar)
            queues = self.query_one(QueuePanel)
            health = self.query_one(HealthPanel)
            alerts = self.query_one(AlertsPanel)
        except NoMatches:  # widgets not in the DOM (mounting or taken down): the next one paints
            return
        table.set_rate_window(snapshot.rate_window)
        table.show_rows(self.rows.build(snapshot), snapshot.history)
        status.show_snapshot(snapshot)
        queues.show_snapshot(snapshot)
        health.show_snapshot(snapshot)
        alerts.show_snapshot(snapshot)

    # -- sorting and filtering -------------------------------------------------------------

    def action_sort(self, step: int) -> None:
        self.table.cycle_sort(step)

    def action_sort_reverse(self) -> None:
        order = self.table.order
        self.table.set_sort(order.sort_key, not order.reverse)

    async def action_filter(self) -> None:
        boxes = self.query("#filter").results(Input)
        box = next(boxes, None)
        if box is None:
            box = Input(
                placeholder="filter: host, slot, backend or model (Enter keeps, Esc clears)",
                id="filter",
            )
            await self.query_one("#main").mount(box)
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

    def next_page(self) -> None:
        """Show the next page of the table, then the alerts page, then start again."""
        table = self.table
        if self.has_class("-alerts-page"):
            self.page = 0
            self.remove_class("-alerts-page")
            table.show_page(0)
            return
        pages = max(1, -(-table.row_count // table.page_rows))
        self.page += 1
        if self.page >= pages:
            self.add_class("-alerts-page")
        else:
            table.show_page(self.page)


NO_WRITE_PATH = "no write path was built for this fleet (is its [redis] registry configured?)"


class ActionFleetScreen(FleetScreen):
    """The fleet screen with the action keys; built only when controls may exist."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "act('drain')", "Drain", id="drain"),
        Binding("u", "act('undrain')", "Undrain", id="undrain"),
        Binding("b", "act('rebalance')", "Rebalance", id="rebalance"),
        Binding("p", "act('probe')", "Probe", id="probe"),
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

        def confirmed(answer: bool | None) -> None:
            controls = self.gpucon.controls
            if not answer or controls is None:
                self.say(f"{plan.action} {plan.target}: cancelled, nothing changed")
                return
            progress = ProgressScreen(plan)
            self.app.push_screen(progress)
            self.runner.apply(spec, plan, controls, progress)

        self.app.push_screen(PlanScreen(plan), callback=confirmed)
