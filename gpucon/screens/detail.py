"""One slot in detail: history plots (activity, memory, p95 and req/s of each backend), its
backends, processes, VM / MPS facts, the health of its GPU (temperature, power against the
limit, utilisation, last XID, clock slowdowns) and its Kubernetes node's MIG state and cordon.
Updated with every snapshot while open."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen

from gpucon.model.fleet import Backend
from gpucon.model.scheduler_beat import SCHEDULER
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt
from gpucon.widgets.keybar import KeyBar
from gpucon.widgets.liveness_text import liveness_text
from gpucon.widgets.p95_cell import ABSENT
from gpucon.widgets.plot import Plot
from gpucon.widgets.safe_text import safe
from gpucon.widgets.slot_cells import NO_LATENCY_NOW
from gpucon.widgets.slot_facts import absent_slot, health_facts, slot_facts
from gpucon.widgets.status_bar import StatusBar
from gpucon.widgets.text_panel import TextPanel

if TYPE_CHECKING:
    from gpucon.app import GpuconApp


# REQ/S, P50, P95, P99 and ERR with their gaps, as the header lays them out
LATENCY_WIDTH = 35


def _no_requests_now(b: Backend, snapshot: Snapshot) -> str | None:
    """What REQ/S says of a backend that takes no requests now, as the table's cell does:
    ``—`` drained or down, ``n/a`` NOT READY (its readiness says it serves nothing); None
    when it takes requests."""
    if b.state.value in NO_LATENCY_NOW:
        return ABSENT
    lv = snapshot.liveness.get(b.name)
    ready = b.ready if lv is None else lv.serving
    return fmt.NA if ready is False and b.state.value in ("active", "draining") else None


def backend_lines(
    backends: tuple[Backend, ...],
    snapshot: Snapshot,
    slo_ms: float,
    styles: dict[str, str] | None = None,
) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    rps = f"REQ/S {snapshot.rate_window}" if snapshot.rate_window else "REQ/S"
    # laid out as the lines below are, so each value sits under its header (they were one
    # cell right of it from INFL on)
    head = (
        f"{'BACKEND':<21}{'STATE':<9} {'WT':>3} {'INFL':>5} {rps:>9} "
        f"{'P50':>4} {'P95':>5} {'P99':>5} ms {'ERR':>3}  MODEL\n"
    )
    text.append(head, style="bold")
    if not backends:
        text.append("no backend registered on this slot\n", style="dim")
    for b in backends:
        lat = snapshot.latency.get(b.name)
        line = safe(b.name, 20)
        line.pad_right(21 - line.cell_len)
        stale_by = snapshot.staleness.fields.get(f"backend:{b.name}", {})
        # the registry's values (state, weight) stale with Redis; in-flight counts also with a
        # silent scheduler (its heartbeat), while Redis itself answers
        reg_age = snapshot.staleness.oldest(f"backend:{b.name}")
        silent = set(stale_by.values()) == {SCHEDULER}
        line.append(
            f"{b.state.value:<9} {fmt.number(b.weight, 1):>3} ",
            style="" if reg_age is None or silent else "dim italic",
        )
        line.append(f"{fmt.count(b.inflight):>5} ", style="" if reg_age is None else "dim italic")
        lat_age = snapshot.staleness.oldest(f"latency:{b.name}")
        # the latency columns are LATENCY_WIDTH cells whatever they say: MODEL stays in place
        if lat is None:
            line.append(f"{'n/a: no latency source':>{LATENCY_WIDTH - 2}}  ", style="italic")
        elif lat_age is not None:  # the last values seen, dimmed; no rate now
            stale = (
                f"      n/a {fmt.ms(lat.p50_ms):>4} {fmt.ms(lat.p95_ms):>5} {fmt.ms(lat.p99_ms):>5}"
                f"  stale {fmt.age(lat_age)}"
            )
            line.append(f"{stale:<{LATENCY_WIDTH - 2}}  ", style="dim italic")
        elif (gone := _no_requests_now(b, snapshot)) is not None:
            # drained, down or NOT READY: the source's window still holds what it served
            # before, not traffic now (the table shows "—" / "n/a"); the last p's, dimmed,
            # marked "before" only when there are some (a dead scrape target's are withheld:
            # "n/a n/a n/a before" read as if something had been measured)
            earlier = (lat.p50_ms, lat.p95_ms, lat.p99_ms) != (None, None, None)
            last = (
                f"{gone:>9} {fmt.ms(lat.p50_ms):>4} {fmt.ms(lat.p95_ms):>5} "
                f"{fmt.ms(lat.p99_ms):>5}  {'before' if earlier else ''}"
            )
            line.append(f"{last:<{LATENCY_WIDTH - 2}}  ", style="dim italic")
        else:
            err = None if lat.error_rate is None else lat.error_rate * 100
            line.append(
                f"{fmt.number(lat.req_per_s, 1):>9} {fmt.ms(lat.p50_ms):>4} "
                f"{fmt.ms(lat.p95_ms):>5} {fmt.ms(lat.p99_ms):>5}  {fmt.pct(err):>5}  "
            )
        line.append_text(safe(b.model or fmt.NA, 30))
        if reg_age is not None and silent:
            line.append(
                f"  in flight stale {fmt.age(reg_age)}: the scheduler's heartbeat stopped",
                style="dim italic",
            )
        elif reg_age is not None:
            line.append(f"  registry stale {fmt.age(reg_age)}", style="dim italic")
        if b.owner or b.reason:
            line.append("  by ", style="dim")
            line.append_text(safe(b.owner or "?", 24, "dim"))
            line.append(": ", style="dim")
            line.append_text(safe(b.reason or "", 40))
        text.append_text(line)
        text.append("\n  ready ", style="dim")
        text.append_text(liveness_text(snapshot.liveness.get(b.name), snapshot, styles or {}))
        text.append("\n")
    return text


class DetailScreen(Screen[None]):
    """History and facts of one slot."""

    # here, not in gpucon.tcss: parsed when the screen is first shown, not before the first frame
    DEFAULT_CSS = """
    DetailScreen #detail-body {
        height: 1fr;
        padding: 0 1;
    }
    DetailScreen .plot {
        height: auto;
        margin-bottom: 1;
    }
    DetailScreen #detail-info {
        height: auto;
    }
    DetailScreen #detail-health {
        height: auto;
        margin-bottom: 1;
    }
    DetailScreen #backend-plots {
        height: auto;
    }
    DetailScreen #detail-backends {
        height: auto;
        margin-bottom: 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self, slot_id: str, *, badges: tuple[str, ...], default_slo_ms: float) -> None:
        super().__init__()
        self.slot_id = slot_id
        self.badges = badges
        self.default_slo_ms = default_slo_ms
        self._backend_names: tuple[str, ...] = ()

    @property
    def gpucon(self) -> GpuconApp:
        return self.app  # type: ignore[return-value]

    @property
    def sample_s(self) -> float | None:
        """Seconds between history samples: the hub's refresh (the plots' time axis)."""
        refresh = getattr(self.gpucon.feed, "refresh_s", None)
        return float(refresh) if isinstance(refresh, int | float) and refresh > 0 else None

    def compose(self) -> ComposeResult:
        yield StatusBar(self.badges, fleet_name=self.gpucon.fleet_name, id="status")
        with VerticalScroll(id="detail-body"):
            yield TextPanel(id="detail-info")
            yield TextPanel(id="detail-health")
            yield TextPanel(id="detail-backends")
            sample_s = self.sample_s
            yield Plot("activity %", unit="%", top=100.0, sample_s=sample_s, id="plot-activity")
            yield Plot(
                "memory used GiB", unit=" GiB", limit_name="total", sample_s=sample_s, id="plot-mem"
            )
            yield Vertical(id="backend-plots")
        yield KeyBar()

    def on_mount(self) -> None:
        snapshot = self.gpucon.snapshot
        if snapshot is not None:
            self.show_snapshot(snapshot)

    def show_snapshot(self, snapshot: Snapshot) -> None:
        slot = snapshot.slots.get(self.slot_id)
        backends = snapshot.backends_on(self.slot_id)
        self.query_one(StatusBar).show_snapshot(snapshot)
        self.query_one("#detail-info", TextPanel).show_text(
            slot_facts(
                slot,
                self.slot_id,
                snapshot.staleness.ages(f"slot:{self.slot_id}"),
                None if slot is not None else absent_slot(snapshot, self.slot_id),
            )
        )
        self.query_one("#detail-health", TextPanel).show_text(health_facts(slot, snapshot))
        metric = slot.activity_metric if slot and slot.activity_metric else "no metric"
        activity = self.query_one("#plot-activity", Plot)
        activity.title = f"activity % ({metric})"
        activity.show_values(snapshot.history.get(f"slot:{self.slot_id}:activity"))
        mem = self.query_one("#plot-mem", Plot)
        total = slot.mem_total_mib if slot else None
        mem.top = None if total is None else total / 1024
        mem.limit = mem.top
        used = snapshot.history.get(f"slot:{self.slot_id}:mem_used")
        mem.show_values([None if v is None else v / 1024 for v in used])
        self._show_backend_plots(backends, snapshot)
        panel = self.query_one("#detail-backends", TextPanel)
        styles = {
            "ok": panel.theme_style("success"),
            "breach": panel.theme_style("latency-breach"),
            "warn": panel.theme_style("util-hot"),
        }
        panel.show_text(backend_lines(backends, snapshot, self.default_slo_ms, styles))

    def _show_backend_plots(self, backends: tuple[Backend, ...], snapshot: Snapshot) -> None:
        names = tuple(b.name for b in backends)
        holder = self.query_one("#backend-plots", Vertical)
        if names != self._backend_names:
            self._backend_names = names
            holder.remove_children()
            for i, name in enumerate(names):
                holder.mount(
                    Plot(
                        f"{name} p95 ms",
                        unit=" ms",
                        limit_name="SLO",
                        height=3,
                        sample_s=self.sample_s,
                        id=f"p95-{i}",
                    )
                )
                holder.mount(Plot(f"{name} req/s", height=3, sample_s=self.sample_s, id=f"rps-{i}"))
            self.call_after_refresh(self.show_snapshot, snapshot)
            return
        for i, name in enumerate(names):
            slo = snapshot.slo_p95_ms.get(name, self.default_slo_ms)
            self.query_one(f"#p95-{i}", Plot).show_values(
                snapshot.history.get(f"backend:{name}:p95"), limit=slo
            )
            self.query_one(f"#rps-{i}", Plot).show_values(
                snapshot.history.get(f"backend:{name}:rps")
            )
