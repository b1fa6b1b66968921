"""Draining and undraining a group of backends as steps of a larger action (MPS restart,
re-slice): everything on one GPU, slot or VM leaves service before it is touched.

``backends_on(snapshot, target)`` finds the backends a GPU's UUID, a slot id, a host/GPU
index or a VM's name covers. ``drain_group`` drains them the way ``gpucon drain`` does
(``draining`` and weight 0, wait for in-flight and pending work to reach 0, ``drained``)
with the same step keys, and ``undrain_group`` returns those the action drained. Every step
is idempotent: a backend drained already reports its steps done, so an action run again
after a crash converges.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from gpucon.actions.drain import _wait_idle
from gpucon.actions.plan import Progress, ProgressEvent, StepStatus
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


def _step(progress: Progress, key: str, text: str, fn: Callable[[], object]) -> None:
    progress(ProgressEvent(key, StepStatus.STARTED, text))
    try:
        fn()
    except StepFailed as failure:
        progress(ProgressEvent(key, StepStatus.FAILED, str(failure)))
        raise
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        progress(ProgressEvent(key, StepStatus.FAILED, detail))
        raise StepFailed(key, detail) from exc
    progress(ProgressEvent(key, StepStatus.DONE, text))


def drain_group(
    controls: Controls,
    names: Iterable[str],
    reason: str,
    timeout_s: float,
    poll_s: float,
    progress: Progress,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Drain each backend (StepFailed/StepTimeout naming the step on failure)."""
    registry = controls.registry
    owner = controls.operator
    deadline = clock() + timeout_s
    acting = []
    for name in names:
        record = registry.backend(name)
        if record is not None and record.state is BackendState.DRAINED:
            for key in (f"draining:{name}", f"wait:{name}", f"drained:{name}"):
                progress(ProgressEvent(key, StepStatus.DONE, f"{name}: drained already"))
            continue
        acting.append(name)
        _step(
            progress,
            f"draining:{name}",
            f"{name}: state=draining, weight 0",
            lambda n=name: registry.begin_drain(n, owner, reason),  # type: ignore[misc]
        )
    for name in acting:
        key = f"wait:{name}"
        progress(ProgressEvent(key, StepStatus.STARTED, f"waiting for {name}"))
        try:
            _wait_idle(controls, name, deadline, poll_s, progress, clock)
        except StepFailed:
            raise
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            progress(ProgressEvent(key, StepStatus.FAILED, detail))
            raise StepFailed(key, detail) from exc
    for name in acting:
        _step(
            progress,
            f"drained:{name}",
            f"{name}: state=drained",
            lambda n=name: registry.mark_state(n, "drained", owner, reason),  # type: ignore[misc]
        )


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
        _step(
            progress,
            key,
            f"{name}: state=active, weight restored",
            lambda n=name: registry.undrain(n, controls.operator, reason, 1.0),  # type: ignore[misc]
        )


__all__ = ["StepTimeout", "backends_on", "drain_group", "undrain_group"]
