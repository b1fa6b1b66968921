"""Draining and undraining a group of backends as the opening and closing steps of a larger
action (re-slice, MPS restart): everything on one GPU, slot or VM leaves service before it
is touched.

``backends_on(snapshot, target)`` finds the backends a GPU's UUID, a slot id, a host/GPU
index or a VM's name covers. ``drain_group`` drains them through drain's own steps
(``gpucon.actions.drain``: ``draining`` and weight 0, wait for in-flight and pending work to
reach 0, ``drained``, with the same step keys ``draining:``/``wait:``/``drained:``), and
``undrain_group`` returns those the action drained. Every step is idempotent: a backend
drained already reports its steps done and is left as it is, so an action run again after a
crash converges. A drain that fails or times out raises ``StepFailed``/``StepTimeout`` naming
the step, and leaves the backends as drain leaves them (``draining``, owner and reason set).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

from gpucon.actions.drain import already_drained, drain_backends
from gpucon.actions.plan import Progress, ProgressEvent, StepStatus
from gpucon.actions.steps import run_step
from gpucon.controls.base import Controls
from gpucon.errors import StepFailed, StepTimeout
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot


def backends_on(snapshot: Snapshot, target: str) -> tuple[Backend, ...]:
    """Backends whose slot is ``target``, or is on the GPU (UUID) or VM (name) ``target``."""
    found = []
    for backend in snapshot.backends.values():
        slot = snapshot.slots.get(backend.slot_id or "")
        names = {backend.slot_id}
        if slot is not None:
            names.update({slot.gpu_uuid, slot.vm.name if slot.vm else None})
            if slot.host is not None and slot.gpu_index is not None:
                names.add(f"{slot.host}/gpu{slot.gpu_index}")
        if target in names:
            found.append(backend)
    return tuple(sorted(found, key=lambda b: b.name))


def drain_group(
    controls: Controls,
    names: Iterable[str],
    reason: str,
    timeout_s: float,
    poll_s: float,
    progress: Progress,
    clock: Callable[[], float] = time.monotonic,
    keep_serving: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Drain each backend (StepFailed/StepTimeout naming the step on failure); one the
    registry does not know fails its ``draining:`` step. ``keep_serving`` as drain's (the
    plan's, ``drain.kept_of``): a backend whose model has lost the others it counted on is
    not written."""
    deadline = clock() + timeout_s
    acting: list[str] = []
    for name in names:
        if controls.registry.backend(name) is None:
            key = f"draining:{name}"
            progress(ProgressEvent(key, StepStatus.FAILED, f"{name} is not in the registry"))
            raise StepFailed(key, f"{name} is not in the registry")
        if not already_drained(controls, name, progress):
            acting.append(name)
    drain_backends(controls, acting, reason, deadline, poll_s, progress, clock, keep_serving)


def undrain_group(
    controls: Controls, names: Iterable[str], reason: str, progress: Progress
) -> None:
    """Return each backend to service with the weight it had; one active already is left."""
    registry = controls.registry
    for name in names:
        key = f"undrain:{name}"
        record = registry.backend(name)
        if record is not None and record.state is BackendState.ACTIVE:
            progress(ProgressEvent(key, StepStatus.DONE, f"{name}: active already"))
            continue
        text = f"{name}: state=active, weight restored"
        undrain = partial(registry.undrain, name, controls.operator, reason, 1.0)
        run_step(progress, key, text, undrain, timeout_error=StepFailed)


__all__ = ["StepTimeout", "backends_on", "drain_group", "undrain_group"]
