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


class KeepsNoneServing(Refused):
    """A drain's first write, refused in its own transaction: every backend its plan counted on
    to keep serving the model is out of service now (another drain, planned at the same time,
    took it out)."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(
            f"{name} was not set to draining (nothing was written for it): the backends its "
            f"plan counted on to keep serving its model are out of service now ({why}), so "
            "draining it would leave nothing serving; plan again (force to go ahead anyway)"
        )
        self.name = name


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


class Stopped(StepFailed):
    """The console was closing (its terminal went away): the action stopped at a step
    boundary, recorded how far it got and released its locks. Exit 5, like a failed step."""

    def __init__(self, step: str, why: str) -> None:
        ActionError.__init__(self, f"stopped before {step!r}: {why}")
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


# the ranges every action parameter is checked against (``finite_number``, ``bounded_text``)
MAX_ACTION_TIMEOUT_S = 86_400.0  # a drain or probe waiting longer than a day is a typo
MIN_ACTION_TIMEOUT_S = 0.01  # shorter is no deadline at all (a clock's step)
MAX_WEIGHT = 1_000_000.0  # scheduler weights are relative; beyond this a sum loses precision
MAX_TEXT_CHARS = 500  # a reason or a node's name: kept in the registry and every audit record
MAX_NAME_CHARS = 1_024  # a backend's name as the registry may hold it

SHOWN_CHARS = 60  # how much of a refused value a message quotes


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``value`` as a message may quote it: ``repr``-escaped (control, format and bidi
    characters become ``\\x1b``-style escapes, so nothing reaches a terminal raw), cut to
    ``limit`` characters with its full length named when cut."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[: limit - 1]}… ({size:,} characters)"


def _bound(number: float) -> str:
    return f"{number:,.0f}" if number == int(number) and abs(number) >= 1e4 else f"{number:g}"


def range_text(minimum: float | None, maximum: float | None, *, above: bool = False) -> str:
    """The allowed range as a message says it: "from 0.01 to 3,600", "greater than 0 and at
    most 86,400"."""
    low = None if minimum is None else _bound(minimum)
    if low is not None and maximum is not None:
        if above:
            return f"greater than {low} and at most {_bound(maximum)}"
        return f"from {low} to {_bound(maximum)}"
    if low is not None:
        return f"{'greater than' if above else 'at least'} {low}"
    return "any finite number" if maximum is None else f"at most {_bound(maximum)}"


def finite_number(
    field_name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above_minimum: bool = False,
) -> float:
    """``value`` as a finite float within [``minimum``, ``maximum``] (``above_minimum``:
    strictly greater than ``minimum``), or BadParams naming the field, the value and the range.
    """
    allowed = range_text(minimum, maximum, above=above_minimum)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadParams(field_name, f"expected a number ({allowed}), got {shown(value)}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise BadParams(field_name, f"expected a number ({allowed}), got {shown(value)}") from None
    if math.isnan(number) or math.isinf(number):
        raise BadParams(field_name, f"must be a finite number ({allowed}), got {shown(value)}")
    low_ok = minimum is None or (number > minimum if above_minimum else number >= minimum)
    if not low_ok or (maximum is not None and number > maximum):
        raise BadParams(field_name, f"must be {allowed}, got {shown(value)}")
    return number


def bounded_text(field_name: str, value: str, max_chars: int) -> str:
    """``value`` when it is at most ``max_chars`` characters, else BadParams naming both."""
    if len(value) > max_chars:
        raise BadParams(field_name, f"must be at most {max_chars:,} characters, got {shown(value)}")
    return value
