"""Undrain (tier 1): return a drained backend, or a drained Kubernetes node, to service.

The registry remembered each backend's weight when its drain began (``weight_before_drain``);
undrain restores it (or ``default_weight`` when none was remembered) and sets ``state=active``.
With ``node`` (``gpucon undrain NODE --node``) it uncordons the node through the KubeControl
first, then undrains every draining or drained backend on it; active ones are left as they are.
The plan WARNs about alerts firing on the backends or their slots (``gpucon.actions.headroom``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from gpucon.actions.backends import (
    backend_node,
    describe_state,
    find_backend,
    node_backends,
    text_param,
)
from gpucon.actions.headroom import alerts_warning
from gpucon.actions.load import alerts_on, not_serving
from gpucon.actions.plan import (
    RETURNS,
    BlastRadius,
    Outcome,
    Plan,
    Precondition,
    Progress,
    ProgressEvent,
    Step,
    StepStatus,
    Tier,
)
from gpucon.actions.recheck import recheck_undrain
from gpucon.actions.steps import finished, run_step, stopped
from gpucon.controls.base import Controls
from gpucon.errors import MAX_WEIGHT, BadParams, StepFailed, finite_number, shown
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot

OUT_OF_SERVICE = (BackendState.DRAINING, BackendState.DRAINED)


def _restore_step(name: str, default_weight: float) -> Step:
    return Step(
        f"active:{name}",
        f"set {name} state=active and restore the weight it had before the drain "
        f"({default_weight:g} if none was remembered)",
    )


def plan_undrain(snapshot: Snapshot, params: Mapping[str, object]) -> Plan:
    """Return a draining/drained backend (or node, with ``node``) to service."""
    reason = text_param(params, "reason", "undrained with gpucon") or ""
    default_weight = finite_number(
        "default_weight", params.get("default_weight", 1.0), minimum=0.0, maximum=MAX_WEIGHT
    )
    node = text_param(params, "node")
    if node is not None:
        return _plan_node(snapshot, params, node, reason, default_weight)
    backend = find_backend(snapshot, params.get("backend"))
    ok = backend.state in OUT_OF_SERVICE
    pre: tuple[Precondition, ...] = (
        Precondition(
            f"state:{backend.name}",
            ok,
            f"{backend.name} is {backend.state}" + ("" if ok else ": not drained, nothing to do"),
        ),
    )
    warned = alerts_warning(snapshot, (backend,))
    if warned is not None:
        pre = (*pre, warned)
    why = not_serving(snapshot, backend)
    said = any(a.rule == "not_ready" for a in alerts_on(snapshot, backend))  # in `warned`
    if why is not None and not said:
        pre = (
            *pre,
            Precondition(
                f"serving:{backend.name}",
                True,
                f"{backend.name} is not ready ({why}): undrained, it serves nothing until it "
                "is fixed",
                warning=True,
            ),
        )
    return Plan(
        action="undrain",
        target=backend.name,
        tier=Tier.REVERSIBLE,
        preconditions=pre,
        steps=(_restore_step(backend.name, default_weight),),
        blast_radius=BlastRadius(
            (backend.name,), (backend.slot_id,) if backend.slot_id else (), None, no_share=RETURNS
        ),
        undo=f"gpucon drain {backend.name}",
        params={
            "backends": [backend.name],
            "backend": backend.name,
            "node": None,
            "reason": reason,
            "default_weight": default_weight,
            # checked again under the lock where Kubernetes is configured (``recheck``)
            "on_node": backend_node(snapshot, backend),
            "pod": backend.pod,
        },
        summary=f"undrain {backend.name}: send it new work again",
        made_at=snapshot.taken_at,
    )


def _plan_node(
    snapshot: Snapshot,
    params: Mapping[str, object],
    node: str,
    reason: str,
    default_weight: float,
) -> Plan:
    on_node = node_backends(snapshot, node)
    if not on_node and node not in snapshot.nodes:
        raise BadParams("node", f"unknown node {shown(node)}")
    restore: tuple[Backend, ...] = tuple(b for b in on_node if b.state in OUT_OF_SERVICE)
    kube = bool(params.get("kube", False))
    pre = [
        Precondition(
            "kubernetes",
            kube,
            "Kubernetes is configured (uncordon)"
            if kube
            else "Kubernetes is not configured: a node undrain needs it",
        )
    ]
    for b in on_node:
        left = b.state not in OUT_OF_SERVICE
        text = f"{b.name} is {b.state}" + (": left as it is" if left else "")
        pre.append(Precondition(f"state:{b.name}", True, text))
    warned = alerts_warning(snapshot, restore)
    if warned is not None:
        pre.append(warned)
    steps = [Step(f"uncordon:{node}", f"uncordon node {node} (pods may be scheduled on it)")]
    steps.extend(_restore_step(b.name, default_weight) for b in restore)
    names = tuple(b.name for b in restore)
    slots = tuple(sorted({b.slot_id for b in restore if b.slot_id}))
    return Plan(
        action="undrain",
        target=node,
        tier=Tier.REVERSIBLE,
        preconditions=tuple(pre),
        steps=tuple(steps),
        blast_radius=BlastRadius(names, slots, None, no_share=RETURNS),
        undo=f"gpucon drain {node} --node",
        params={
            "backends": list(names),
            "backend": None,
            "node": node,
            "reason": reason,
            "default_weight": default_weight,
        },
        summary=f"undrain node {node}: uncordon it and send {len(names)} backend(s) work again",
        made_at=snapshot.taken_at,
    )


def _uncordon(controls: Controls, node: str, progress: Progress) -> None:
    key = f"uncordon:{node}"
    kube = controls.kube
    if kube is None:
        progress(ProgressEvent(key, StepStatus.STARTED, f"uncordon {node}"))
        progress(ProgressEvent(key, StepStatus.FAILED, "Kubernetes is not configured"))
        raise StepFailed(key, "Kubernetes is not configured")

    def uncordon() -> str:
        kube.uncordon(node)
        return f"{node} is schedulable again"

    run_step(progress, key, f"uncordon {node}", uncordon, timeout_error=StepFailed)


def apply_undrain(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
    names = [str(n) for n in plan.params.get("backends") or [plan.params["backend"]]]
    node = plan.params.get("node")
    weights: dict[str, float] = {}
    try:
        if node:
            _uncordon(controls, str(node), progress)
        for name in names:
            restore = partial(_restore, controls, plan, name, weights)
            run_step(
                progress, f"active:{name}", f"{name}: restoring", restore, timeout_error=StepFailed
            )
    except StepFailed as failure:
        left = describe_state(controls, names, nothing_written=not weights and not node)
        return stopped(plan, failure, state_left=left, details={"weights": weights})
    restored = ", ".join(f"{n} with weight {w:g}" for n, w in weights.items())
    if node:
        message = f"node {node} uncordoned" + (f"; active again: {restored}" if restored else "")
    else:
        message = f"{names[0]} is active again with weight {weights[names[0]]:g}"
    details: dict[str, object] = {"weights": weights}
    if not node:
        details["weight"] = weights[names[0]]
    return finished(plan, message, state_left=describe_state(controls, names), details=details)


def _restore(controls: Controls, plan: Plan, name: str, weights: dict[str, float]) -> str:
    """``name`` active again with the weight it had (kept in ``weights``)."""
    weight = controls.registry.undrain(
        name,
        controls.operator,
        str(plan.params.get("reason", "")),
        float(plan.params.get("default_weight", 1.0)),
    )
    weights[name] = weight
    return f"{name}: state=active, weight {weight:g}"


plan = plan_undrain
apply = apply_undrain
recheck = recheck_undrain
