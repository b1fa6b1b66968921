"""How loaded a backend is now, as plans need to say it: activity, p95 against SLO, alerts.

Rebalance asks it whether a backend may be given more work; drain asks it whether the backends
that take the load have room for it; undrain asks it what fires on the slot it sends traffic to.
Everything comes from one snapshot; a value no source reports is ``None`` (shown "n/a").

A *co-tenant* is a compute process on a backend's slot that none of the slot's backends
accounts for (``model.cotenants`` says which).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucon.model.alerts import Alert, AlertThresholds
from gpucon.model.cotenants import foreign_processes
from gpucon.model.fleet import Backend, ComputeProcess
from gpucon.model.snapshot import Snapshot

# activity at or above which a slot has no room left (the hot_slot alert fires at 98 % for a
# minute; a plan looks at the instant, so it calls a little lower "saturated")
SATURATED_PCT = 95.0


@dataclass(frozen=True, slots=True)
class BackendLoad:
    """One backend's load now, and what fires on it or its slot."""

    name: str
    slot_id: str | None
    activity_pct: float | None
    p95_ms: float | None
    slo_p95_ms: float
    req_per_s: float | None
    alerts: tuple[Alert, ...] = ()
    co_tenants: tuple[ComputeProcess, ...] = ()

    @property
    def over_slo(self) -> bool:
        breached = self.p95_ms is not None and self.p95_ms > self.slo_p95_ms
        return breached or any(a.rule == "p95_slo" for a in self.alerts)

    @property
    def saturated(self) -> bool:
        hot = self.activity_pct is not None and self.activity_pct >= SATURATED_PCT
        return hot or any(a.rule == "hot_slot" for a in self.alerts)

    @property
    def noisy(self) -> bool:
        return bool(self.co_tenants)

    @property
    def slo_ratio(self) -> float | None:
        """p95 / SLO (1.0 = at its SLO); None when p95 is not known."""
        return None if self.p95_ms is None else self.p95_ms / self.slo_p95_ms

    def describe(self) -> str:
        """``"activity 97%, p95 18.0 s / SLO 14.0 s (1.3×)"``, with "n/a" for what is unknown."""
        act = "n/a" if self.activity_pct is None else f"{self.activity_pct:.0f}%"
        if self.p95_ms is None:
            p95 = f"p95 n/a / SLO {fmt_ms(self.slo_p95_ms)}"
        else:
            ratio = self.slo_ratio or 0.0
            ratio_text = f"{ratio:.1f}×" if ratio >= 1 else f"{ratio:.2f}×"
            p95 = f"p95 {fmt_ms(self.p95_ms)} / SLO {fmt_ms(self.slo_p95_ms)} ({ratio_text})"
        return f"activity {act}, {p95}"

    def co_tenant_text(self) -> str:
        names = ", ".join(f"{p.name or '?'} (pid {p.pid})" for p in self.co_tenants[:3])
        more = f" and {len(self.co_tenants) - 3} more" if len(self.co_tenants) > 3 else ""
        return f"co-tenant process {names}{more} on {self.slot_id}"


def fmt_ms(value: float) -> str:
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


def slo_for(snapshot: Snapshot, name: str) -> float:
    return snapshot.slo_p95_ms.get(name, AlertThresholds().default_slo_p95_ms)


def alerts_on(snapshot: Snapshot, backend: Backend) -> tuple[Alert, ...]:
    """Alerts whose target is the backend or its slot."""
    targets = {backend.name} | ({backend.slot_id} if backend.slot_id else set())
    return tuple(a for a in snapshot.alerts if a.target in targets)


def co_tenants(snapshot: Snapshot, backend: Backend) -> tuple[ComputeProcess, ...]:
    """Processes on the backend's slot that none of the slot's backends accounts for."""
    slot = snapshot.slots.get(backend.slot_id or "")
    if slot is None or not slot.processes:
        return ()
    return foreign_processes(slot.processes, len(snapshot.backends_on(slot.id)))


def not_serving(snapshot: Snapshot, backend: Backend) -> str | None:
    """Why the backend is not serving now (its readiness signals say so), or None when it is
    serving or nothing fresh says either way. The scheduler sends such a backend nothing:
    draining it moves no load, and it takes none of another's."""
    live = snapshot.liveness.get(backend.name)
    if live is not None:
        return None if live.serving is not False else (live.because or "not ready")
    return "registry ready=0" if backend.ready is False else None


def backend_load(snapshot: Snapshot, backend: Backend) -> BackendLoad:
    slot = snapshot.slots.get(backend.slot_id or "")
    lat = snapshot.latency.get(backend.name)
    return BackendLoad(
        name=backend.name,
        slot_id=backend.slot_id,
        activity_pct=None if slot is None else slot.activity_pct,
        p95_ms=None if lat is None else lat.p95_ms,
        slo_p95_ms=slo_for(snapshot, backend.name),
        req_per_s=None if lat is None else lat.req_per_s,
        alerts=alerts_on(snapshot, backend),
        co_tenants=co_tenants(snapshot, backend),
    )
