"""The guard every action runs under: preconditions, the locks, the audit trail.

``execute(spec, plan, controls, progress)`` refuses a plan whose preconditions fail, takes the
locks of the target and of every backend in the plan's blast radius (in sorted order, all or
none: a node drain and an undrain of one of its backends on another console cannot both run),
renews them in a background thread while the action runs (released only by their owner),
writes the intent to the audit log before the first step, records each step's result as
``apply`` reports it, and the outcome last. It always returns an ``Outcome``; the operator
learns from it what happened and what state was left, whatever went wrong.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpucon.actions.plan import (
    Outcome,
    OutcomeStatus,
    Plan,
    Progress,
    ProgressEvent,
    StepResult,
    StepStatus,
    status_for,
)
from gpucon.controls.base import Controls, LockLease
from gpucon.errors import ActionError, LockHeld, Refused

LOCK_TTL_S = 15.0

ApplyFn = Callable[[Plan, Controls, Progress], Outcome]


def record_event(controls: Controls, plan: Plan, event: str, **fields: str) -> None:
    """One audit record of ``plan``: who, what, on which target, under which plan digest."""
    controls.audit.record(
        operator=controls.operator,
        event=event,
        action=plan.action,
        target=plan.target,
        digest=plan.digest,
        **fields,
    )


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
        record_event(
            self.controls,
            self.plan,
            "step",
            status=str(event.status),
            step=event.step,
            text=event.text,
        )


def lock_targets(plan: Plan) -> tuple[str, ...]:
    """Every lock a plan needs: its target's and each blast-radius backend's, sorted.

    One order for every console: two guards wanting overlapping sets meet at the first lock
    they share, so one of them always gets all it needs.
    """
    return tuple(sorted({plan.target, *plan.blast_radius.backends}))


def acquire_locks(controls: Controls, plan: Plan, ttl_s: float) -> list[LockLease]:
    """All of ``lock_targets(plan)`` or none: on LockHeld (or any error) what was taken is
    released before the error propagates. A backend's lock names the action and its target
    ("drain node-a"), so a colleague refused on it learns which action holds it."""
    taken: list[LockLease] = []
    try:
        for key in lock_targets(plan):
            doing = plan.action if key == plan.target else f"{plan.action} {plan.target}"
            taken.append(controls.registry.acquire_lock(key, controls.operator, doing, ttl_s))
    except BaseException:
        release_locks(controls, taken)
        raise
    return taken


def release_locks(controls: Controls, leases: list[LockLease]) -> None:
    for lease in reversed(leases):
        with contextlib.suppress(Exception):  # otherwise it expires by its TTL
            controls.registry.release_lock(lease)


class _LockKeeper:
    """Renews the leases every third of their TTL until stopped; notes which were lost."""

    def __init__(self, controls: Controls, leases: list[LockLease], ttl_s: float) -> None:
        self.controls = controls
        self.leases = leases
        self.ttl_s = ttl_s
        self.lost: set[str] = set()
        self._stop = threading.Event()
        name = f"lock-renew:{leases[0].target}" if leases else "lock-renew"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> _LockKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.ttl_s)

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 3.0):
            for lease in self.leases:
                try:
                    if not self.controls.registry.renew_lock(lease, self.ttl_s):
                        self.lost.add(lease.target)
                except Exception:  # a blip: try again at the next period, the TTL covers it
                    continue


def _lock_refusal(plan: Plan, held: LockHeld) -> str:
    """Who holds which lock since when, and, for a blast-radius lock, why this plan needs it."""
    if held.target == plan.target:
        return f"{held}; nothing was done"
    return f"{plan.action} {plan.target} touches {held.target}: {held}; nothing was done"


def _refusal(plan: Plan, controls: Controls, error: ActionError, message: str = "") -> Outcome:
    message = message or str(error)
    try:
        record_event(controls, plan, "refused", status=str(status_for(error)), text=message)
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
        leases = acquire_locks(controls, plan, lock_ttl_s)
    except LockHeld as held:
        return _refusal(plan, controls, held, _lock_refusal(plan, held))
    except Exception as exc:  # the registry cannot be reached: nothing was done
        return _error(plan, f"could not take the locks for {plan.target}: {exc}; nothing was done")
    results: list[StepResult] = []
    recorder = _StepRecorder(plan, controls, progress, results, {}, [])
    stream_errors_before = len(controls.audit.stream_errors)
    try:
        try:
            record_event(
                controls, plan, "intent", text=plan.summary or "; ".join(s.text for s in plan.steps)
            )
        except Exception as exc:  # an action that cannot be recorded does not run
            return _error(plan, f"the audit log cannot be written ({exc}); nothing was done")
        with _LockKeeper(controls, leases, lock_ttl_s) as keeper:
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
            lost = ", ".join(sorted(keeper.lost))
            notes.append(f"the lock on {lost} expired while the action ran")
        message = outcome.message + "".join(f" ({n})" for n in notes)
        outcome = replace(outcome, steps=tuple(results), message=message)
        try:
            record_event(
                controls,
                plan,
                "outcome",
                status=str(outcome.status),
                text=outcome.message + (f" — {outcome.state_left}" if outcome.state_left else ""),
            )
        except Exception as exc:
            note = f" (the outcome is not in the audit log: {type(exc).__name__}: {exc})"
            outcome = replace(outcome, message=outcome.message + note)
        return outcome
    finally:
        release_locks(controls, leases)
