"""One slot in detail: history plots (activity, memory, p95 and req/s of each backend), its
backends, processes, VM / MPS facts, the health of its GPU (temperature, power against the
limit, utilisation, last XID, clock slowdowns) and its Kubernetes node's MIG state and cordon.
Updated with every snapshot while open."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen

from gpucon.model.fleet import Backend, Slot
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt, health_text
from gpucon.widgets.keybar import KeyBar
from gpucon.widgets.liveness_text import liveness_text
from gpucon.widgets.panels import StatusBar, TextPanel
from gpucon.widgets.plot import Plot
from gpucon.widgets.safe_text import safe

if TYPE_CHECKING:
    from gpucon.app import GpuconApp


def _field(text: Text, label: str, value: object, width: int = 48) -> None:
    text.append(f"{label:>14} ", style="dim")
    text.append_text(safe(fmt.NA if value is None or value == "" else value, width))
    text.append("\n")


def _stale_note(ages: Mapping[str, float], *fields: str) -> str:
    age = max((ages[f] for f in fields if f in ages), default=None)
    return "" if age is None else f"  [stale {fmt.age(age)}]"


def slot_facts(slot: Slot | None, slot_id: str, ages: Mapping[str, float] | None = None) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    if slot is None:
        text.append_text(safe(slot_id, 80, "bold"))
        text.append("  not in the current snapshot (gone, or its source is down)\n", "italic")
        return text
    text.append_text(safe(slot.id, 80, "bold"))
    text.append(f"  {slot.kind.value.upper()}\n", style="bold")
    ages = ages or {}
    metric = slot.activity_metric or "n/a: no source reports activity for this slot"
    stale = _stale_note(ages, "activity_pct")
    _field(text, "activity", f"{fmt.pct(slot.activity_pct)} ({metric}){stale}", 100)
    stale = _stale_note(ages, "mem_used_mib", "mem_total_mib")
    _field(text, "memory GiB", fmt.mem(slot.mem_used_mib, slot.mem_total_mib) + stale)
    _field(text, "host", slot.host)
    _field(
        text,
        "GPU",
        f"{slot.gpu_index if slot.gpu_index is not None else '?'} "
        f"{slot.gpu_name or ''} {slot.gpu_uuid or ''}".strip(),
    )
    _field(text, "profile", slot.profile)
    if slot.gi_id is not None:
        _field(text, "GI / CI", f"{slot.gi_id} / {fmt.NA if slot.ci_id is None else slot.ci_id}")
    _field(text, "SMs", slot.sm_count)
    if slot.pod or slot.node:
        _field(text, "pod / node", f"{slot.pod or fmt.NA} / {slot.node or fmt.NA}")
    if slot.vm is not None:
        vm = slot.vm
        _field(
            text,
            "VM",
            f"{vm.name} ({vm.state or fmt.NA}), {fmt.count(vm.vcpus)} vCPU, "
            f"{fmt.gib(vm.memory_mib)} GiB",
        )
        _field(text, "passthrough", ", ".join(vm.gpu_pci_addresses) or None)
        if vm.mps is not None:
            mps = vm.mps
            daemon = {True: "running", False: "STOPPED", None: fmt.NA}[mps.daemon_running]
            _field(text, "MPS daemon", f"{daemon}, default {fmt.pct(mps.default_thread_pct)}")
            for server, share in mps.thread_pct_by_server:
                _field(text, "MPS share", f"{server}: {fmt.pct(share)}")
    if slot.processes:
        text.append("\n     processes\n", style="bold")
        for p in slot.processes[:20]:
            text.append(f"{p.pid:>14} ")
            text.append_text(safe(p.name or fmt.NA, 40))
            text.append(f"  {fmt.gib(p.used_memory_mib)} GiB\n")
    return text


def health_facts(slot: Slot | None, snapshot: Snapshot) -> Text:
    """The slot's GPU health and its node's state; "n/a" for what no source reports."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if slot is None:
        return text
    gpu = snapshot.gpus.get(slot.gpu_uuid) if slot.gpu_uuid else None
    text.append("    GPU health\n", style="bold")
    if gpu is None:
        _field(text, "GPU", "n/a: no source reports this slot's GPU")
    else:
        pct = gpu.power_pct
        of_limit = "" if pct is None else f" ({pct:.0f}% of limit)"
        _field(text, "temperature", health_text.temperature(gpu))
        _field(text, "power", f"{health_text.power(gpu)}{of_limit}")
        _field(text, "GPU util", fmt.pct(gpu.util_pct))
        _field(text, "last XID", health_text.xid(gpu, snapshot.taken_at, long=True), 90)
        _field(text, "clocks", health_text.clocks(gpu))
    # the slot's node: as Kubernetes placed it or its backends, else the node named like
    # its host (a Kubernetes node's name is usually the host name NVML and DCGM report)
    backend_nodes = [b.node for b in snapshot.backends_on(slot.id) if b.node]
    node_name = slot.node or (backend_nodes[0] if backend_nodes else None) or slot.host
    node = snapshot.nodes.get(node_name) if node_name else None
    if node is not None:
        since = snapshot.mig_pending_since.get(node.name)
        text.append("    node\n", style="bold")
        _field(text, "node", node.name)
        _field(text, "MIG config", node.mig_config)
        _field(text, "MIG state", health_text.node_state(node, since, snapshot.taken_at))
        _field(text, "scheduling", "CORDONED (unschedulable)" if node.unschedulable else "open")
    mps_facts(text, slot, snapshot)
    return text


