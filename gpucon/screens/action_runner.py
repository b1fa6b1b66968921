"""The action runner: an action's plan and apply in thread workers, reported in typed messages.

``ActionRunner`` is widget-free: it runs its workers on the node it is given (the fleet
screen) and calls only plain functions (``ActionSpec.plan``, ``guard.execute``). What the
workers learn comes back as messages, never as calls into the UI from their threads:

- ``PlanReady`` / ``PlanFailed`` to the host (the fleet screen pushes the plan screen, or
  names the error);
- ``ActionProgress`` (one step's event) and ``ActionFinished`` (the outcome) to the screen
  that shows the running action (the progress screen).

A new plan supersedes one still being made (its result is dropped); an apply is never
cancelled, since a half-applied action must still report how it ended.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from functools import partial

from textual.dom import DOMNode
from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import Worker, get_current_worker

from gpucon.actions.catalog import ActionSpec
from gpucon.actions.guard import execute
from gpucon.actions.plan import Outcome, OutcomeStatus, Plan, ProgressEvent
from gpucon.controls.base import Controls
from gpucon.errors import ActionError, BadParams
from gpucon.model.snapshot import Snapshot

PLAN_GROUP = "action-plan"
APPLY_GROUP = "action-apply"


class PlanReady(Message):
    """The plan for ``spec`` is made: show it and ask for confirmation. ``snapshot`` and
    ``params`` are what it was made from (an editable plan is made again from them)."""

    def __init__(
        self,
        spec: ActionSpec,
        plan: Plan,
        snapshot: Snapshot | None = None,
        params: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.plan = plan
        self.snapshot = snapshot
        self.params: Mapping[str, object] = params or {}

    def replan(self, edits: Mapping[str, object]) -> Plan:
        """The plan made again with ``edits`` over its params (BadParams names a bad one).
        Only for the spec's editable params, whose plan is pure: it reads nothing."""
        if self.snapshot is None:
            raise BadParams("plan", "this plan cannot be made again (no snapshot kept)")
        unknown = sorted(set(edits) - set(self.spec.editable))
        if unknown:
            raise BadParams(unknown[0], f"{self.spec.name} does not take it from the console")
        return self.spec.plan(self.snapshot, {**self.params, **edits})


class PlanFailed(Message):
    """No plan: the selection or params were wrong (``BadParams``), the action refused, or
    what the plan needs could not be read."""

    def __init__(self, action: str, error: Exception) -> None:
        super().__init__()
        self.action = action
        self.error = error

    @property
    def field(self) -> str | None:
        """The param at fault, when it was a param."""
        return self.error.field if isinstance(self.error, BadParams) else None

    @property
    def text(self) -> str:
        """``drain: backend: unknown backend 'x'``; an unexpected error also names its type."""
        if isinstance(self.error, ActionError):
            return f"{self.action}: {self.error}"
        return f"{self.action}: {type(self.error).__name__}: {self.error}"


class ActionProgress(Message):
    """One step of a running action moved on."""

    def __init__(self, plan: Plan, event: ProgressEvent) -> None:
        super().__init__()
        self.plan = plan
        self.event = event

    def can_replace(self, message: Message) -> bool:
        # the screen keeps only a step's latest line: an update queued right behind another
        # of the same step makes the older one moot (a drain counting down in-flight work)
        return (
            isinstance(message, ActionProgress)
            and message.plan is self.plan
            and message.event.step == self.event.step
        )


class ActionFinished(Message):
    """The action ended (applied, refused, timed out or failed): ``outcome`` says how."""

    def __init__(self, plan: Plan, outcome: Outcome) -> None:
        super().__init__()
        self.plan = plan
        self.outcome = outcome


def post_from_thread(target: MessagePump, message: Message) -> None:
    """Post from a worker thread. ``post_message`` is thread-safe and a no-op once the target
    has closed; only a console quitting at that very moment (its loop closed) raises, and the
    action in hand must not fail for it: it is audited whether or not anyone watches."""
    with contextlib.suppress(RuntimeError):
        target.post_message(message)


class ProgressSink:
    """Turns the guard's progress callbacks into ``ActionProgress`` messages."""

    def __init__(self, plan: Plan, report_to: MessagePump) -> None:
        self.plan = plan
        self.report_to = report_to

    def __call__(self, event: ProgressEvent) -> None:
        post_from_thread(self.report_to, ActionProgress(self.plan, event))


def make_plan(
    spec: ActionSpec, snapshot: Snapshot, params: Mapping[str, object], controls: Controls
) -> Plan:
    """The plan, reading what it needs from the registry (rebalance plans against its version)."""
    if spec.name == "rebalance":
        params = {**params, "registry_version": controls.registry.version()}
    return spec.plan(snapshot, params)


def run_guarded(
    spec: ActionSpec, plan: Plan, controls: Controls, progress: ProgressSink
) -> Outcome:
    """``execute`` under the guard; an exception that escapes it still becomes an outcome."""
    try:
        return execute(spec.apply, plan, controls, progress)
    except Exception as error:  # the guard returns outcomes; this is a last resort
        return Outcome(
            plan.action,
            plan.target,
            OutcomeStatus.ERROR,
            f"{type(error).__name__}: {error}",
            plan.digest,
        )


class ActionRunner:
    """Plans and applies actions off the UI thread for ``host`` (a screen or the app)."""

    def __init__(self, host: DOMNode) -> None:
        self.host = host

    def fail(self, action: str, error: Exception) -> None:
        """Report a failure found before any worker ran (a selection that is not enough)."""
        self.host.post_message(PlanFailed(action, error))

    def plan(
        self,
        spec: ActionSpec,
        snapshot: Snapshot,
        params: Mapping[str, object],
        controls: Controls,
    ) -> Worker[None]:
        """Make the plan in a thread worker; ``PlanReady`` or ``PlanFailed`` to the host."""
        return self.host.run_worker(
            partial(self._plan, spec, snapshot, params, controls),
            name=f"plan:{spec.name}",
            group=PLAN_GROUP,
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def apply(
        self, spec: ActionSpec, plan: Plan, controls: Controls, report_to: MessagePump
    ) -> Worker[None]:
        """Apply a confirmed plan under the guard in a thread worker; its ``ActionProgress``
        and then one ``ActionFinished`` go to ``report_to``."""
        return self.host.run_worker(
            partial(self._apply, spec, plan, controls, report_to),
            name=f"apply:{plan.action}",
            group=APPLY_GROUP,
            thread=True,
            exit_on_error=False,
        )

    def _plan(
        self,
        spec: ActionSpec,
        snapshot: Snapshot,
        params: Mapping[str, object],
        controls: Controls,
    ) -> None:
        message: Message
        try:
            plan = make_plan(spec, snapshot, params, controls)
            message = PlanReady(spec, plan, snapshot, params)
        except Exception as error:  # ActionError, or the registry could not be read
            message = PlanFailed(spec.name, error)
        if not get_current_worker().is_cancelled:  # a newer plan superseded this one
            post_from_thread(self.host, message)

    def _apply(
        self, spec: ActionSpec, plan: Plan, controls: Controls, report_to: MessagePump
    ) -> None:
        outcome = run_guarded(spec, plan, controls, ProgressSink(plan, report_to))
        post_from_thread(report_to, ActionFinished(plan, outcome))
