"""The Kubernetes half of a re-slice: NVIDIA's mig-manager does the cutting.

Cordon the node, set ``nvidia.com/mig.config`` to the named mig-parted config (not again when
it is set already), follow ``nvidia.com/mig.config.state`` until ``success`` and uncordon.
``failed`` stops at once, ``pending`` past the plan's timeout stops too: both leave the node
cordoned and say so. After this run set the label, a ``success`` counts only once another
state was seen, so mig-manager's answer to the old config never uncordons the node.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpucon.actions.plan import Plan, Progress, ProgressEvent, StepStatus
from gpucon.actions.reslice import MIG_CONFIG_LABEL, MIG_STATE_LABEL
from gpucon.controls.base import Controls
from gpucon.errors import StepFailed, StepTimeout

Run = Callable[[str, str, Callable[[], str | None]], None]


def apply_kube(
    plan: Plan, controls: Controls, run: Run, progress: Progress, clock: Callable[[], float]
) -> str:
    kube = controls.kube
    node = str(plan.params["node"])
    config = str(plan.params["config_name"])
    if kube is None:
        raise StepFailed(f"cordon:{node}", "Kubernetes is not configured")
    run(f"processes:{plan.target}", "drained", lambda: "the backends are drained")

    def cordon() -> str:
        kube.cordon(node)  # cordoning a cordoned node changes nothing
        return f"{node} cordoned"

    run(f"cordon:{node}", f"cordon {node}", cordon)
    changed = [False]

    def label() -> str:
        labels = kube.node_labels(node)
        if labels is None:
            raise StepFailed(f"label:{node}", f"node {node} no longer exists")
        if labels.get(MIG_CONFIG_LABEL) == config:
            return f"{MIG_CONFIG_LABEL} is {config} already"
        kube.set_node_label(node, MIG_CONFIG_LABEL, config)
        changed[0] = True
        return f"{MIG_CONFIG_LABEL}={config}"

    run(f"label:{node}", f"set {MIG_CONFIG_LABEL}={config}", label)
    key = f"mig-state:{node}"
    progress(ProgressEvent(key, StepStatus.STARTED, f"following {MIG_STATE_LABEL}"))
    _follow_state(kube, node, config, changed[0], plan, progress, clock)

    def uncordon() -> str:
        kube.uncordon(node)
        return f"{node} uncordoned"

    run(f"uncordon:{node}", f"uncordon {node}", uncordon)
    return (
        f"mig-manager applied {config} on {node}; the backends stay drained: undrain each once "
        "its pod runs on a new slot (gpucon undrain NAME)"
    )


def _follow_state(
    kube: Any,
    node: str,
    config: str,
    changed: bool,
    plan: Plan,
    progress: Progress,
    clock: Callable[[], float],
) -> None:
    """Until ``success``: ``failed`` stops at once; ``pending`` past the timeout stops too.
    After this run set the label, a ``success`` counts only once a non-success state was seen
    (mig-manager's answer to the old config must not uncordon the node)."""
    key = f"mig-state:{node}"
    timeout_s = float(plan.params.get("timeout_s", 300.0))
    poll_s = float(plan.params.get("poll_s", 0.2))
    started = clock()
    seen_work = not changed
    while True:
        labels = kube.node_labels(node) or {}
        state = labels.get(MIG_STATE_LABEL, "(none)")
        waited = clock() - started
        if state == "failed":
            text = f"mig-manager reports failed for {config} on {node}; {node} stays cordoned"
            progress(ProgressEvent(key, StepStatus.FAILED, text))
            raise StepFailed(key, text)
        if state != "success":
            seen_work = True
        elif seen_work and labels.get(MIG_CONFIG_LABEL) == config:
            progress(ProgressEvent(key, StepStatus.DONE, f"success after {waited:.1f} s"))
            return
        if waited > timeout_s:
            text = f"{MIG_STATE_LABEL} is {state} after {waited:.0f} s; {node} stays cordoned"
            progress(ProgressEvent(key, StepStatus.FAILED, text))
            raise StepTimeout(key, text)
        progress(ProgressEvent(key, StepStatus.RUNNING, f"{state} for {waited:.0f} s"))
        time.sleep(poll_s)
