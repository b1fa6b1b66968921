"""Applies a re-slice plan (``gpucon.actions.reslice``), each step assert-then-apply.

Like mig-parted, every step first reads what is there and does only what is missing, so a run
cut short (a crash, a lost lock, a failed call) is finished by running the same plan again:
instances already at their planned placement (with their compute instance) are kept, others
destroyed; an instance already created is not created twice; a backend already on its new
slot is not moved again; one already active is not undrained twice. On Kubernetes: the node
stays cordoned until mig-manager reports ``success``; a label already set to the config is not
set again. A failed step stops the run and the outcome says what is left (backends drained,
the instances that exist, the node cordoned).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from gpucon.actions.backends import describe_state
from gpucon.actions.drain import kept_of
from gpucon.actions.drain_group import drain_group
from gpucon.actions.plan import Outcome, Plan, Progress
from gpucon.actions.reslice_kube import Run, apply_kube
from gpucon.actions.steps import finished, step_runner, stopped
from gpucon.controls.base import Controls
from gpucon.controls.mig import GpuInstance, GpuRef, MigExecutor
from gpucon.errors import StepFailed
from gpucon.model.fleet import BackendState
from gpucon.model.ids import mig_slot_id

DRAINED = BackendState.DRAINED


def _runner(progress: Progress) -> Run:
    # a MIG or mig-manager call's own TimeoutError is a failed step here (exit 5), not a drain's
    # timeout: the steps that wait raise StepTimeout themselves
    return step_runner(progress, timeout_error=StepFailed)


def apply_reslice(
    plan: Plan, controls: Controls, progress: Progress, clock: Callable[[], float] = time.monotonic
) -> Outcome:
    p = plan.params
    names = [str(n) for n in p.get("backends") or []]
    run = _runner(progress)
    try:
        if p.get("drain", True):
            drain_group(
                controls,
                names,
                str(p.get("reason")),
                float(p.get("timeout_s", 300.0)),
                float(p.get("poll_s", 0.2)),
                progress,
                clock,
                kept_of(plan),
            )
        if p.get("executor") == "kubernetes":
            message = apply_kube(plan, controls, run, progress, clock)
        else:
            message = _apply_mig(plan, controls, run)
    except StepFailed as failure:
        return stopped(plan, failure, state_left=_state_left(plan, controls, names))
    return finished(
        plan,
        message,
        state_left=_state_left(plan, controls, names),
        details={"placements": list(p.get("placements") or [])},
    )


def _state_left(plan: Plan, controls: Controls, names: list[str]) -> str:
    left = (describe_state(controls, names), _instances_left(plan, controls))
    return "; ".join(x for x in left if x)


def _gpu(plan: Plan) -> GpuRef:
    p = plan.params
    return GpuRef(str(p["host"]), int(p["index"]), str(p["uuid"]))


def _instances_left(plan: Plan, controls: Controls) -> str:
    if controls.mig is None or plan.params.get("executor") == "kubernetes":
        return ""
    try:
        found = controls.mig.instances(_gpu(plan))
    except Exception as exc:  # the outcome still reports; the instances are unknown
        return f"instances on {plan.target}: unknown ({type(exc).__name__})"
    shown = ", ".join(f"gi{g.gi_id}@{g.start}" + ("" if g.ci_ids else " (no CI)") for g in found)
    return f"instances on {plan.target}: {shown or 'none'}"


def _apply_mig(plan: Plan, controls: Controls, run: Run) -> str:
    mig = controls.mig
    if mig is None:
        raise StepFailed("executor", "no MIG executor is configured for this fleet")
    p = plan.params
    gpu = _gpu(plan)
    run(f"processes:{plan.target}", "no compute process left", lambda: _no_processes(mig, gpu))
    want = [(str(n), int(pid), start, size) for n, pid, start, size in p.get("placements") or []]
    have = list(mig.instances(gpu))
    kept: dict[int, GpuInstance] = {}
    for i, (_, pid, start, _size) in enumerate(want):
        match = next(
            (
                g
                for g in have
                if g.profile_id == pid and start in (None, g.start) and g not in kept.values()
            ),
            None,
        )
        if match is not None:
            kept[i] = match
    doomed = [g for g in have if g not in kept.values()]
    for g in doomed:
        run(f"destroy:gi{g.gi_id}", f"destroy GPU instance {g.gi_id}", _destroyer(mig, gpu, g))
    destroyed = {g.gi_id for g in doomed}
    for gi_id, _ci, profile in p.get("old_instances") or []:
        if gi_id in destroyed:
            continue
        now = next((g for g in kept.values() if g.gi_id == gi_id), None)
        text = "already gone" + (
            f" (id {gi_id} now holds a planned instance at slice {now.start})" if now else ""
        )
        run(f"destroy:gi{gi_id}", f"GPU instance {gi_id} ({profile})", partial(str, text))
    new_gi: dict[int, int] = {}
    for i, (name, pid, start, size) in enumerate(want):
        where = name if start is None else f"{name} at {start}"

        def create(i: int = i, pid: int = pid, start: Any = start, size: Any = size) -> str:
            have_one = kept.get(i)
            if have_one is not None and have_one.ci_ids:
                new_gi[i] = have_one.gi_id
                return f"already there: GPU instance {have_one.gi_id}"
            gi_id = have_one.gi_id if have_one else mig.create_gi(gpu, pid, start, size)
            ci_id = mig.create_ci(gpu, gi_id)
            new_gi[i] = gi_id
            return f"GPU instance {gi_id}, compute instance {ci_id}"

        run(f"create:{i}", f"create {where}", create)
    owner = controls.operator
    reason = str(p.get("reason"))
    assignment = {str(k): int(v) for k, v in dict(p.get("assignment") or {}).items()}
    for name, index in sorted(assignment.items()):
        slot = mig_slot_id(gpu.host, gpu.index, new_gi[index])
        run(
            f"register:{name}",
            f"register {name} on {slot}",
            _mover(controls, name, slot, owner, reason),
        )
    for name in sorted(assignment):
        run(f"active:{name}", f"undrain {name}", _undrainer(controls, name, owner, reason))
    left = list(p.get("left_out") or [])
    return f"re-sliced {plan.target}: {len(want)} instance(s)" + (
        f"; left drained with no instance: {', '.join(left)}" if left else ""
    )


def _no_processes(mig: MigExecutor, gpu: GpuRef) -> str:
    pids = mig.processes(gpu)
    if pids:
        shown = ", ".join(str(x) for x in pids[:8])
        raise StepFailed(
            "processes",
            f"{len(pids)} compute process(es) still on the GPU (pid {shown}): stop the drained "
            "servers, then run the re-slice again",
        )
    return "no compute process on the GPU"


def _destroyer(mig: MigExecutor, gpu: GpuRef, g: GpuInstance) -> Callable[[], str]:
    def destroy() -> str:
        for ci in g.ci_ids:
            mig.destroy_ci(gpu, g.gi_id, ci)
        mig.destroy_gi(gpu, g.gi_id)
        return f"GPU instance {g.gi_id} and {len(g.ci_ids)} compute instance(s) destroyed"

    return destroy


def _mover(controls: Controls, name: str, slot: str, owner: str, reason: str) -> Callable[[], str]:
    def move() -> str:
        record = controls.registry.backend(name)
        # the same id may name a new instance (ids are reused): a drained backend is written
        # again (harmless); one already serving there was moved by an earlier run
        if record is not None and record.slot_id == slot and record.state is not DRAINED:
            return f"{name} is on {slot} already"
        controls.registry.set_slot(name, slot, owner, reason)
        return f"{name} registered on {slot}"

    return move


def _undrainer(controls: Controls, name: str, owner: str, reason: str) -> Callable[[], str]:
    def undrain() -> str:
        record = controls.registry.backend(name)
        if record is not None and record.state is BackendState.ACTIVE:
            return f"{name} is active already"
        weight = controls.registry.undrain(name, owner, reason, 1.0)
        return f"{name}: state=active, weight {weight:g}"

    return undrain


def recheck_reslice(plan: Plan, controls: Controls) -> list[str]:
    """Under the lock: every backend still registered, and none the plan found out of service
    (and does not drain itself) taking work again."""
    changed: list[str] = []
    for name in [str(n) for n in plan.params.get("backends") or []]:
        record = controls.registry.backend(name)
        if record is None:
            changed.append(f"{name} is no longer in the registry")
        elif not plan.params.get("drain", True) and record.state is not BackendState.DRAINED:
            changed.append(f"{name} is {record.state} now: it must stay drained")
    return changed


apply = apply_reslice
recheck = recheck_reslice
