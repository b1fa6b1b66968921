"""Re-slice (tier 3): cut a GPU into a new MIG layout, its backends drained first.

``plan(snapshot, params)`` is pure. It reads the layout (``layout``: ``3g.40gb+2g.20gb+2x1g.10gb``,
or ``config_text`` + ``config_name``: a mig-parted file), finds a placement for every instance
on the GPU's profile table (``gpucon.model.mig_placement``), and lists the steps: drain every
backend on the GPU (``drain``, the default; else refuse unless all are drained), check that
no compute process is left, destroy the compute and GPU instances, create the new ones at
their placements, register the backends on the new instances (naming the instances left
without one and the backends left without an instance, which stay drained), undrain. The
``executor`` (``nvml``, ``nvidia-smi``, ``simulated``) runs those steps; ``kubernetes``
instead cordons the node, sets ``nvidia.com/mig.config`` to the named config, follows
``nvidia.com/mig.config.state`` and uncordons (mig-manager re-slices every GPU of the node, so
the blast radius is the node's). ``gpucon.actions.reslice_apply`` applies the plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucon.actions.backends import capacity_radius, node_backends, text_param
from gpucon.actions.headroom import kept_serving_by, others_serving
from gpucon.actions.plan import OUT_OF_SERVICE, Plan, Precondition, Step, Tier
from gpucon.actions.reslice_fleet import (
    assign,
    capacity_lines,
    find_gpu,
    gpu_backends,
    gpu_name,
    mig_slots,
)
from gpucon.errors import MAX_ACTION_TIMEOUT_S, BadParams, finite_number
from gpucon.model.fleet import Backend, BackendState, Gpu
from gpucon.model.mig_layout import LayoutError, LayoutItem, describe_counts, parse_layout
from gpucon.model.mig_parted import MigPartedError, layout_for, parse_config
from gpucon.model.mig_placement import LayoutFit, fit_layout
from gpucon.model.snapshot import Snapshot

EXECUTORS = ("nvml", "nvidia-smi", "kubernetes", "simulated")
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_REASON = "re-slice with gpucon"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"


def _layout(params: Mapping[str, Any], gpu: Gpu) -> tuple[tuple[LayoutItem, ...], str, str]:
    """The instances asked for, how the layout was given, and the config name (or "")."""
    name = text_param(params, "config_name")
    text = params.get("config_text")
    if name is not None:
        if not isinstance(text, str):
            if params.get("executor") == "kubernetes":  # mig-manager knows its own configs
                return (), f"mig-parted config {name} (as mig-manager has it)", name
            raise BadParams("config_file", "a config name needs the mig-parted file it is in")
        table = gpu.mig_profiles
        try:
            choice = layout_for(
                parse_config(text),
                name,
                gpu.index,
                lambda p: table is not None and table.by_name(p) is not None,
            )
        except MigPartedError as exc:
            raise BadParams("config_file", str(exc)) from None
        return choice.items, f"mig-parted config {name} ({choice.why})", name
    try:
        items = parse_layout(params.get("layout"))
    except LayoutError as exc:
        raise BadParams("layout", str(exc)) from None
    return items, "layout", ""


def _fit(gpu: Gpu, items: tuple[LayoutItem, ...], label: str) -> LayoutFit:
    if gpu.mig_profiles is None:
        return LayoutFit(problems=(f"{label} has no MIG profile table (no MIG, or not read)",))
    if not items:
        return LayoutFit(note="the layout is checked by mig-manager against its own config")
    return fit_layout(gpu.mig_profiles, items, gpu.name or label)


def _drain_steps(backends: list[Backend], drain: bool, timeout_s: float) -> list[Step]:
    steps: list[Step] = []
    if not drain:
        return steps
    acting = [b for b in backends if b.state is not BackendState.DRAINED]
    steps += [Step(f"draining:{b.name}", f"set {b.name} state=draining, weight 0") for b in acting]
    steps += [
        Step(f"wait:{b.name}", f"wait until {b.name} has 0 in flight (timeout {timeout_s:g} s)")
        for b in acting
    ]
    steps += [Step(f"drained:{b.name}", f"mark {b.name} drained") for b in acting]
    return steps


def plan_reslice(snapshot: Snapshot, params: Mapping[str, Any]) -> Plan:
    gpu = find_gpu(snapshot, params.get("gpu"))
    label = gpu_name(gpu)
    executor = str(params.get("executor") or "nvml")
    if executor not in EXECUTORS:
        raise BadParams("executor", f"expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    kube = executor == "kubernetes"
    items, given_as, config_name = _layout(params, gpu)
    if kube and not config_name:
        raise BadParams(
            "layout",
            "the Kubernetes path applies a named mig-parted config (mig-manager knows configs, "
            "not layouts): give --config-file FILE --config-name NAME",
        )
    fit = _fit(gpu, items, label)
    drain = bool(params.get("drain", True))
    timeout_s = finite_number(
        "timeout_s",
        params.get("timeout_s", DEFAULT_TIMEOUT_S),
        minimum=1.0,
        maximum=MAX_ACTION_TIMEOUT_S,
    )
    reason = text_param(params, "reason") or DEFAULT_REASON
    node = next((s.node for s in mig_slots(snapshot, gpu) if s.node), None) or gpu.host
    backends = list(node_backends(snapshot, node) if kube else gpu_backends(snapshot, gpu))
    old = mig_slots(snapshot, gpu)

    pre = [Precondition("layout", fit.ok or (kube and not items), _layout_text(fit, given_as))]
    if not kube:
        pre.append(
            Precondition(
                "mig_enabled",
                gpu.mig_enabled is True,
                f"MIG is enabled on {label}"
                if gpu.mig_enabled
                else f"MIG is not enabled on {label} (n/a or off): enabling it resets the GPU, "
                "which gpucon does not do",
            )
        )
    for b in backends:
        ok = drain or b.state is BackendState.DRAINED
        text = f"{b.name} is {b.state}" + ("" if ok else ": drain it first, or re-slice with drain")
        pre.append(Precondition(f"drained:{b.name}", ok, text))
    pre += others_serving(snapshot, tuple(backends), bool(params.get("force", False)))
    procs = [p.pid for s in old for p in s.processes] + [p.pid for p in gpu.processes]
    if procs:
        pre.append(
            Precondition(
                "processes",
                True,
                f"{len(set(procs))} compute process(es) on {label} now: they must exit (stop "
                "the drained servers) before the instances can be destroyed",
                warning=True,
            )
        )
    assignment = assign(snapshot, backends, fit.placed)
    steps = _drain_steps(backends, drain, timeout_s)
    steps.append(Step(f"processes:{label}", f"check that no compute process is left on {label}"))
    if kube:
        steps += _kube_steps(node, config_name, timeout_s)
    else:
        steps += _mig_steps(old, fit, backends, assignment, label)
    names = tuple(b.name for b in backends)
    changes = capacity_lines(snapshot, backends, fit.placed, assignment, label) if not kube else []
    models = sorted({b.model or "(no model)" for b in backends})
    vms = sorted({s.vm.name for s in snapshot.slots.values() if s.vm and s.gpu_uuid == gpu.uuid})
    changes.append(
        f"blast radius: {len(names)} backend(s), models {', '.join(models) or 'none'}, "
        f"VMs {', '.join(vms) or 'none'}" + (f", every GPU of node {node}" if kube else "")
    )
    changes += [f"{n} gets no instance: it stays drained" for n in assignment.left_out]
    changes += [
        f"new {fit.placed[i].describe()} has no backend: start a server there and register it"
        for i in assignment.empty
    ]
    old_layout = describe_counts(s.profile or "?" for s in old) or "none"
    return Plan(
        action="reslice",
        target=label,
        tier=Tier.DESTRUCTIVE,
        preconditions=tuple(pre),
        steps=tuple(steps),
        blast_radius=capacity_radius(
            snapshot, names, tuple(sorted(s.id for s in old)), OUT_OF_SERVICE
        ),
        undo=f"re-slice {label} back to {old_layout}, register its backends again",
        params=_params(gpu, label, executor, node, config_name, fit, old, assignment, params)
        | {"backends": list(names), "drain": drain, "timeout_s": timeout_s, "reason": reason}
        | {"keep_serving": kept_serving_by(snapshot, backends, bool(params.get("force", False)))},
        summary=f"re-slice {label} ({gpu.name or 'GPU'}) from {old_layout} to "
        f"{describe_counts(p.profile.name for p in fit.placed) or config_name}",
        changes=tuple(changes),
        made_at=snapshot.taken_at,
    )


def _layout_text(fit: LayoutFit, given_as: str) -> str:
    if fit.problems:
        return "; ".join(fit.problems)
    placed = ", ".join(p.describe() for p in fit.placed)
    return f"{given_as}: {placed or 'checked by mig-manager'}" + (
        f" ({fit.note})" if fit.note else ""
    )


def _mig_steps(
    old: list[Any], fit: LayoutFit, backends: list[Backend], assignment: Any, label: str
) -> list[Step]:
    steps = [
        Step(
            f"destroy:gi{s.gi_id}",
            f"destroy the compute instance(s) and GPU instance {s.gi_id} ({s.profile})",
        )
        for s in old
    ]
    for i, placed in enumerate(fit.placed):
        steps.append(
            Step(f"create:{i}", f"create {placed.describe()} on {label} and its compute instance")
        )
    for b in backends:
        index = assignment.by_backend.get(b.name)
        if index is not None:
            new = fit.placed[index].describe()
            steps.append(Step(f"register:{b.name}", f"register {b.name} on the new {new}"))
    steps += [
        Step(f"active:{b.name}", f"undrain {b.name} (restore its weight)")
        for b in backends
        if b.name in assignment.by_backend
    ]
    return steps


def _kube_steps(node: str, config: str, timeout_s: float) -> list[Step]:
    return [
        Step(f"cordon:{node}", f"cordon node {node}"),
        Step(f"label:{node}", f"set {MIG_CONFIG_LABEL}={config} on {node}"),
        Step(
            f"mig-state:{node}",
            f"follow {MIG_STATE_LABEL} until success (alarm on failed, or pending past "
            f"{timeout_s:g} s)",
        ),
        Step(f"uncordon:{node}", f"uncordon node {node} once mig-manager reports success"),
    ]


def _params(
    gpu: Gpu,
    label: str,
    executor: str,
    node: str,
    config_name: str,
    fit: LayoutFit,
    old: list[Any],
    assignment: Any,
    params: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "gpu": label,
        "uuid": gpu.uuid,
        "host": gpu.host,
        "index": gpu.index,
        "executor": executor,
        "node": node,
        "config_name": config_name,
        "placements": [[p.profile.name, p.profile.profile_id, p.start, p.size] for p in fit.placed],
        "old_instances": [[s.gi_id, s.ci_id, s.profile] for s in old],
        "assignment": dict(assignment.by_backend),
        "left_out": list(assignment.left_out),
        "poll_s": finite_number("poll_s", params.get("poll_s", 0.2), minimum=0.01, maximum=60.0),
    }


plan = plan_reslice
