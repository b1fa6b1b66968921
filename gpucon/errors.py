"""Errors an action, a control or a command raises, and the exit codes the verbs return.

A leaf module: every layer (controls, actions, the simulator's registry, commands, screens)
imports its errors from here, so no layer needs another's module to name what went wrong.
``BadParams`` names the field that was wrong; ``str(error)`` is always the operator's message.
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import Any

from gpucon.redact import redact

JsonValue = Any  # str | int | float | bool | None | list | dict of those


class ExitCode(IntEnum):
    """Exit codes of the action verbs (``gpucon drain`` ...)."""

    OK = 0
    ERROR = 1  # unexpected error (a bug, or a system that could not be reached)
    BAD_PARAMS = 2  # the parameters were refused before any change
    REFUSED = 3  # a precondition failed, the plan was stale, the operator said no, read-only
    LOCK_HELD = 4  # another operator holds the target's lock
    STEP_FAILED = 5  # a step failed; the state it left is in the outcome and the audit log
    TIMEOUT = 6  # a step did not finish in time (e.g. a drain still has work in flight)


class ActionError(Exception):
    """An action was refused or failed; ``str(error)`` is the message for the operator."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, *args: object) -> None:
        # the message is shown, printed and written to the audit log: credentials a wrapped
        # library error quoted are masked once, here
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class BadParams(ActionError):
    """A parameter is wrong; ``field`` names it and the message starts with it."""

    exit_code = ExitCode.BAD_PARAMS

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")
        self.field = field_name
        self.problem = problem


class Refused(ActionError):
    """The action cannot run now (failed precondition, stale plan, read-only, not confirmed)."""

    exit_code = ExitCode.REFUSED


class StalePlan(Refused):
    """The registry changed since the plan was made; make a new plan and look again."""

    def __init__(self, planned_version: int | None, current_version: int) -> None:
        super().__init__(
            f"the plan was made at registry version {planned_version} but the registry is now "
            f"at version {current_version}: someone changed it since; plan again"
        )
        self.planned_version = planned_version
        self.current_version = current_version


class StateMoved(Refused):
    """A backend's state is not one the transition may start from: someone changed it since."""

    def __init__(self, name: str, current: str, new: str, allowed: frozenset[str]) -> None:
        expected = " or ".join(sorted(allowed)) or "nothing"
        super().__init__(
            f"{name} is {current}, not {expected}: someone changed it since; it was not set to "
            f"{new} (nothing was written)"
        )
        self.name = name
        self.current = current
        self.new = new


class LockHeld(ActionError):
    """Another operator's action holds the target's lock."""

    exit_code = ExitCode.LOCK_HELD

    def __init__(self, target: str, holder: str, since: float | None, action: str | None) -> None:
        when = "at an unknown time" if since is None else f"since {format_ts(since)}"
        doing = f" ({action})" if action else ""
        super().__init__(f"{target} is locked by {holder}{doing} {when}")
        self.target = target
        self.holder = holder
        self.since = since
        self.action = action


class StepFailed(ActionError):
    exit_code = ExitCode.STEP_FAILED

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"step {step!r} failed: {message}")
        self.step = step


class StepTimeout(StepFailed):
    exit_code = ExitCode.TIMEOUT


class LeaseLost(StepFailed):
    """The action's lock could not be renewed (Redis unreachable, renewal late, taken over):
    it stopped at a step boundary rather than act without it. Exit 5, like a failed step."""

    def __init__(self, step: str, why: str) -> None:
        ActionError.__init__(self, f"stopped before {step!r}: the lock was lost ({why})")
        self.step = step
        self.why = why


def format_ts(ts: float) -> str:
    """A UTC timestamp as the operator reads it in messages and the audit log; a time no
    calendar can show (NaN, infinite, beyond year 9999) is named as it is, never raised."""
    import datetime as _dt

    try:
        return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError, TypeError):
        return f"(invalid time {ts!r})"


def finite_number(field_name: str, value: object, *, minimum: float | None = None) -> float:
    """``value`` as a finite float (≥ ``minimum``), or BadParams naming ``field_name``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadParams(field_name, f"expected a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise BadParams(field_name, f"expected a number, got {value!r}") from None
    if math.isnan(number) or math.isinf(number):
        raise BadParams(field_name, f"must be a finite number, got {value!r}")
    if minimum is not None and number < minimum:
        raise BadParams(field_name, f"must be ≥ {minimum:g}, got {number:g}")
    return number
