"""The guard every action runs under: preconditions, the locks, the audit trail.

``execute(spec, plan, controls, progress)`` refuses a plan whose preconditions fail, takes the
locks of the target and of every backend in the plan's blast radius (in sorted order, all or
none: a node drain and an undrain of one of its backends on another console cannot both run),
renews them in a background thread while the action runs (``gpucon.actions.lease``), then,
under the locks, checks the plan's preconditions again against fresh state (the action
module's ``recheck(plan, controls)``: the registry, the node, the pod, not the snapshot the
plan was made from) and refuses a plan the fleet has moved away from, naming what changed and
who changed it. Only then does it write the intent to the audit log, record each step's result
as ``apply`` reports it, and the outcome last. A lease that is lost (a renewal raised, was
refused or is late) stops the action at its next step boundary. It always returns an
``Outcome``; the operator learns from it what happened and what state was left.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpucon.actions import stop
from gpucon.actions.catalog import RecheckFn, recheck_of
from gpucon.actions.lease import LockKeeper, acquire_locks, lock_targets, release_locks
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
from gpucon.controls.base import Controls
from gpucon.errors import ActionError, LeaseLost, LockHeld, Refused, StepFailed, Stopped

LOCK_TTL_S = 15.0

ApplyFn = Callable[[Plan, Controls, Progress], Outcome]

__all__ = ["LOCK_TTL_S", "ApplyFn", "RecheckFn", "execute", "lock_targets", "record_event"]


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
    keeper: LockKeeper | None = field(default=None)
    stopped: set[str] = field(default_factory=set)  # steps the lost lease stopped

    def __call__(self, event: ProgressEvent) -> None:
        now = time.monotonic()
        if event.status in (StepStatus.STARTED, StepStatus.RUNNING):
            self._stop_if_lease_lost(event, now)
        if event.status is StepStatus.FAILED and event.step in self.stopped:
            return  # already recorded as stopped by the lost lease; apply reports it again
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

    def _stop_if_lease_lost(self, event: ProgressEvent, now: float) -> None:
        """A step boundary (a step starting, or a wait polling): raise LeaseLost there when
        the locks can no longer be trusted, so nothing more is done without them; Stopped
        when the console is closing (its terminal went away)."""
        why = self.keeper.lost_why() if self.keeper is not None else None
        closing = stop.stop_requested()
        if why is None and closing is None:
            return
        lost: StepFailed = (
            LeaseLost(event.step, why) if why is not None else Stopped(event.step, str(closing))
        )
        if event.status is StepStatus.RUNNING:  # the step had started: it failed
            self.stopped.add(event.step)
            took = now - self.started.get(event.step, now)
            self.results.append(StepResult(event.step, False, str(lost), took))
            failed = ProgressEvent(event.step, StepStatus.FAILED, str(lost))
            with contextlib.suppress(Exception):
                self._audit(failed)
            with contextlib.suppress(Exception):
                self.forward(failed)
        raise lost

    def _audit(self, event: ProgressEvent) -> None:
        record_event(
            self.controls,
            self.plan,
            "step",
            status=str(event.status),
            step=event.step,
            text=event.text,
        )


def _lock_refusal(plan: Plan, held: LockHeld, operator: str, ttl_s: float) -> str:
    """Who holds which lock since when, and, for a blast-radius lock, why this plan needs it.
    Held by this very operator: perhaps a run that was killed, whose lease runs out by itself."""
    text = f"{held}; nothing was done"
    if held.target != plan.target:
        text = f"{plan.action} {plan.target} touches {held.target}: {text}"
    if held.holder == operator:
        text += (
            f" (if that run of yours was interrupted, its lock lapses within {ttl_s:g} s: "
            "then run it again)"
        )
    return text


def _refusal(plan: Plan, controls: Controls, error: ActionError, message: str = "") -> Outcome:
    message = message or str(error)
    try:
        record_event(controls, plan, "refused", status=str(status_for(error)), text=message)
    except Exception as exc:  # nothing was done; say the record is missing
        message += f" (not in the audit log: {type(exc).__name__}: {exc})"
    return Outcome(plan.action, plan.target, status_for(error), message, plan.digest)


def _error(plan: Plan, message: str) -> Outcome:
    return Outcome(plan.action, plan.target, OutcomeStatus.ERROR, message, plan.digest)


def _recheck(plan: Plan, controls: Controls, recheck: RecheckFn | None) -> Outcome | None:
    """None when the plan's preconditions still hold on fresh state; else the refusal."""
    check = recheck or recheck_of(plan.action)
    if check is None:
        return None
    try:
        changed = check(plan, controls)
    except ActionError as error:
        return _refusal(plan, controls, error, f"{error}; nothing was done")
    except Exception as exc:  # the fresh state cannot be read: act on nothing stale
        detail = f"{type(exc).__name__}: {exc}"
        message = f"could not re-read {plan.target} under the lock ({detail}); nothing was done"
        return _error(plan, message)
    if not changed:
        return None
    why = "; ".join(changed)
    message = f"the fleet changed since the plan was made: {why}; nothing was done"
    return _refusal(plan, controls, Refused(message))