def mps_target_of(slot: Slot, snapshot: Snapshot) -> str | None:
    """The MPS daemon target (as the config names it) that serves ``slot``, if one is read."""
    names = [slot.id, slot.gpu_uuid, slot.vm.name if slot.vm else None]
    if slot.host is not None and slot.gpu_index is not None:
        names.append(f"{slot.host}/gpu{slot.gpu_index}")
    return next((n for n in names if n is not None and n in snapshot.mps), None)


def mps_facts(text: Text, slot: Slot, snapshot: Snapshot) -> None:
    """The MPS daemon as read from it (``gpucon.sources.mps``): up or not, its servers, their
    clients and shares, the defaults."""
    target = mps_target_of(slot, snapshot)
    if target is None:
        return
    mps = snapshot.mps[target]
    text.append("    MPS daemon (read from it)\n", style="bold")
    if not mps.daemon_running:
        _field(text, "daemon", f"NOT RUNNING ({target})")
        return
    _field(text, "daemon", f"running ({target})")
    pinned = mps.pinned_mem_limit or fmt.NA
    _field(text, "default", f"{fmt.pct(mps.default_thread_pct)} of SMs, pinned {pinned}")
    shares = dict(mps.thread_pct_by_server)
    clients = dict(mps.clients_by_server)
    if not clients and not shares:
        _field(text, "servers", "none (no client has connected)")
    for server in sorted(set(shares) | set(clients)):
        pids = clients.get(server, ())
        listed = ", ".join(str(p) for p in pids[:6]) + (" ..." if len(pids) > 6 else "")
        _field(
            text,
            f"server {server}",
            f"{fmt.pct(shares.get(server))} of SMs, {len(pids)} client(s) {listed}".strip(),
            90,
        )


# REQ/S, P50, P95, P99 and ERR with their gaps, as the header lays them out
LATENCY_WIDTH = 35


def backend_lines(
    backends: tuple[Backend, ...],
    snapshot: Snapshot,
    slo_ms: float,
    styles: dict[str, str] | None = None,
) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    rps = f"REQ/S {snapshot.rate_window}" if snapshot.rate_window else "REQ/S"
    text.append(
        f"BACKEND              STATE     WT  INFL {rps:>9}  P50   P95   P99 ms  ERR  MODEL\n",
        style="bold",
    )
    if not backends:
        text.append("no backend registered on this slot\n", style="dim")
    for b in backends:
        lat = snapshot.latency.get(b.name)
        line = safe(b.name, 20)
        line.pad_right(21 - line.cell_len)
        reg_age = snapshot.staleness.oldest(f"backend:{b.name}")
        line.append(
            f"{b.state.value:<9} {fmt.number(b.weight, 1):>3} {fmt.count(b.inflight):>5} ",
            style="" if reg_age is None else "dim italic",
        )
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
        else:
            err = None if lat.error_rate is None else lat.error_rate * 100
            line.append(
                f"{fmt.number(lat.req_per_s, 1):>9} {fmt.ms(lat.p50_ms):>4} "
                f"{fmt.ms(lat.p95_ms):>5} {fmt.ms(lat.p99_ms):>5}  {fmt.pct(err):>5}  "
            )
        line.append_text(safe(b.model or fmt.NA, 30))
        if reg_age is not None:
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
            slot_facts(slot, self.slot_id, snapshot.staleness.ages(f"slot:{self.slot_id}"))
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
