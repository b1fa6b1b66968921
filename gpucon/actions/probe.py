"""The load probe as an action (tier 1): plan pure, apply through the probe engine.

``plan(snapshot, params)`` picks the target from the config's probe targets only (passed in
``params["probe_targets"]``), checks count, rate, concurrency and duration against that
target's caps (BadParams naming the field) and says what will be sent where. ``apply`` runs
``gpucon.controls.probe`` with a progress bar's worth of events and returns the report in the
outcome's ``details``; the report's one-line summary is a step result, so the audit log has it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the verb's parser is built for every gpucon command: import lazily
    from gpucon.actions.plan import Outcome, Plan, Progress
    from gpucon.config import ProbeTarget
    from gpucon.controls.base import Controls
    from gpucon.model.snapshot import Snapshot

PROGRESS_EVERY_S = 0.1
# the demo's probe, unless the operator asks for more (within a configured target's caps)
SIM_DEFAULTS = {"count": 40, "rate": 20.0, "duration": 10.0}
# a simulated backend's caps: nothing real is loaded, but the bounds are enforced all the same
SIM_CAPS: dict[str, Any] = {
    "max_requests": 500,
    "max_rate_per_s": 100.0,
    "max_concurrency": 16,
    "max_duration_s": 60.0,
}


def _sim_target(snapshot: Snapshot, name: str) -> ProbeTarget:
    """In the demo every backend is a target, with the default caps of a configured one."""
    from gpucon.actions.backends import find_backend
    from gpucon.config import ProbeTarget
    from gpucon.errors import BadParams

    try:
        backend = find_backend(snapshot, name)  # its name, or the escaped form listings print
    except BadParams:
        from gpucon.errors import shown
        from gpucon.model.ids import escaped_name

        known = ", ".join(escaped_name(n) for n in sorted(snapshot.backends)[:8]) or "none"
        raise BadParams(
            "target", f"no backend {shown(name)} in the simulated fleet (known: {known})"
        ) from None
    name = backend.name
    return ProbeTarget(
        name=name, url=backend.url or f"sim://{name}", model=backend.model or "", **SIM_CAPS
    )


def _target(snapshot: Snapshot, params: Mapping[str, Any]) -> ProbeTarget:
    from gpucon.errors import BadParams, shown

    name = params.get("target")
    targets: Sequence[ProbeTarget] = params.get("probe_targets") or ()
    if not isinstance(name, str) or not name.strip():
        raise BadParams("target", "which probe target? (a name from the config's probe_targets)")
    if params.get("simulated"):
        return _sim_target(snapshot, name)
    for t in targets:
        if t.name == name:
            return t
    known = ", ".join(t.name for t in targets) or "none configured"
    raise BadParams("target", f"{shown(name)} is not a configured probe target (known: {known})")


def plan(snapshot: Snapshot, params: Mapping[str, Any]) -> Plan:
    """The probe plan; refuses unknown targets and out-of-bounds params before anything runs."""
    from gpucon.actions.plan import BlastRadius, Plan, Precondition, Step, Tier
    from gpucon.controls.probe import check_bounds
    from gpucon.errors import BadParams
    from gpucon.model.fleet import BackendState

    target = _target(snapshot, params)
    if params.get("simulated"):  # a demo probe takes a few seconds unless asked for more
        params = {**SIM_DEFAULTS, **params}
    bounds = check_bounds(target, dict(params))
    via_queue = bool(params.get("via_queue", False))
    simulated = bool(params.get("simulated", False))
    if simulated and via_queue:
        raise BadParams("via_queue", "the demo probes a backend directly; there is no queue")
    redis_url = params.get("redis_url")
    stream = str(params.get("stream") or "gen:queue")
    pre: list[Precondition] = []
    backend = snapshot.backends.get(target.name)
    if backend is not None and not via_queue:
        pre.append(
            Precondition(
                "backend", True, f"{target.name} is {backend.state} (a direct probe reaches it)"
            )
        )
    active = [b.name for b in snapshot.backends.values() if b.state is BackendState.ACTIVE]
    if via_queue:
        pre.append(
            Precondition(
                "queue",
                bool(redis_url),
                f"the queue {stream} is configured" if redis_url else "no [redis] configured",
            )
        )
        pre.append(
            Precondition(
                "serving",
                bool(active),
                f"{len(active)} active backend(s) serve the queue"
                if active
                else "no active backend serves the queue: every request would time out",
            )
        )
    if simulated:
        where = f"to {target.name} of the simulated fleet (latencies from its service model)"
    elif via_queue:
        where = f"through the queue {stream}"
    else:
        where = f"directly to {target.url}"
    send = (
        f"send up to {bounds.count} requests at {bounds.rate_per_s:g}/s, at most "
        f"{bounds.concurrency} at once, for at most {bounds.duration_s:g} s, {where} "
        f"(model {target.model})"
    )
    steps = (
        Step("probe", send),
        Step("report", "report offered/achieved rate, p50/p90/p95/p99, errors, stability"),
    )
    return Plan(
        action="probe",
        target=target.name,
        tier=Tier.REVERSIBLE,
        preconditions=tuple(pre),
        steps=steps,
        blast_radius=BlastRadius(
            tuple(active) if via_queue else (target.name,),
            (backend.slot_id,) if backend is not None and backend.slot_id and not via_queue else (),
            None,
        ),
        undo="nothing to undo: a probe only sends a bounded number of requests",
        params={
            "target": {"name": target.name, "url": target.url, "model": target.model},
            "count": bounds.count,
            "rate": bounds.rate_per_s,
            "concurrency": bounds.concurrency,
            "duration": bounds.duration_s,
            "timeout": bounds.timeout_s,
            "via_queue": via_queue,
            "redis_url": redis_url if via_queue else None,
            "stream": stream,
            "simulated": simulated,
        },
        summary=f"probe {target.name}: {send}",
        made_at=snapshot.taken_at,
    )


def summary_line(report: Mapping[str, Any]) -> str:
    lat = report["latency_ms"]

    def ms(key: str) -> str:
        return "n/a" if lat.get(key) is None else f"{lat[key]:.1f}"

    stable = {True: "stable", False: "NOT stable", None: "too short to judge"}[report["stable"]]
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(report["errors"].items())) or "none"
    return (
        f"{report['succeeded']}/{report['sent']} ok; offered {report['offered_rate']:.1f}/s, "
        f"achieved {report['achieved_rate']:.1f}/s; p50 {ms('p50')} p90 {ms('p90')} "
        f"p95 {ms('p95')} p99 {ms('p99')} ms; errors: {errors}; {stable}"
    )


def apply(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
    """Run the planned probe (blocking: call from a worker thread, never the UI thread)."""
    from gpucon.actions.plan import Outcome, OutcomeStatus, ProgressEvent, StepStatus
    from gpucon.config import ProbeTarget
    from gpucon.controls.probe import ProbeBounds, ProbeProgress

    p = plan.params
    t = p["target"]
    target = ProbeTarget(name=t["name"], url=t["url"], model=t["model"])
    bounds = ProbeBounds(p["count"], p["rate"], p["concurrency"], p["duration"], p["timeout"])
    last = [0.0]

    def on_progress(pp: ProbeProgress) -> None:
        now = time.monotonic()
        if now - last[0] < PROGRESS_EVERY_S and pp.completed + pp.errors < pp.sent:
            return
        last[0] = now
        text = f"{pp.sent}/{pp.total} sent, {pp.completed} ok, {pp.errors} errors"
        fraction = (pp.completed + pp.errors) / pp.total if pp.total else None
        progress(ProgressEvent("probe", StepStatus.RUNNING, text, fraction))

    progress(ProgressEvent("probe", StepStatus.STARTED, plan.steps[0].text))
    prober = controls.prober
    if prober is None or bool(p.get("simulated")) != prober.simulated:
        # the probe is the only write path to a backend's requests: without a probe control
        # (read-only) nothing is sent, and a demo plan never reaches a live fleet's backends
        text = (
            "no probe control: this console cannot send requests"
            if prober is None
            else "this plan probes the simulated fleet; these controls steer a live one"
            if p.get("simulated")
            else "this plan probes a live fleet; these controls steer the simulated one"
        )
        progress(ProgressEvent("probe", StepStatus.FAILED, text))
        return Outcome(plan.action, plan.target, OutcomeStatus.REFUSED, text, plan.digest)
    try:
        result = prober.probe(
            target, bounds, on_progress, via_queue=bool(p["via_queue"]),
            redis_url=p.get("redis_url"), stream=str(p["stream"]),
        )  # fmt: skip
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        progress(ProgressEvent("probe", StepStatus.FAILED, text))
        return Outcome(plan.action, plan.target, OutcomeStatus.FAILED, text, plan.digest)
    report = result.to_dict()
    progress(ProgressEvent("probe", StepStatus.DONE, f"sent {result.sent} requests"))
    line = summary_line(report)
    progress(ProgressEvent("report", StepStatus.STARTED, "measuring"))
    progress(ProgressEvent("report", StepStatus.DONE, line))
    status = OutcomeStatus.OK if result.succeeded > 0 else OutcomeStatus.FAILED
    message = f"probe of {plan.target}: {line}"
    return Outcome(plan.action, plan.target, status, message, plan.digest, details=report)
