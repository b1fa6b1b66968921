"""Drain every backend of a target first: the opening step of actions that take a GPU away.

A re-slice (and any other action that stops a GPU's servers) must first take its backends out
of the scheduler's choices. ``drain_all_first`` does that through drain's own apply (the same
registry moves, waits and progress keys ``draining:``/``wait:``/``drained:``); a backend that
is drained already is left as it is (drained -> draining is not a move) and its steps read
done. A drain that fails or times out raises ``StepFailed``/``StepTimeout`` naming the step,
and leaves the backends as drain leaves them (``draining``, owner and reason set).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from gpucon.actions.drain import apply_drain
from gpucon.actions.plan import (
    BlastRadius,
    OutcomeStatus,
    Plan,
    Progress,
    ProgressEvent,
    StepStatus,
    Tier,
)
from gpucon.controls.base import Controls
from gpucon.errors import StepFailed, StepTimeout
from gpucon.model.fleet import BackendState


def drain_all_first(
    names: Sequence[str],
    controls: Controls,
    progress: Progress,
    *,
    reason: str,
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    acting: list[str] = []
    for name in names:
        record = controls.registry.backend(name)
        if record is None:
            key = f"draining:{name}"
            progress(ProgressEvent(key, StepStatus.FAILED, f"{name} is not in the registry"))
            raise StepFailed(key, f"{name} is not in the registry")
        if record.state is BackendState.DRAINED:
            for key in (f"draining:{name}", f"wait:{name}", f"drained:{name}"):
                progress(ProgressEvent(key, StepStatus.DONE, f"{name}: already drained"))
            continue
        acting.append(name)
    if not acting:
        return
    sub = Plan(
        action="drain",
        target=acting[0],
        tier=Tier.DISRUPTIVE,
        preconditions=(),
        steps=(),
        blast_radius=BlastRadius(tuple(acting)),
        undo="",
        params={
            "backends": acting,
            "node": None,
            "reason": reason,
            "timeout_s": timeout_s,
            "poll_s": poll_s,
        },
    )
    outcome = apply_drain(sub, controls, progress, clock)
    if outcome.status is OutcomeStatus.TIMEOUT:
        raise StepTimeout("drain", outcome.message)
    if not outcome.ok:
        raise StepFailed("drain", outcome.message)
