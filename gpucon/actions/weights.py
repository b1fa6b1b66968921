"""The weights rebalance proposes: from capacity, never raising a backend in trouble, damped.

Backends are weighed against the others serving the same model (the scheduler chooses among
those). Per model:

1. Capacity: the requests each backend sustains in flight within its SLO (its throughput at
   full activity × its service time: ``gpucon.actions.capacity`` says why that and not req/s).
   A backend without enough samples is counted by its SM share, converted with the median
   in-flight-per-SM its measured peers sustain; when none is measured, the SM shares
   themselves are the capacities. A backend with neither is kept at its weight.
2. Target: the model's current total weight split in proportion to capacity (the total stays,
   so the scheduler's other pools are not disturbed by a renormalization).
3. Damping: one apply moves a weight at most ``MAX_STEP`` (±25 %) from where it is, and the
   first ``DEADBAND`` (2 %) of a move is not made, so a target that jitters around the
   weight moves nothing.
4. Never raised: a backend over its p95 SLO, on a saturated slot (activity ≥ 95 % or a
   hot_slot alert) or with any alert on it or its slot. A backend whose slot has a co-tenant
   process (a noisy neighbour) is lowered by a full step: its measured capacity is being taken
   by something the scheduler does not see.

A weight of 0 on an active backend is the operator's (rebalance does not start traffic to it),
and a model served by one backend keeps its weight (its weight moves nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from gpucon.actions.capacity import Capacity, sm_share, sustained, why_no_capacity
from gpucon.actions.load import BackendLoad, backend_load, fmt_ms
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot

MAX_STEP = 0.25
DEADBAND = 0.02
FLOOR = 0.01  # rebalance lowers, it never drains: a weight stays above this


@dataclass(frozen=True, slots=True)
class Proposal:
    """One backend's proposed weight and why."""

    name: str
    old: float | None
    new: float
    basis: str  # "measured", "sm", "kept"
    reason: str


def _capacities(
    snapshot: Snapshot, group: list[Backend]
) -> dict[str, tuple[float | None, str, str]]:
    """name -> (capacity in requests in flight or None, basis, text)."""
    measured: dict[str, Capacity] = {b.name: sustained(snapshot, b) for b in group}
    sms = {b.name: sm_share(snapshot, b) for b in group}
    per_sm_values = [
        c.in_flight / s for n, c in measured.items() if c.in_flight is not None and (s := sms[n])
    ]
    per_sm = median(per_sm_values) if per_sm_values else None
    any_measured = any(c.in_flight is not None for c in measured.values())
    total_sms = sum(s for s in sms.values() if s)
    out: dict[str, tuple[float | None, str, str]] = {}
    for b in group:
        c, s = measured[b.name], sms[b.name]
        if c.in_flight is not None:
            out[b.name] = (c.in_flight, "measured", c.describe())
        elif s and per_sm is not None:
            text = (
                f"SM share ({s:g} SMs × {per_sm:.3g} in flight per SM sustained by its peers): "
                f"{c.why_not}"
            )
            out[b.name] = (s * per_sm, "sm", text)
        elif s and not any_measured:
            out[b.name] = (s, "sm", f"SM share ({s:g}/{total_sms:g}): {c.why_not}")
        else:
            why = why_no_capacity(snapshot, b, c)
            out[b.name] = (None, "kept", f"no capacity known ({why}): kept")
    return out


def _trouble(load: BackendLoad) -> list[str]:
    """Why the backend must not be raised (empty: it may be)."""
    why: list[str] = []
    if load.over_slo:
        p95 = "n/a" if load.p95_ms is None else fmt_ms(load.p95_ms)
        why.append(f"over SLO (p95 {p95} > {fmt_ms(load.slo_p95_ms)})")
    if load.saturated:
        act = "n/a" if load.activity_pct is None else f"{load.activity_pct:.0f}%"
        why.append(f"slot saturated (activity {act})")
    rules = sorted({a.rule for a in load.alerts} - {"p95_slo", "hot_slot"})
    if rules:
        why.append("alert " + ", ".join(rules))
    return why


def _propose_group(snapshot: Snapshot, group: list[Backend]) -> list[Proposal]:
    if len(group) == 1:
        b = group[0]
        new = 1.0 if b.weight is None else b.weight
        text = f"the only active backend serving {b.model or 'the queue'}: its weight moves nothing"
        return [Proposal(b.name, b.weight, new, "kept", text)]
    caps = _capacities(snapshot, group)
    free = [b for b in group if caps[b.name][0] is not None and b.weight != 0.0]
    total_base = sum(1.0 if b.weight is None else b.weight for b in free)
    total_cap = sum(caps[b.name][0] or 0.0 for b in free)
    out: list[Proposal] = []
    for b in group:
        cap, basis, text = caps[b.name]
        if b.weight == 0.0:
            text = "weight 0 set by an operator: rebalance does not start its traffic"
            out.append(Proposal(b.name, b.weight, 0.0, "kept", text))
            continue
        base = 1.0 if b.weight is None else b.weight
        if cap is None or total_cap <= 0:
            out.append(Proposal(b.name, b.weight, base, basis, text))
            continue
        target = total_base * cap / total_cap
        gap = target - base
        # a soft dead band: the first DEADBAND of any move is not made, so a target that
        # jitters around the weight moves nothing, and one beyond it moves continuously
        # (a hard band would flip between "no change" and a change of its whole width)
        move = max(0.0, abs(gap) - DEADBAND * base) if b.weight is not None else abs(gap)
        new = base + min(move, MAX_STEP * base) * (1.0 if gap >= 0 else -1.0)
        notes = [text]
        if move > MAX_STEP * base:
            notes.append(f"target {target:.3g}, damped to ±{MAX_STEP:.0%}")
        load = backend_load(snapshot, b)
        trouble = _trouble(load)
        if load.noisy:
            new = min(new, max(FLOOR, base * (1 - MAX_STEP)))
            notes.append(f"{load.co_tenant_text()}: lowered")
        if trouble and new > base:
            new = base
            notes.append("; ".join(trouble) + ": not raised")
        elif trouble:
            notes.append("; ".join(trouble))
        out.append(Proposal(b.name, b.weight, round(new, 3), basis, "; ".join(notes)))
    return out


def propose(snapshot: Snapshot) -> tuple[Proposal, ...]:
    """A proposal for every active backend, by name."""
    groups: dict[str, list[Backend]] = {}
    active = (b for b in snapshot.backends.values() if b.state is BackendState.ACTIVE)
    for b in sorted(active, key=lambda b: b.name):
        groups.setdefault(b.model or "", []).append(b)
    proposals = [p for _, group in sorted(groups.items()) for p in _propose_group(snapshot, group)]
    return tuple(sorted(proposals, key=lambda p: p.name))


def basis_summary(proposals: tuple[Proposal, ...]) -> str:
    """``"capacity: 5 measured, 4 by SM share, 2 kept"``."""
    counts = {k: sum(1 for p in proposals if p.basis == k) for k in ("measured", "sm", "kept")}
    parts = [
        f"{counts['measured']} measured" if counts["measured"] else "",
        f"{counts['sm']} by SM share" if counts["sm"] else "",
        f"{counts['kept']} kept" if counts["kept"] else "",
    ]
    return "capacity: " + ", ".join(p for p in parts if p)
