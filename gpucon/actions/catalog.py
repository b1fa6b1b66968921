"""The actions gpucon knows, by name: each one's tier, ``plan`` and ``apply``.

An action module exposes ``plan(snapshot, params) -> Plan`` (pure) and
``apply(plan, controls, progress) -> Outcome``, and may expose ``recheck(plan, controls) ->
list[str]``: the guard calls it under the locks, before the intent is written, to check the
plan's preconditions again on fresh state (one text per precondition that no longer holds,
naming what changed and who changed it); this catalog imports them when first asked for
(the console's start-up never pays for an action it does not run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpucon.actions.plan import Outcome, Plan, Progress, Tier
from gpucon.controls.base import Controls
from gpucon.errors import BadParams, shown
from gpucon.model.snapshot import Snapshot

PlanFn = Callable[[Snapshot, Mapping[str, object]], Plan]
ApplyFn = Callable[[Plan, Controls, Progress], Outcome]
RecheckFn = Callable[[Plan, Controls], list[str]]

# the params an operator may change in the console's plan before applying it, by action
EDITABLE: dict[str, tuple[str, ...]] = {
    "probe": ("count", "rate", "concurrency", "duration", "timeout"),
    # the reason recorded in the registry and the audit trail (blank: the plan's default)
    "drain": ("reason",),
    "undrain": ("reason",),
    "mps-restart": ("reason",),
    "reslice": ("reason",),
}

# name -> (tier, title)
KNOWN: dict[str, tuple[Tier, str]] = {
    "drain": (Tier.DISRUPTIVE, "Drain"),
    "undrain": (Tier.REVERSIBLE, "Undrain"),
    "rebalance": (Tier.REVERSIBLE, "Rebalance weights"),
    "probe": (Tier.REVERSIBLE, "Load probe"),
    "reslice": (Tier.DESTRUCTIVE, "Re-slice MIG"),
    "mps-restart": (Tier.DISRUPTIVE, "Restart MPS"),
}


@dataclass(frozen=True, slots=True)
class ActionSpec:
    name: str
    tier: Tier
    title: str
    plan: PlanFn
    apply: ApplyFn
    # params the console's plan screen lets the operator edit (the action's plan is pure
    # and quick for them: it is made again on the UI thread as they are typed)
    editable: tuple[str, ...] = ()


def get_action(name: str) -> ActionSpec:
    """The action called ``name``; BadParams naming ``action`` when there is none."""
    entry = KNOWN.get(name)
    if entry is None:
        raise BadParams("action", f"unknown action {shown(name)} (known: {', '.join(KNOWN)})")
    tier, title = entry
    plan_fn, apply_fn = _functions(name)
    return ActionSpec(
        name, tier, title, _saying_what_is_stale(plan_fn, name), apply_fn, EDITABLE.get(name, ())
    )


def _saying_what_is_stale(plan_fn: PlanFn, name: str) -> PlanFn:
    """``plan_fn`` whose plans lead with a WARN line per stale source their checks may read
    (``actions.freshness``): a check that passes on a source's last word says so."""
    from gpucon.actions.freshness import with_stale_inputs

    rechecked = recheck_of(name) is not None

    def plan(snapshot: Snapshot, params: Mapping[str, object]) -> Plan:
        return with_stale_inputs(plan_fn(snapshot, params), snapshot, rechecked)

    return plan


def _functions(name: str) -> tuple[PlanFn, ApplyFn]:
    """The action's plan and apply, imported when first asked for (plain imports)."""
    if name == "drain":
        from gpucon.actions import drain

        return drain.plan, drain.apply
    if name == "undrain":
        from gpucon.actions import undrain

        return undrain.plan, undrain.apply
    if name == "rebalance":
        from gpucon.actions import rebalance

        return rebalance.plan, rebalance.apply
    if name == "reslice":
        from gpucon.actions import reslice, reslice_apply

        return reslice.plan, reslice_apply.apply
    if name == "mps-restart":
        from gpucon.actions import mps_restart

        return mps_restart.plan, mps_restart.apply
    from gpucon.actions import probe

    return probe.plan, probe.apply


def recheck_of(name: str) -> RecheckFn | None:
    """The action's ``recheck``, or None when its module has none (or the action is unknown)."""
    if name == "drain":
        from gpucon.actions import drain

        return drain.recheck
    if name == "undrain":
        from gpucon.actions import undrain

        return undrain.recheck
    if name == "rebalance":
        from gpucon.actions import rebalance

        return rebalance.recheck
    if name == "reslice":
        from gpucon.actions import reslice_apply

        return reslice_apply.recheck
    if name == "mps-restart":
        from gpucon.actions import mps_restart

        return mps_restart.recheck
    return None  # a probe changes no state: nothing to check again