def execute(
    apply: ApplyFn,
    plan: Plan,
    controls: Controls,
    progress: Progress,
    *,
    lock_ttl_s: float = LOCK_TTL_S,
    recheck: RecheckFn | None = None,
) -> Outcome:
    """Run ``apply(plan, controls, progress)`` under the guard; never raises ActionError.

    ``recheck`` overrides the action module's own (``catalog.recheck_of(plan.action)``).
    """
    if not plan.ok:
        failed = "; ".join(f"{p.name}: {p.text}" for p in plan.failed_preconditions)
        return _refusal(plan, controls, Refused(f"precondition failed: {failed}"))
    closing = stop.stop_requested()
    if closing is not None:
        return _refusal(plan, controls, Refused(f"{closing}; nothing was done"))
    with stop.running():
        return _execute(apply, plan, controls, progress, lock_ttl_s, recheck)


def _execute(
    apply: ApplyFn,
    plan: Plan,
    controls: Controls,
    progress: Progress,
    lock_ttl_s: float,
    recheck: RecheckFn | None,
) -> Outcome:
    """The locks, the recheck under them, the run; the locks are released however it ends."""
    try:
        leases = acquire_locks(controls, plan, lock_ttl_s)
    except LockHeld as held:
        message = _lock_refusal(plan, held, controls.operator, lock_ttl_s)
        return _refusal(plan, controls, held, message)
    except Exception as exc:  # the registry cannot be reached: nothing was done
        return _error(plan, f"could not take the locks for {plan.target}: {exc}; nothing was done")
    try:
        with LockKeeper(controls, leases, lock_ttl_s) as keeper:
            refused = _recheck(plan, controls, recheck)
            if refused is not None:
                return refused
            return _run(apply, plan, controls, progress, keeper)
    finally:
        release_locks(controls, leases)


def intent_text(plan: Plan) -> str:
    """The intent record's text: the plan's summary and, where the action takes one, the
    reason it was given (typed in the console's plan or passed on the command line)."""
    text = plan.summary or "; ".join(s.text for s in plan.steps)
    reason = plan.params.get("reason")
    return f"{text} (reason: {reason})" if isinstance(reason, str) and reason else text


def _run(
    apply: ApplyFn, plan: Plan, controls: Controls, progress: Progress, keeper: LockKeeper
) -> Outcome:
    """Intent, the steps, the outcome: under locks the keeper holds."""
    results: list[StepResult] = []
    recorder = _StepRecorder(plan, controls, progress, results, {}, [], keeper)
    stream_errors_before = len(controls.audit.stream_errors)
    try:
        record_event(controls, plan, "intent", text=intent_text(plan))
    except Exception as exc:  # an action that cannot be recorded does not run
        return _error(plan, f"the audit log cannot be written ({exc}); nothing was done")
    try:
        outcome = apply(plan, controls, recorder)
    except ActionError as error:
        outcome = Outcome(plan.action, plan.target, status_for(error), str(error), plan.digest)
    except Exception as error:  # a bug or an unreachable system: still recorded
        outcome = _error(plan, f"{type(error).__name__}: {error}")
    notes = [*recorder.audit_errors, *controls.audit.stream_errors[stream_errors_before:]]
    details = dict(outcome.details)
    lost = keeper.lost
    if lost:
        targets = ", ".join(sorted(lost))
        if "the lock was lost" not in outcome.message:
            notes.append(f"the lock on {targets} was lost while the action ran")
        details["lease_lost"] = {
            "targets": sorted(lost),
            "why": keeper.lost_why() or "",
            "at": keeper.lost_at,
        }
    message = outcome.message + "".join(f" ({n})" for n in notes)
    outcome = replace(outcome, steps=tuple(results), message=message, details=details)
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
