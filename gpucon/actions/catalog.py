"""The actions gpucon knows, by name: each one's tier, ``plan`` and ``apply``.

An action module exposes ``plan(snapshot, params) -> Plan`` (pure) and
``apply(plan, controls, progress) -> Outcome``; this catalog finds them, importing lazily so
that an action still being written (``probe``) only disappears from the list.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpucon.actions.plan import BadParams, Outcome, Plan, Progress, Tier
from gpucon.controls.base import Controls
from gpucon.model.snapshot import Snapshot

PlanFn = Callable[[Snapshot, Mapping[str, object]], Plan]
ApplyFn = Callable[[Plan, Controls, Progress], Outcome]

# name -> (module, tier, title)
KNOWN: dict[str, tuple[str, Tier, str]] = {
    "drain": ("gpucon.actions.drain", Tier.DISRUPTIVE, "Drain"),
    "undrain": ("gpucon.actions.undrain", Tier.REVERSIBLE, "Undrain"),
    "rebalance": ("gpucon.actions.rebalance", Tier.REVERSIBLE, "Rebalance weights"),
    "probe": ("gpucon.actions.probe", Tier.REVERSIBLE, "Load probe"),
}


@dataclass(frozen=True, slots=True)
class ActionSpec:
    name: str
    tier: Tier
    title: str
    plan: PlanFn
    apply: ApplyFn


def get_action(name: str) -> ActionSpec:
    """The action called ``name``; BadParams naming ``action`` when there is none."""
    entry = KNOWN.get(name)
    if entry is None:
        raise BadParams("action", f"unknown action {name!r} (known: {', '.join(KNOWN)})")
    module_name, tier, title = entry
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise BadParams("action", f"action {name!r} is not available in this build") from None
        raise
    # a module holding two actions names them plan_<name>/apply_<name>
    plan_fn = getattr(module, f"plan_{name}", None) or module.plan
    apply_fn = getattr(module, f"apply_{name}", None) or module.apply
    return ActionSpec(name, tier, title, plan_fn, apply_fn)
