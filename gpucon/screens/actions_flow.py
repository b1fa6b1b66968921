"""From a key press to an applied action: plan (off the UI thread), confirm, apply with progress.

``start_action(app, name, snapshot, slot_id, backend_name)`` is what the fleet screen's action
keys call (through ``app.start_action``). It reads what the plan needs from the registry (the
registry version, for rebalance) and makes the plan in a thread worker, pushes the plan screen,
and on confirmation pushes the progress screen and applies the plan under the guard in another
thread worker. The UI thread never waits on Redis. Without controls (read-only) it does nothing
but say so; ``audit`` only reads the log, so it works in every mode.
"""

from __future__ import annotations

import contextlib
from functools import partial
from pathlib import Path
from typing import Any

from gpucon.actions.audit import AuditStream, AuditStreamReader, RegistryAuditStream
from gpucon.actions.catalog import ActionSpec, get_action
from gpucon.actions.guard import execute
from gpucon.actions.plan import Outcome, OutcomeStatus, Plan, ProgressEvent
from gpucon.errors import ActionError, BadParams
from gpucon.model.snapshot import Snapshot
from gpucon.screens.audit import AuditScreen
from gpucon.screens.plan import PlanScreen
from gpucon.screens.progress import ProgressScreen
from gpucon.widgets.safe_text import clean


def audit_path(app: Any) -> Path:
    controls = getattr(app, "controls", None)
    if controls is not None:
        return Path(controls.audit.path)
    config = getattr(app, "config", None)
    if config is not None:
        from gpucon.controls.base import audit_path_for, demo_audit_path

        # the demo keeps its own file: a read-only demo shows that, not the live fleet's
        return (
            demo_audit_path(config)
            if getattr(app, "mode", None) == "demo"
            else audit_path_for(config)
        )
    from gpucon.config import default_state_dir

    return default_state_dir() / "audit.jsonl"


def audit_stream(app: Any) -> AuditStream | None:
    """The fleet's shared audit stream where Redis is configured (not in the demo, whose
    actions steer the simulator and are recorded only in this console's file): from the
    app's config when it has one, else through a live console's registry control."""
    if getattr(app, "mode", None) == "demo":
        return None
    config = getattr(app, "config", None)
    redis_config = getattr(getattr(config, "fleet", None), "redis", None)
    if redis_config is not None:
        return AuditStreamReader(redis_config.url, redis_config.timeout_s)
    registry = getattr(getattr(app, "controls", None), "registry", None)
    if registry is not None and hasattr(registry, "read_audit"):
        return RegistryAuditStream(registry)
    return None


def _notify(app: Any, message: str, severity: str = "information") -> None:
    app.notify(clean(message), title="gpucon", severity=severity, markup=False)


def params_for(
    app: Any, name: str, snapshot: Snapshot, slot_id: str | None, backend_name: str | None
) -> dict[str, Any]:
    """The action's params from what the operator selected (BadParams when it is not enough)."""
    if name in ("drain", "undrain", "probe"):
        backend = backend_name
        if backend is None and slot_id is not None:
            on_slot = snapshot.backends_on(slot_id)
            if len(on_slot) == 1:
                backend = on_slot[0].name
            elif on_slot:
                raise BadParams("backend", f"{len(on_slot)} backends on {slot_id}: select one row")
        if backend is None:
            raise BadParams("backend", "the selected row has no backend")
        if name == "probe":
            controls = getattr(app, "controls", None)
            if getattr(controls, "prober", None) is not None:  # the demo: any backend
                return {"target": backend, "simulated": True}
            config = getattr(app, "config", None)
            targets = config.fleet.probe_targets if config is not None else ()
            return {"target": backend, "probe_targets": targets}
        return {"backend": backend}
    return {}


def start_action(
    app: Any,
    name: str,
    snapshot: Snapshot | None,
    slot_id: str | None,
    backend_name: str | None,
) -> None:
    if name == "audit":
        app.push_screen(AuditScreen(audit_path(app), stream=audit_stream(app)))
        return
    controls = getattr(app, "controls", None)
    if controls is None:
        why = (
            "read-only, no action can write"
            if getattr(app, "read_only", True)
            else "no write path was built for this fleet (is its [redis] registry configured?)"
        )
        _notify(app, f"{name}: {why}", "warning")
        return
    if snapshot is None:
        _notify(app, f"{name}: no fleet data yet", "warning")
        return
    try:
        spec = get_action(name)
        params = params_for(app, name, snapshot, slot_id, backend_name)
    except ActionError as error:
        _notify(app, f"{name}: {error}", "error")
        return
    app.run_worker(
        partial(_plan_in_thread, app, spec, snapshot, params, controls),
        name=f"plan:{name}",
        group="actions",
        thread=True,
        exit_on_error=False,
    )


def _plan_in_thread(
    app: Any, spec: ActionSpec, snapshot: Snapshot, params: dict[str, Any], controls: Any
) -> None:
    try:
        if spec.name == "rebalance":
            params = {**params, "registry_version": controls.registry.version()}
        plan = spec.plan(snapshot, params)
    except ActionError as error:
        app.call_from_thread(_notify, app, f"{spec.name}: {error}", "error")
        return
    except Exception as error:  # the registry could not be read: say so, keep the console
        app.call_from_thread(_notify, app, f"{spec.name}: {type(error).__name__}: {error}", "error")
        return
    app.call_from_thread(_show_plan, app, spec, plan, controls)


def _show_plan(app: Any, spec: ActionSpec, plan: Plan, controls: Any) -> None:
    def confirmed(answer: bool | None) -> None:
        if not answer:
            _notify(app, f"{plan.action} {plan.target}: cancelled, nothing changed")
            return
        screen = ProgressScreen(plan)
        app.push_screen(screen)
        app.run_worker(
            partial(_apply_in_thread, app, spec, plan, controls, screen),
            name=f"apply:{plan.action}",
            group="actions",
            thread=True,
            exit_on_error=False,
        )

    app.push_screen(PlanScreen(plan), callback=confirmed)


def _apply_in_thread(
    app: Any, spec: ActionSpec, plan: Plan, controls: Any, screen: ProgressScreen
) -> None:
    def progress(event: ProgressEvent) -> None:
        app.call_from_thread(screen.add_event, event)

    try:
        outcome = execute(spec.apply, plan, controls, progress)
    except Exception as error:  # the guard returns outcomes; this is a last resort
        outcome = Outcome(
            plan.action,
            plan.target,
            OutcomeStatus.ERROR,
            f"{type(error).__name__}: {error}",
            plan.digest,
        )
    with contextlib.suppress(Exception):  # the app may be closing
        app.call_from_thread(screen.finish, outcome)
        severity = "information" if outcome.ok else "error"
        app.call_from_thread(
            _notify, app, f"{plan.action} {plan.target}: {outcome.status}", severity
        )
