"""Running one step of an apply: the progress events around it and the error it raises.

Every apply (drain, undrain, re-slice, MPS restart) reports a step the same way: ``STARTED``
with its text, then ``DONE`` (with the text the step returned, when it returned one) or
``FAILED`` with the error, which is raised again as ``StepFailed`` naming the step so the run
stops there. A ``TimeoutError`` becomes ``StepTimeout`` (exit 6) where the action says so.
``finished`` and ``stopped`` are the outcome of a run that did every step, or stopped at one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpucon.actions.plan import (
    Outcome,
    OutcomeStatus,
    Plan,
    Progress,
    ProgressEvent,
    StepStatus,
)
from gpucon.errors import ActionError, JsonValue, KeepsNoneServing, StepFailed, StepTimeout

# a step: its progress key, the text shown while it runs, what it does
StepRunner = Callable[[str, str, Callable[[], object]], None]


def run_step(
    progress: Progress,
    key: str,
    text: str,
    fn: Callable[[], object],
    *,
    timeout_error: type[StepFailed] = StepTimeout,
) -> object:
    """Run ``fn`` as the step ``key``; returns what it returned. ``timeout_error`` is what a
    ``TimeoutError`` raised by ``fn`` becomes."""
    progress(ProgressEvent(key, StepStatus.STARTED, text))
    try:
        said = fn()
    except StepFailed as failure:
        progress(ProgressEvent(key, StepStatus.FAILED, str(failure)))
        raise
    except Exception as exc:
        # gpucon's own errors are written for the operator; another's class name says what broke
        detail = str(exc) if isinstance(exc, ActionError) else f"{type(exc).__name__}: {exc}"
        progress(ProgressEvent(key, StepStatus.FAILED, detail))
        kind = timeout_error if isinstance(exc, TimeoutError) else StepFailed
        raise kind(key, detail) from exc
    progress(ProgressEvent(key, StepStatus.DONE, said if isinstance(said, str) and said else text))
    return said


def step_runner(progress: Progress, *, timeout_error: type[StepFailed] = StepTimeout) -> StepRunner:
    """``run_step`` bound to ``progress``: the ``run(key, text, fn)`` an apply passes around."""

    def run(key: str, text: str, fn: Callable[[], object]) -> None:
        run_step(progress, key, text, fn, timeout_error=timeout_error)

    return run


def finished(
    plan: Plan,
    message: str,
    *,
    state_left: str = "",
    details: Mapping[str, JsonValue] | None = None,
) -> Outcome:
    """The outcome of a run that did every step of ``plan``."""
    return Outcome(
        plan.action,
        plan.target,
        OutcomeStatus.OK,
        message,
        plan.digest,
        state_left=state_left,
        details=dict(details or {}),
    )


def stopped(
    plan: Plan,
    failure: StepFailed,
    *,
    message: str | None = None,
    state_left: str = "",
    details: Mapping[str, JsonValue] | None = None,
) -> Outcome:
    """The outcome of a run that stopped at ``failure``: ``timeout`` when the step timed out
    (exit 6), ``refused`` (exit 3) when a drain's first write found the model's other
    backends gone (``KeepsNoneServing``: nothing written for it), ``failed`` otherwise (exit
    5); the message is the failure's unless given."""
    status = OutcomeStatus.TIMEOUT if isinstance(failure, StepTimeout) else OutcomeStatus.FAILED
    if isinstance(failure.__cause__, KeepsNoneServing):
        status = OutcomeStatus.REFUSED
    return Outcome(
        plan.action,
        plan.target,
        status,
        str(failure) if message is None else message,
        plan.digest,
        state_left=state_left,
        details=dict(details or {}),
    )
