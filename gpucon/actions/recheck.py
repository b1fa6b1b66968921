"""Preconditions checked again under the lock, on fresh state: drain's and undrain's ``recheck``.

A plan is made from a snapshot that may be seconds old; by the time its guard holds the locks,
a colleague's action may have drained the backend, a node drain may have cordoned its node and
evicted its pod. The guard calls ``recheck(plan, controls)`` after taking the locks and before
writing the intent: it reads the registry (and, where Kubernetes is configured, the node and
the pods) now and returns one text per precondition that no longer holds, naming what changed
and who changed it (the registry's owner and reason). An empty list: the plan may run.
"""

from __future__ import annotations

from typing import Protocol

from gpucon.actions.plan import Plan
from gpucon.controls.base import Controls
from gpucon.errors import StalePlan

OUT_OF_SERVICE = ("draining", "drained")


class _Owned(Protocol):
    """What the registry says about who last changed a backend, and why."""

    @property
    def owner(self) -> str | None: ...

    @property
    def reason(self) -> str | None: ...


def changed_by(record: _Owned) -> str:
    """`` (set by OWNER: REASON)`` from the registry, or nothing when it names no owner."""
    if not record.owner and not record.reason:
        return ""
    who = record.owner or "someone"
    return f" (set by {who}" + (f": {record.reason})" if record.reason else ")")


GONE = "{name} is no longer in the registry"


def recheck_drain(plan: Plan, controls: Controls) -> list[str]:
    """A backend drain is refused when the backend is drained already (someone else's drain
    finished while this one waited for the lock); a node drain leaves drained backends as they
    are, so only a backend gone from the registry, or the node gone from Kubernetes, stops it."""
    changed: list[str] = []
    node = plan.params.get("node")
    if node and controls.kube is not None and controls.kube.node_unschedulable(str(node)) is None:
        changed.append(f"node {node} no longer exists in Kubernetes")
    for name in [str(n) for n in plan.params.get("backends") or []]:
        record = controls.registry.backend(name)
        if record is None:
            changed.append(GONE.format(name=name))
        if record is None or node:
            continue
        if str(record.state) == "drained":
            changed.append(f"{name} is drained already{changed_by(record)}: nothing to do")
    return changed


def recheck_undrain(plan: Plan, controls: Controls) -> list[str]:
    """Each backend must still be draining or drained. A backend undrain (not a node's) is
    refused, where Kubernetes is configured, when the backend's node is cordoned (a node drain
    is under way or done: the scheduler would send it work on a node being emptied) or the pod
    the plan saw no longer exists; its pods are looked up again by their backend label."""
    changed: list[str] = []
    names = [str(n) for n in plan.params.get("backends") or []]
    for name in names:
        record = controls.registry.backend(name)
        if record is None:
            changed.append(GONE.format(name=name))
        elif str(record.state) not in OUT_OF_SERVICE:
            changed.append(f"{name} is {record.state} now{changed_by(record)}: nothing to undrain")
    kube = controls.kube
    if plan.params.get("node") or kube is None or len(names) != 1:
        return changed
    name = names[0]
    pods = kube.backend_pods(name)  # pod "namespace/name" -> its node
    planned_pod = plan.params.get("pod")
    if planned_pod and str(planned_pod) not in pods:
        changed.append(f"{name}'s pod {planned_pod} no longer exists (evicted or deleted)")
    nodes = {n for n in pods.values() if n}
    if plan.params.get("on_node"):
        nodes.add(str(plan.params["on_node"]))
    for node in sorted(nodes):
        if kube.node_unschedulable(node):
            changed.append(
                f"node {node}, where {name} runs, is cordoned (a node drain?): undrain the node "
                f"with gpucon undrain {node} --node, or uncordon it first"
            )
    return changed


def recheck_rebalance(plan: Plan, controls: Controls) -> list[str]:
    """Every weight the plan saw must still be what it saw (naming who changed one since),
    and the registry still at the plan's version (the write checks both again, atomically)."""
    changed: list[str] = []
    for name, seen in sorted(dict(plan.params.get("old_weights") or {}).items()):
        record = controls.registry.backend(str(name))
        if record is None:
            changed.append(GONE.format(name=name))
        elif (
            seen is not None
            and record.weight is not None
            and abs(float(seen) - record.weight) > 1e-9
        ):
            changed.append(
                f"the plan saw {name} at weight {float(seen):g} but it is now "
                f"{record.weight:g}{changed_by(record)}"
            )
    if not changed and plan.registry_version is not None:
        now = controls.registry.version()
        if now != plan.registry_version:
            raise StalePlan(plan.registry_version, now)
    return changed
