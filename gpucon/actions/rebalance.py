"""Rebalance: set the scheduler's weights from capacity, all at once, version-checked.

The proposal (``gpucon.actions.weights``) weighs each active backend against the others
serving its model by the throughput it sustains within its p95 SLO (``gpucon.actions.capacity``)
or its SM share, never raises one in trouble, lowers one with a noisy neighbour, and moves a
weight at most ±25 % per apply; every backend's line in the plan says why. Explicit weights
(``--set name=w``) replace the proposal. The plan records the registry version it was made
at; apply writes every weight in one MULTI and refuses if the registry moved since
(StalePlan). Draining and drained backends keep weight 0.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucon.actions.backends import find_backend, text_param
from gpucon.actions.load import not_serving
from gpucon.actions.plan import (
    MOVED,
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
)
from gpucon.actions.recheck import recheck_rebalance
from gpucon.actions.weights import basis_summary, propose
from gpucon.controls.base import Controls
from gpucon.errors import MAX_NAME_CHARS, MAX_WEIGHT, BadParams, finite_number, shown
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.ids import escaped_name
from gpucon.model.snapshot import Snapshot

DEFAULT_REASON = "rebalanced with gpucon"

TARGET = "registry:weights"


def _active(snapshot: Snapshot) -> list[Backend]:
    return sorted(
        (b for b in snapshot.backends.values() if b.state is BackendState.ACTIVE),
        key=lambda b: b.name,
    )


def propose_weights(snapshot: Snapshot) -> tuple[dict[str, float], str]:
    """Proposed weights of the active backends, and a summary of what they rest on."""
    proposals = propose(snapshot)
    if not proposals:
        return {}, "no active backend"
    return {p.name: p.new for p in proposals}, basis_summary(proposals)


def validate_weights(snapshot: Snapshot, weights: object) -> dict[str, float]:
    """Weights as floats; BadParams naming ``weights.NAME`` for anything wrong."""
    if not isinstance(weights, Mapping) or not weights:
        raise BadParams("weights", "give at least one backend's weight (name=weight)")
    clean: dict[str, float] = {}
    for given, value in weights.items():
        field = f"weights.{escaped_name(str(given))[:MAX_NAME_CHARS]}"
        try:
            name = find_backend(snapshot, given).name  # its real name, or the escaped form
        except BadParams as exc:
            raise BadParams(field, exc.problem) from None
        state = snapshot.backends[name].state
        if state in (BackendState.DRAINING, BackendState.DRAINED):
            raise BadParams(field, f"{name} is {state}: undrain it first")
        clean[name] = finite_number(field, value, minimum=0.0, maximum=MAX_WEIGHT)
    serving = {
        b.name: clean.get(b.name, b.weight or 0.0)
        for b in snapshot.backends.values()
        if b.state is BackendState.ACTIVE
    }
    if not any(w > 0 for w in serving.values()):
        raise BadParams("weights", "all active backends would have weight 0: nothing would serve")
    _refuse_sending_only_to_not_ready(snapshot, clean)
    return clean


def _refuse_sending_only_to_not_ready(snapshot: Snapshot, new: Mapping[str, float]) -> None:
    """BadParams when the weights leave a model that a ready backend serves now with weight
    only on backends that are not ready: all its traffic would go where nothing answers."""
    active = [b for b in snapshot.backends.values() if b.state is BackendState.ACTIVE]
    for model in sorted({b.model or "" for b in active}):
        mine = [b for b in active if not model or not b.model or b.model == model]
        ready = [b for b in mine if not_serving(snapshot, b) is None]
        if not any((b.weight or 0.0) > 0 for b in ready):
            continue  # nothing ready serves it now: these weights make it no worse
        if any(new.get(b.name, b.weight or 0.0) > 0 for b in ready):
            continue
        sent_to = [b for b in mine if new.get(b.name, b.weight or 0.0) > 0]
        if not sent_to:
            continue  # a model given no weight at all: the total check above covers the fleet
        what = f"model {model}" if model else "the queue"
        listed = ", ".join(f"{b.name} ({not_serving(snapshot, b)})" for b in sent_to[:4])
        zeroed = ", ".join(sorted(b.name for b in ready if b.name in new))
        raise BadParams(
            "weights",
            f"{what} would be sent only to backends that are NOT READY: {listed}; "
            f"keep a weight above 0 on a ready one ({zeroed or 'none given'}); nothing was written",
        )


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
    reasons: dict[str, str] = {}
    if explicit is not None:
        new = validate_weights(snapshot, explicit)
        basis = "weights given by the operator"
    else:
        proposals = propose(snapshot)
        if not proposals:
            raise BadParams("weights", "no active backend to weigh")
        new = validate_weights(snapshot, {p.name: p.new for p in proposals})
        basis = basis_summary(proposals)
        reasons = {p.name: p.reason for p in proposals}
    version = params.get("registry_version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise BadParams("registry_version", f"expected an integer, got {shown(version)}")
    reason = text_param(params, "reason", DEFAULT_REASON) or DEFAULT_REASON

    old = {n: snapshot.backends[n].weight for n in new}
    changed = {n: w for n, w in new.items() if old[n] is None or abs((old[n] or 0.0) - w) > 1e-9}
    lines = [
        f"{n}: {'n/a' if old[n] is None else f'{old[n]:g}'} → {w:g}"
        + ("" if n in changed else " (unchanged)")
        + (f" · {reasons[n]}" if n in reasons else "")
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
            MOVED,
            "no share of fleet capacity moves: no weight above 0",
        ),
        undo=undo,
        params={
            "weights": dict(sorted(new.items())),
            "old_weights": {n: old[n] for n in sorted(new)},
            "basis": basis,
            "reasons": dict(sorted(reasons.items())),
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
recheck = recheck_rebalance  # the guard checks the plan again under the lock
