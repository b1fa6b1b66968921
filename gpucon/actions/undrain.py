"""Undrain (tier 1): return a draining or drained backend to service with the weight it had.

The registry remembered the weight when the drain began (``weight_before_drain``); undrain
restores it (or ``default_weight`` when none was remembered) and sets ``state=active``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucon.actions.backends import describe_state, find_backend, text_param
from gpucon.actions.plan import (
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
from gpucon.model.fleet import BackendState
from gpucon.model.snapshot import Snapshot


def plan_undrain(snapshot: Snapshot, params: Mapping[str, Any]) -> Plan:
    """Return a draining/drained backend to service with the weight it had before."""
    backend = find_backend(snapshot, text_param(params, "backend"))
    reason = text_param(params, "reason", "undrained with gpucon") or ""
    default_weight = finite_number("default_weight", params.get("default_weight", 1.0), minimum=0.0)
    ok = backend.state in (BackendState.DRAINING, BackendState.DRAINED)
    pre = (
        Precondition(
            f"state:{backend.name}",
            ok,
            f"{backend.name} is {backend.state}" + ("" if ok else ": not drained, nothing to do"),
        ),
    )
    step = Step(
        f"active:{backend.name}",
        f"set {backend.name} state=active and restore the weight it had before the drain "
        f"({default_weight:g} if none was remembered)",
    )
    return Plan(
        action="undrain",
        target=backend.name,
        tier=Tier.REVERSIBLE,
        preconditions=pre,
        steps=(step,),
        blast_radius=BlastRadius(
            (backend.name,), (backend.slot_id,) if backend.slot_id else (), None
        ),
        undo=f"gpucon drain {backend.name}",
        params={"backend": backend.name, "reason": reason, "default_weight": default_weight},
        summary=f"undrain {backend.name}: send it new work again",
        made_at=snapshot.taken_at,
    )


def apply_undrain(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
    name = str(plan.params["backend"])
    key = f"active:{name}"
    progress(ProgressEvent(key, StepStatus.STARTED, f"{name}: restoring"))
    weight = controls.registry.undrain(
        name,
        controls.operator,
        str(plan.params.get("reason", "")),
        float(plan.params.get("default_weight", 1.0)),
    )
    progress(ProgressEvent(key, StepStatus.DONE, f"{name}: state=active, weight {weight:g}"))
    return Outcome(
        plan.action,
        plan.target,
        OutcomeStatus.OK,
        f"{name} is active again with weight {weight:g}",
        plan.digest,
        state_left=describe_state(controls, [name]),
        details={"weight": weight},
    )


plan = plan_undrain
apply = apply_undrain
