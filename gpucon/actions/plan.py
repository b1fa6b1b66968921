"""The action framework's types: Plan, Step, Precondition, BlastRadius, Outcome and the errors.

A ``Plan`` is what ``plan(snapshot, params)`` returns: pure data, frozen, shown to the operator
before anything changes, and fingerprinted by ``digest`` so the audit log can say exactly which
plan ran. An ``Outcome`` is what ``apply`` returns. Every refusal is an ``ActionError`` whose
``exit_code`` is the CLI's (see ``ExitCode``); ``BadParams`` names the field that was wrong.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any


class Tier(IntEnum):
    """How much harm a mistaken action can do; it decides how the operator confirms it."""

    REVERSIBLE = 1  # confirm, Cancel focused (rebalance, probe)
    DISRUPTIVE = 2  # confirm with the exact target named (drain)
    DESTRUCTIVE = 3  # type the target's name, dry-run shown first (re-slice)


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


def format_ts(ts: float) -> str:
    """A UTC timestamp as the operator reads it in messages and the audit log; a time no
    calendar can show (NaN, infinite, beyond year 9999) is named as it is, never raised."""
    import datetime as _dt

    try:
        return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError, TypeError):
        return f"(invalid time {ts!r})"


@dataclass(frozen=True, slots=True)
class Precondition:
    """Something that must hold before the action runs, and whether it does."""

    name: str
    ok: bool
    text: str


@dataclass(frozen=True, slots=True)
class Step:
    """One thing ``apply`` will do, in order. ``key`` is stable (audit, progress)."""

    key: str
    text: str


@dataclass(frozen=True, slots=True)
class BlastRadius:
    """What the action touches: backends, slots, and the share of fleet capacity (percent)."""

    backends: tuple[str, ...] = ()
    slots: tuple[str, ...] = ()
    capacity_pct: float | None = None  # None: the fleet's capacity is not known

    def describe(self) -> str:
        share = "n/a" if self.capacity_pct is None else f"{self.capacity_pct:.0f}%"
        return (
            f"{len(self.backends)} backend(s), {len(self.slots)} slot(s), {share} of fleet capacity"
        )


JsonValue = Any  # str | int | float | bool | None | list | dict of those


@dataclass(frozen=True, slots=True)
class Plan:
    """What an action will do, made by a pure ``plan(snapshot, params)``."""

    action: str
    target: str
    tier: Tier
    preconditions: tuple[Precondition, ...]
    steps: tuple[Step, ...]
    blast_radius: BlastRadius
    undo: str
    params: Mapping[str, JsonValue] = field(default_factory=dict)
    summary: str = ""
    # one line per thing that changes, "old → new" (shown under the summary)
    changes: tuple[str, ...] = ()
    # registry version the plan was made at (None: the action does not check it)
    registry_version: int | None = None
    made_at: float = 0.0  # the snapshot's taken_at

    @property
    def ok(self) -> bool:
        """True when every precondition passes."""
        return all(p.ok for p in self.preconditions)

    @property
    def failed_preconditions(self) -> tuple[Precondition, ...]:
        return tuple(p for p in self.preconditions if not p.ok)

    @property
    def digest(self) -> str:
        """A short fingerprint of what the plan does (not of when it was shown)."""
        body = {
            "action": self.action,
            "target": self.target,
            "tier": int(self.tier),
            "steps": [[s.key, s.text] for s in self.steps],
            "params": self.params,
            "registry_version": self.registry_version,
        }
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "action": self.action,
            "target": self.target,
            "tier": int(self.tier),
            "summary": self.summary,
            "changes": list(self.changes),
            "ok": self.ok,
            "preconditions": [
                {"name": p.name, "ok": p.ok, "text": p.text} for p in self.preconditions
            ],
            "steps": [{"key": s.key, "text": s.text} for s in self.steps],
            "blast_radius": {
                "backends": list(self.blast_radius.backends),
                "slots": list(self.blast_radius.slots),
                "capacity_pct": self.blast_radius.capacity_pct,
            },
            "undo": self.undo,
            "params": dict(self.params),
            "registry_version": self.registry_version,
            "digest": self.digest,
        }


class StepStatus(StrEnum):
    STARTED = "started"
    RUNNING = "running"  # an update while the step runs (e.g. inflight counting down)
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """One line of progress from ``apply``; ``fraction`` is 0..1 when the step knows it."""

    step: str
    status: StepStatus
    text: str
    fraction: float | None = None


Progress = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    """A Progress that discards events."""


class OutcomeStatus(StrEnum):
    OK = "ok"
    REFUSED = "refused"
    LOCK_HELD = "lock_held"
    FAILED = "failed"
    TIMEOUT = "timeout"
    ERROR = "error"


_STATUS_BY_CODE = {
    ExitCode.OK: OutcomeStatus.OK,
    ExitCode.BAD_PARAMS: OutcomeStatus.REFUSED,
    ExitCode.REFUSED: OutcomeStatus.REFUSED,
    ExitCode.LOCK_HELD: OutcomeStatus.LOCK_HELD,
    ExitCode.STEP_FAILED: OutcomeStatus.FAILED,
    ExitCode.TIMEOUT: OutcomeStatus.TIMEOUT,
    ExitCode.ERROR: OutcomeStatus.ERROR,
}


# a refusal of bad params is reported as REFUSED once it reached the guard (exit 3)
_CODE_BY_STATUS = {status: code for code, status in _STATUS_BY_CODE.items()}


@dataclass(frozen=True, slots=True)
class StepResult:
    step: str
    ok: bool
    text: str
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """What ``apply`` did: the status, a message, each step's result and the state left."""

    action: str
    target: str
    status: OutcomeStatus
    message: str
    plan_digest: str
    steps: tuple[StepResult, ...] = ()
    # what the target looks like now, for the operator (e.g. "state=draining owner=...")
    state_left: str = ""
    # action-specific results (a probe's quantiles, the weights applied ...), JSON-compatible
    details: Mapping[str, JsonValue] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is OutcomeStatus.OK

    @property
    def exit_code(self) -> ExitCode:
        return _CODE_BY_STATUS.get(self.status, ExitCode.ERROR)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "action": self.action,
            "target": self.target,
            "status": str(self.status),
            "ok": self.ok,
            "message": self.message,
            "plan_digest": self.plan_digest,
            "steps": [
                {"step": s.step, "ok": s.ok, "text": s.text, "duration_s": round(s.duration_s, 3)}
                for s in self.steps
            ],
            "state_left": self.state_left,
            "details": dict(self.details),
        }


def status_for(error: ActionError) -> OutcomeStatus:
    return _STATUS_BY_CODE.get(error.exit_code, OutcomeStatus.ERROR)


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
