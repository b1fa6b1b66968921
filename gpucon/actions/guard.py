"""The guard every action runs under: preconditions, the target's lock, the audit trail.

``execute(spec, plan, controls, progress)`` refuses a plan whose preconditions fail, takes the
target's lock (renewed in a background thread while the action runs, released only by its
owner), writes the intent to the audit log before the first step, records each step's result
as ``apply`` reports it, and the outcome last. It always returns an ``Outcome``; the operator
learns from it what happened and what state was left, whatever went wrong.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpucon.actions.plan import (
    ActionError,
    LockHeld,
    Outcome,
    OutcomeStatus,
    Plan,
    Progress,
    ProgressEvent,
    Refused,
    StepResult,
    StepStatus,
    status_for,
)
from gpucon.controls.base import Controls, LockLease

LOCK_TTL_S = 15.0

ApplyFn = Callable[[Plan, Controls, Progress], Outcome]


@dataclass
class _StepRecorder:
    """Wraps the caller's Progress: audits each finished step and keeps its result."""

    plan: Plan
    controls: Controls
    forward: Progress
    results: list[StepResult]
    started: dict[str, float]
    audit_errors: list[str]

    def __call__(self, event: ProgressEvent) -> None:
        now = time.monotonic()
        if event.status is StepStatus.STARTED:
            self.started[event.step] = now
        elif event.status in (StepStatus.DONE, StepStatus.FAILED):
            ok = event.status is StepStatus.DONE
            took = now - self.started.get(event.step, now)
            self.results.append(StepResult(event.step, ok, event.text, took))
            try:
                self._audit(event)
            except Exception as exc:  # the step happened; the outcome will say it is unrecorded
                self.audit_errors.append(f"step {event.step} not in the audit log: {exc}")
        with contextlib.suppress(Exception):  # a broken display must not break the action
            self.forward(event)

    def _audit(self, event: ProgressEvent) -> None:
        self.controls.audit.record(
            operator=self.controls.operator,
            event="step",
            action=self.plan.action,
            target=self.plan.target,
            digest=self.plan.digest,
            status=str(event.status),
            step=event.step,
            text=event.text,
        )


class _LockKeeper:
    """Renews a lease every third of its TTL until stopped; notes if it was lost."""

    def __init__(self, controls: Controls, lease: LockLease, ttl_s: float) -> None:
        self.controls = controls
        self.lease = lease
        self.ttl_s = ttl_s
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"lock-renew:{lease.target}", daemon=True
        )

    def __enter__(self) -> _LockKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.ttl_s)

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 3.0):
            try:
                if not self.controls.registry.renew_lock(self.lease, self.ttl_s):
                    self.lost = True
            except Exception:  # a blip: try again at the next period, the TTL covers it
                continue


def _refusal(plan: Plan, controls: Controls, error: ActionError) -> Outcome:
    message = str(error)
    try:
        controls.audit.record(
            operator=controls.operator,
            event="refused",
            action=plan.action,
            target=plan.target,
            digest=plan.digest,
            status=str(status_for(error)),
            text=message,
        )
    except Exception as exc:  # nothing was done; say the record is missing
        message += f" (not in the audit log: {type(exc).__name__}: {exc})"
    return Outcome(plan.action, plan.target, status_for(error), message, plan.digest)


def _error(plan: Plan, message: str) -> Outcome:
    return Outcome(plan.action, plan.target, OutcomeStatus.ERROR, message, plan.digest)


def execute(
    apply: ApplyFn,
    plan: Plan,
    controls: Controls,
    progress: Progress,
    *,
    lock_ttl_s: float = LOCK_TTL_S,
) -> Outcome:
    """Run ``apply(plan, controls, progress)`` under the guard; never raises ActionError."""
    if not plan.ok:
        failed = "; ".join(f"{p.name}: {p.text}" for p in plan.failed_preconditions)
        return _refusal(plan, controls, Refused(f"precondition failed: {failed}"))
    try:
        lease = controls.registry.acquire_lock(
            plan.target, controls.operator, plan.action, lock_ttl_s
        )
    except LockHeld as held:
        return _refusal(plan, controls, held)
    except Exception as exc:  # the registry cannot be reached: nothing was done
        return _error(plan, f"could not take the lock on {plan.target}: {exc}; nothing was done")
    results: list[StepResult] = []
    recorder = _StepRecorder(plan, controls, progress, results, {}, [])
    stream_errors_before = len(controls.audit.stream_errors)
    try:
        try:
            controls.audit.record(
                operator=controls.operator,
                event="intent",
                action=plan.action,
                target=plan.target,
                digest=plan.digest,
                text=plan.summary or "; ".join(s.text for s in plan.steps),
            )
        except Exception as exc:  # an action that cannot be recorded does not run
            return _error(plan, f"the audit log cannot be written ({exc}); nothing was done")
        with _LockKeeper(controls, lease, lock_ttl_s) as keeper:
            try:
                outcome = apply(plan, controls, recorder)
            except ActionError as error:
                outcome = Outcome(
                    plan.action, plan.target, status_for(error), str(error), plan.digest
                )
            except Exception as error:  # a bug or an unreachable system: still recorded
                outcome = _error(plan, f"{type(error).__name__}: {error}")
        notes = [*recorder.audit_errors, *controls.audit.stream_errors[stream_errors_before:]]
        if keeper.lost:
            notes.append("the lock expired while the action ran")
        message = outcome.message + "".join(f" ({n})" for n in notes)
        outcome = replace(outcome, steps=tuple(results), message=message)
        try:
            controls.audit.record(
                operator=controls.operator,
                event="outcome",
                action=plan.action,
                target=plan.target,
                digest=plan.digest,
                status=str(outcome.status),
                text=outcome.message + (f" — {outcome.state_left}" if outcome.state_left else ""),
            )
        except Exception as exc:
            note = f" (the outcome is not in the audit log: {type(exc).__name__}: {exc})"
            outcome = replace(outcome, message=outcome.message + note)
        return outcome
    finally:
        with contextlib.suppress(Exception):  # otherwise it expires by its TTL
            controls.registry.release_lock(lease)
