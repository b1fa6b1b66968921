"""The load probe as an action (tier 1): plan pure, apply through the probe engine.

``plan(snapshot, params)`` picks the target from the config's probe targets only (passed in
``params["probe_targets"]``), takes count, rate, concurrency, duration and timeout from the
params or, for each one not given, from the backend's observed service time
(``actions.probe_defaults``), checks them against that target's caps (BadParams naming the
field) and says what will be sent where, and whether enough requests can complete to judge.
``apply`` runs ``gpucon.controls.probe`` with progress from the first request (sent, ok,
failed, running p50) and returns the report in the outcome's ``details``; its one-line summary
with the verdict (``actions.probe_verdict``) is a step result, so the audit log has it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the verb's parser is built for every gpucon command: import lazily
    from gpucon.actions.plan import BlastRadius, Outcome, Plan, Progress
    from gpucon.actions.probe_defaults import ProbeDefaults
    from gpucon.config import ProbeTarget
    from gpucon.controls.base import Controls
    from gpucon.controls.probe import ProbeBounds, ProbeProgress
    from gpucon.model.snapshot import Snapshot

PROGRESS_EVERY_S = 0.1
# the params an operator may edit in the plan (the console's form; the verb's options)
EDITABLE = ("count", "rate", "concurrency", "duration", "timeout")
# a simulated backend's caps: nothing real is loaded, but the bounds are enforced all the same
# (long enough for a slow diffusion backend's default probe to complete a p95's samples)
SIM_CAPS: dict[str, Any] = {
    "max_requests": 500,
    "max_rate_per_s": 100.0,
    "max_concurrency": 16,
    "max_duration_s": 600.0,
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


def _as_params(values: ProbeDefaults | ProbeBounds) -> dict[str, float]:
    return {
        "count": values.count,
        "rate": values.rate_per_s,
        "concurrency": values.concurrency,
        "duration": values.duration_s,
        "timeout": values.timeout_s,
    }


def _radius(snapshot: Snapshot, name: str, active: tuple[str, ...], via_queue: bool) -> BlastRadius:
    """A probe takes nothing out of service: what its blast radius gives is the share of fleet
    capacity that takes its extra load (the target's, or through the queue every active
    backend's), measured as a drain's is; a target the scheduler sends nothing to has none."""
    from gpucon.actions.backends import capacity_radius
    from gpucon.actions.plan import PROBE_LOAD, BlastRadius
    from gpucon.model.fleet import BackendState

    if via_queue:
        return capacity_radius(snapshot, active, (), PROBE_LOAD)
    backend = snapshot.backends.get(name)
    slots = (backend.slot_id,) if backend is not None and backend.slot_id else ()
    if backend is None or backend.state is not BackendState.ACTIVE:
        where = "not in the registry" if backend is None else str(backend.state)
        why = f"no share of fleet capacity: the scheduler sends it no traffic ({where})"
        return BlastRadius((name,), slots, None, PROBE_LOAD, why)
    return capacity_radius(snapshot, (name,), slots, PROBE_LOAD)


def plan(snapshot: Snapshot, params: Mapping[str, Any]) -> Plan:
    """The probe plan; refuses unknown targets and out-of-bounds params before anything runs."""
    from gpucon.actions.load import not_serving, slo_for
    from gpucon.actions.plan import Plan, Precondition, Step, Tier
    from gpucon.actions.probe_defaults import ProbeCaps, observed_service, probe_defaults
    from gpucon.actions.probe_verdict import plan_checks
    from gpucon.controls.probe import STOP_AFTER_CONNECT_ERRORS, check_bounds
    from gpucon.errors import BadParams
    from gpucon.model.fleet import BackendState

    target = _target(snapshot, params)
    service = observed_service(snapshot, target.name)
    caps = ProbeCaps(
        target.max_requests, target.max_rate_per_s, target.max_concurrency, target.max_duration_s
    )
    chosen = probe_defaults(service, caps)
    given = {k: params[k] for k in EDITABLE if params.get(k) is not None}
    edited: list[str] = []
    if given:  # check what was given (BadParams names it), then fit the others to it
        defaults = _as_params(chosen)
        checked = _as_params(check_bounds(target, {**defaults, **given}))
        # the console sends every field: only those that differ from the defaults were edited
        edited = sorted(k for k in given if checked[k] != defaults[k])
        chosen = probe_defaults(service, caps, {k: checked[k] for k in given})
    bounds = check_bounds(target, _as_params(chosen))
    via_queue = bool(params.get("via_queue", False))
    simulated = bool(params.get("simulated", False))
    if simulated and via_queue:
        raise BadParams("via_queue", "the demo probes a backend directly; there is no queue")
    redis_url = params.get("redis_url")
    stream = str(params.get("stream") or "gen:queue")
    pre: list[Precondition] = []
    backend = snapshot.backends.get(target.name)
    if backend is not None and not via_queue:
        down = not_serving(snapshot, backend)
        text = f"{target.name} is {backend.state} (a direct probe reaches it)"
        if down is not None:  # probing a dead backend is how one checks it: a warning only
            text = (
                f"{target.name} is {backend.state} but NOT READY ({down}): expect failures (it "
                f"stops after {STOP_AFTER_CONNECT_ERRORS} connection failures with no answer)"
            )
        pre.append(Precondition("backend", True, text, warning=down is not None))
    pre.extend(plan_checks(service, chosen, bounds, edited=edited))
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
        blast_radius=_radius(snapshot, target.name, tuple(active), via_queue),
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
            "slo_p95_ms": slo_for(snapshot, target.name),
            "service_s": service.service_s,
        },
        summary=f"probe {target.name}: {send}",
        made_at=snapshot.taken_at,
    )


def summary_line(report: Mapping[str, Any], params: Mapping[str, Any] | None = None) -> str:
    """``VERDICT: why; 20/20 ok; offered ... achieved ...; p50 .. p99 ms; errors: none``."""
    from gpucon.actions.probe_defaults import MIN_SAMPLES
    from gpucon.actions.probe_verdict import rates_text, verdict
    from gpucon.controls.probe import STABILITY_WINDOWS

    p = params or {}
    judged = verdict(
        report,
        slo_p95_ms=p.get("slo_p95_ms"),
        service_s=p.get("service_s"),
        timeout_s=p.get("timeout"),
    )
    lat = report["latency_ms"]

    def ms(key: str) -> str:
        return "n/a" if lat.get(key) is None else f"{lat[key]:.1f}"

    errors = ", ".join(f"{k}: {v}" for k, v in sorted(report["errors"].items())) or "none"
    # stability compares three windows' throughput: with fewer than MIN_SAMPLES answers in
    # each, it is noise (a 20-request probe of a slow backend has a few per window)
    enough = report["succeeded"] >= STABILITY_WINDOWS * MIN_SAMPLES
    judged_stable = report["stable"] if enough and judged.kind != "too short" else None
    stable = {True: "; stable", False: "; throughput NOT stable", None: ""}[judged_stable]
    return (
        f"{judged.line()}; {report['succeeded']}/{report['sent']} ok; {rates_text(report)}; "
        f"p50 {ms('p50')} p90 {ms('p90')} p95 {ms('p95')} p99 {ms('p99')} ms; "
        f"errors: {errors}{stable}"
    )


def progress_text(pp: ProbeProgress) -> str:
    """``3/20 done (5 sent): 3 ok, 0 failed; p50 14.2 s; 21 s of 350 s``."""
    from gpucon.actions.probe_defaults import fmt_s

    p50 = "n/a" if pp.p50_ms is None else fmt_s(pp.p50_ms / 1000.0)
    of = "" if pp.duration_s is None else f" of {pp.duration_s:g} s"
    return (
        f"{pp.completed + pp.errors}/{pp.total} done ({pp.sent} sent): {pp.completed} ok, "
        f"{pp.errors} failed; p50 {p50}; {pp.elapsed_s:.0f} s{of}"
    )


def progress_fraction(pp: ProbeProgress) -> float | None:
    """Requests answered of those planned, or the sending window's elapsed share when that
    is further on (a probe cut short by its duration sends fewer than its count)."""
    if not pp.total:
        return None
    done = (pp.completed + pp.errors) / pp.total
    if pp.duration_s:
        done = max(done, min(0.99, pp.elapsed_s / pp.duration_s))
    return min(1.0, done)


def apply(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
    """Run the planned probe (blocking: call from a worker thread, never the UI thread)."""
    from gpucon.actions.plan import Outcome, OutcomeStatus, ProgressEvent, StepStatus
    from gpucon.actions.probe_verdict import verdict
    from gpucon.config import ProbeTarget
    from gpucon.controls.probe import ProbeBounds

    p = plan.params
    t = p["target"]
    target = ProbeTarget(name=t["name"], url=t["url"], model=t["model"])
    bounds = ProbeBounds(p["count"], p["rate"], p["concurrency"], p["duration"], p["timeout"])
    last = [0.0]

    def on_progress(pp: ProbeProgress) -> None:
        now = time.monotonic()
        first = pp.sent == 1 and pp.completed + pp.errors == 0  # said at once, never throttled
        if not first and now - last[0] < PROGRESS_EVERY_S:
            return
        last[0] = now
        progress(
            ProgressEvent("probe", StepStatus.RUNNING, progress_text(pp), progress_fraction(pp))
        )

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
    sent = f"sent {result.sent} requests" + (
        f" of {bounds.count}: {result.stopped_early}" if result.stopped_early else ""
    )
    progress(ProgressEvent("probe", StepStatus.DONE, sent))
    judged = verdict(
        report, slo_p95_ms=p.get("slo_p95_ms"), service_s=p.get("service_s"), timeout_s=p["timeout"]
    )
    report["verdict"] = {"kind": judged.kind, "text": judged.text}
    line = summary_line(report, p)
    progress(ProgressEvent("report", StepStatus.STARTED, "measuring"))
    progress(ProgressEvent("report", StepStatus.DONE, line))
    # the probe ran: only a failing backend fails it (slow and too short are in the verdict)
    status = OutcomeStatus.FAILED if judged.backend_failing else OutcomeStatus.OK
    # the outcome says OK (it ran) before this: the verdict is named as such, not a second OK
    message = f"probe of {plan.target} ran, verdict {line}"
    return Outcome(plan.action, plan.target, status, message, plan.digest, details=report)
