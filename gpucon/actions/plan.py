"""The action framework's types: Plan, Step, Precondition, BlastRadius, Outcome and the errors.

A ``Plan`` is what ``plan(snapshot, params)`` returns: pure data, frozen, shown to the operator
before anything changes, and fingerprinted by ``digest`` so the audit log can say exactly which
plan ran. An ``Outcome`` is what ``apply`` returns. Every refusal is an ``ActionError`` whose
``exit_code`` is the CLI's (see ``ExitCode``); ``BadParams`` names the field that was wrong.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from gpucon.errors import (
    ActionError,
    ExitCode,
    JsonValue,
)
from gpucon.redact import redact


class Tier(IntEnum):
    """How much harm a mistaken action can do; it decides how the operator confirms it."""

    REVERSIBLE = 1  # confirm, Cancel focused (rebalance, probe)
    DISRUPTIVE = 2  # confirm with the exact target named (drain)
    DESTRUCTIVE = 3  # type the target's name, dry-run shown first (re-slice)


@dataclass(frozen=True, slots=True)
class Precondition:
    """Something that must hold before the action runs, and whether it does.

    ``warning``: it holds, but with a risk the operator must read before confirming (shown
    WARN; it does not block the plan, ``ok`` does).
    """

    name: str
    ok: bool
    text: str
    warning: bool = False

    @property
    def verdict(self) -> str:
        """``PASS``, ``WARN`` or ``FAIL``."""
        if not self.ok:
            return "FAIL"
        return "WARN" if self.warning else "PASS"


@dataclass(frozen=True, slots=True)
class Step:
    """One thing ``apply`` will do, in order. ``key`` is stable (audit, progress)."""

    key: str
    text: str


# what happens to the share of fleet capacity a plan touches (``BlastRadius.effect``)
OUT_OF_SERVICE = "taken out of service"
PROBE_LOAD = "takes the probe's extra load (none taken out of service)"
MOVED = "moved between backends"
# an undrain's: it adds capacity back, it takes none away
RETURNS = "no fleet capacity taken out of service: it returns capacity"


@dataclass(frozen=True, slots=True)
class BlastRadius:
    """What the action touches: backends, slots, and the share of fleet capacity (percent, by
    the active backends' weights: ``actions.backends.capacity_share``) with what happens to it.
    Every plan words it the same way: ``33% of fleet capacity taken out of service`` (drain),
    ``33% of fleet capacity takes the probe's extra load (none taken out of service)``."""

    backends: tuple[str, ...] = ()
    slots: tuple[str, ...] = ()
    capacity_pct: float | None = None
    effect: str = OUT_OF_SERVICE
    # said instead of a share when there is none: why, as a fact (never a bare "n/a")
    no_share: str = "share of fleet capacity unknown"

    def describe(self) -> str:
        share = (
            self.no_share
            if self.capacity_pct is None
            else f"{self.capacity_pct:.0f}% of fleet capacity {self.effect}"
        )
        return f"{len(self.backends)} backend(s), {len(self.slots)} slot(s); {share}"


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
    def warnings(self) -> tuple[Precondition, ...]:
        """Preconditions that hold with a risk (shown WARN)."""
        return tuple(p for p in self.preconditions if p.ok and p.warning)

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
                {"name": p.name, "ok": p.ok, "warning": p.warning, "text": p.text}
                for p in self.preconditions
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

    def __post_init__(self) -> None:
        # shown on the progress screen and printed by the verbs: a step's error may quote a URL
        object.__setattr__(self, "text", redact(self.text))


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", redact(self.text))


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

    def __post_init__(self) -> None:
        # printed, notified and written to the audit log: credentials masked once, here
        object.__setattr__(self, "message", redact(self.message))
        object.__setattr__(self, "state_left", redact(self.state_left))

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
