"""Rebalance: set the scheduler's weights from observed capacity, all at once, version-checked.

The proposal gives each active backend a weight proportional to its capacity among the
backends serving the same model: the highest throughput it served while its p95 stayed within
its SLO (from the snapshot's history and latency), or, before there is such data for every one
of them, its slot's SM count. Each model's weights are scaled so they average 1. Explicit
weights (``--set name=w``) replace the proposal. The plan records the registry version it was
made at; apply writes every weight in one MULTI and refuses if the registry moved since
(StalePlan). Draining and drained backends keep weight 0.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucon.actions.backends import text_param
from gpucon.actions.plan import (
    BadParams,
    BlastRadius,
    Outcome,
    OutcomeStatus,
    Plan,
    Precondition,
    Progress,
    ProgressEvent,
    Step,
    StepStatus,
    Tier,
    finite_number,
)
from gpucon.controls.base import Controls
from gpucon.model.alerts import AlertThresholds
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot

DEFAULT_REASON = "rebalanced with gpucon"

TARGET = "registry:weights"


def _active(snapshot: Snapshot) -> list[Backend]:
    return sorted(
        (b for b in snapshot.backends.values() if b.state is BackendState.ACTIVE),
        key=lambda b: b.name,
    )


def throughput_within_slo(snapshot: Snapshot, name: str) -> float | None:
    """The highest req/s the backend served while its p95 was within its SLO, if ever seen."""
    slo = snapshot.slo_p95_ms.get(name, AlertThresholds().default_slo_p95_ms)
    rps = snapshot.history.get(f"backend:{name}:rps")
    p95 = snapshot.history.get(f"backend:{name}:p95")
    best: float | None = None
    for r, p in zip(rps, p95, strict=False):
        if r is not None and p is not None and p <= slo and r > 0:
            best = r if best is None else max(best, r)
    now = snapshot.latency.get(name)
    if now is not None and now.req_per_s and now.p95_ms is not None and now.p95_ms <= slo:
        best = now.req_per_s if best is None else max(best, now.req_per_s)
    return best


def _sm_count(snapshot: Snapshot, backend: Backend) -> float | None:
    slot = snapshot.slots.get(backend.slot_id or "")
    return float(slot.sm_count) if slot is not None and slot.sm_count else None


def _propose_group(snapshot: Snapshot, group: list[Backend]) -> tuple[dict[str, float], str]:
    throughput = {b.name: throughput_within_slo(snapshot, b.name) for b in group}
    sms = {b.name: _sm_count(snapshot, b) for b in group}
    raw: dict[str, float | None]
    if all(v is not None for v in throughput.values()):
        raw, basis = dict(throughput), "throughput within the p95 SLO"
    elif all(v is not None for v in sms.values()):
        raw, basis = dict(sms), "slice SM count (no throughput data yet)"
    else:
        raw = {b.name: (b.weight if b.weight is not None else 1.0) for b in group}
        basis = "current weights (neither throughput nor SM counts known for every backend)"
    total = sum(v or 0.0 for v in raw.values())
    if total <= 0:
        return {b.name: 1.0 for b in group}, basis + "; all zero, so equal weights"
    scale = len(raw) / total
    return {n: round((v or 0.0) * scale, 3) for n, v in raw.items()}, basis


def propose_weights(snapshot: Snapshot) -> tuple[dict[str, float], str]:
    """Proposed weights of the active backends, and the basis they were computed from.

    Backends are weighed against the others serving the same model (the scheduler chooses
    among those), and each model's weights average 1.
    """
    groups: dict[str, list[Backend]] = {}
    for b in _active(snapshot):
        groups.setdefault(b.model or "", []).append(b)
    if not groups:
        return {}, "no active backend"
    weights: dict[str, float] = {}
    bases: dict[str, str] = {}
    for model, group in sorted(groups.items()):
        proposed, basis = _propose_group(snapshot, group)
        weights.update(proposed)
        bases[model] = basis
    distinct = sorted(set(bases.values()))
    if len(distinct) == 1:
        return weights, distinct[0]
    return weights, "; ".join(f"{m or 'no model'}: {b}" for m, b in sorted(bases.items()))


def validate_weights(snapshot: Snapshot, weights: object) -> dict[str, float]:
    """Weights as floats; BadParams naming ``weights.NAME`` for anything wrong."""
    if not isinstance(weights, Mapping) or not weights:
        raise BadParams("weights", "give at least one backend's weight (name=weight)")
    clean: dict[str, float] = {}
    for name, value in weights.items():
        field = f"weights.{name}"
        if name not in snapshot.backends:
            raise BadParams(field, f"unknown backend {name!r}")
        state = snapshot.backends[name].state
        if state in (BackendState.DRAINING, BackendState.DRAINED):
            raise BadParams(field, f"{name} is {state}: undrain it first")
        clean[name] = finite_number(field, value, minimum=0.0)
    serving = {
        b.name: clean.get(b.name, b.weight or 0.0)
        for b in snapshot.backends.values()
        if b.state is BackendState.ACTIVE
    }
    if not any(w > 0 for w in serving.values()):
        raise BadParams("weights", "all active backends would have weight 0: nothing would serve")
    return clean


def _shift_pct(old: Mapping[str, float], new: Mapping[str, float]) -> float | None:
    """Share of traffic that moves to another backend (half the L1 distance of the shares)."""
    names = set(old) | set(new)
    total_old = sum(old.values())
    total_new = sum(new.values())
    if total_old <= 0 or total_new <= 0:
        return None
    moved = sum(abs(new.get(n, 0.0) / total_new - old.get(n, 0.0) / total_old) for n in names)
    return 50.0 * moved


def plan_rebalance(snapshot: Snapshot, params: Mapping[str, object]) -> Plan:
    explicit = params.get("weights")
    if explicit is not None:
        new = validate_weights(snapshot, explicit)
        basis = "weights given by the operator"
    else:
        new, basis = propose_weights(snapshot)
        if not new:
            raise BadParams("weights", "no active backend to weigh")
        new = validate_weights(snapshot, new)
    version = params.get("registry_version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise BadParams("registry_version", f"expected an integer, got {version!r}")
    reason = text_param(params, "reason", DEFAULT_REASON) or DEFAULT_REASON

    old = {n: snapshot.backends[n].weight for n in new}
    changed = {n: w for n, w in new.items() if old[n] is None or abs((old[n] or 0.0) - w) > 1e-9}
    lines = [
        f"{n}: {'n/a' if old[n] is None else f'{old[n]:g}'} → {w:g}"
        + ("" if n in changed else " (unchanged)")
        for n, w in sorted(new.items())
    ]
    pre = (
        Precondition(
            "registry_version",
            version is not None,
            f"plan made at registry version {version}"
            if version is not None
            else "registry version unknown: a stale plan could not be detected",
        ),
        Precondition(
            "changes",
            bool(changed),
            f"{len(changed)} weight(s) change" if changed else "the weights are already these",
        ),
    )
    step = Step(
        "set_weights",
        f"set {len(changed)} weight(s) in one transaction if the registry is still at "
        f"version {version}",
    )
    known_old = {n: w for n, w in old.items() if w is not None}
    old_all = {b.name: b.weight or 0.0 for b in _active(snapshot)}
    new_all = {**old_all, **new}
    undo = (
        "gpucon rebalance " + " ".join(f"--set {n}={w:g}" for n, w in sorted(known_old.items()))
        if known_old
        else "no previous weights known"
    )
    return Plan(
        action="rebalance",
        target=TARGET,
        tier=Tier.REVERSIBLE,
        preconditions=pre,
        steps=(step,),
        blast_radius=BlastRadius(
            tuple(sorted(changed)),
            tuple(sorted({b for n in changed if (b := snapshot.backends[n].slot_id)})),
            _shift_pct(old_all, new_all),
        ),
        undo=undo,
        params={
            "weights": dict(sorted(new.items())),
            "old_weights": {n: old[n] for n in sorted(new)},
            "basis": basis,
            "reason": reason,
        },
        summary=f"rebalance {len(changed)} of {len(new)} weight(s), from {basis}",
        changes=tuple(lines),
        registry_version=version,
        made_at=snapshot.taken_at,
    )


def apply_rebalance(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
    planned = {str(k): float(v) for k, v in dict(plan.params["weights"]).items()}
    old = plan.params.get("old_weights") or {}
    # only the weights that change are written, so the others keep their owner and reason;
    # the version and expected-weight checks still cover every backend the plan saw
    weights = {
        name: w
        for name, w in planned.items()
        if old.get(name) is None or abs(float(old[name]) - w) > 1e-9
    }
    if not weights:
        text = "every weight already has its planned value; nothing written"
        progress(ProgressEvent("set_weights", StepStatus.DONE, text))
        return Outcome(plan.action, plan.target, OutcomeStatus.OK, text, plan.digest)
    progress(ProgressEvent("set_weights", StepStatus.STARTED, "writing weights"))
    try:
        version = controls.registry.set_weights(
            weights,
            plan.registry_version,
            controls.operator,
            str(plan.params.get("reason", "")),
            expected_weights={str(k): None if v is None else float(v) for k, v in old.items()},
        )
    except Exception as exc:
        progress(ProgressEvent("set_weights", StepStatus.FAILED, str(exc)))
        raise
    text = f"{len(weights)} weight(s) set; registry now at version {version}"
    progress(ProgressEvent("set_weights", StepStatus.DONE, text))
    return Outcome(
        plan.action,
        plan.target,
        OutcomeStatus.OK,
        text,
        plan.digest,
        state_left=", ".join(f"{n}={w:g}" for n, w in sorted(weights.items())),
        details={"weights": weights, "registry_version": version},
    )


plan = plan_rebalance
apply = apply_rebalance
