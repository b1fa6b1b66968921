"""Restart CUDA MPS on a GPU or VM (tier 2): drain, stop servers, quit, start, limits, back.

The sequence, each step idempotent so that a run again after a crash converges:
drain every backend on the target (and every configured server's), stop the servers, ``quit``
the control daemon (nothing to do when it is down), start it (nothing when it answers),
apply the default active-thread percentage and pinned-memory limit (read back; skipped with a
note when the driver's daemon does not speak the command), start the servers with their own
shares (60/40) in their environment, wait until each is ready, check the daemon serves them
(and probe the backends that have a probe target), then undrain what this action drained.
A failed step stops the run; the outcome and the audit name the step and the state left
(registry states, daemon up or down). ``plan`` is pure: the daemon's config comes in
``params["daemon"]`` from the caller (the config, or the simulated fleet).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from functools import partial
from typing import Any

from gpucon.actions.backends import (
    capacity_share_pct,
    describe_state,
    node_backends,
    text_param,
)
from gpucon.actions.drain import _others_serving
from gpucon.actions.drain_group import backends_on, drain_group, undrain_group
from gpucon.actions.plan import (
    BlastRadius,
    Outcome,
    OutcomeStatus,
    Plan,
    Precondition,
    Progress,
    ProgressEvent,
    Step,
    StepStatus,
    Tier,
)
from gpucon.config.mps import MpsDaemonConfig, MpsServerConfig
from gpucon.controls.base import Controls, MpsDaemon
from gpucon.controls.probe import ProbeBounds
from gpucon.errors import (
    MAX_ACTION_TIMEOUT_S,
    MIN_ACTION_TIMEOUT_S,
    BadParams,
    StepFailed,
    StepTimeout,
    finite_number,
    shown,
)
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot

DEFAULT_REASON = "MPS restart with gpucon"
DEFAULT_TIMEOUT_S = 120.0
DAEMON_WAIT_S = 15.0
POLL_S = 0.2
PCT_QUERY = "get_default_active_thread_percentage"
PROBE_BOUNDS = ProbeBounds(count=2, rate_per_s=2.0, concurrency=2, duration_s=30.0, timeout_s=20.0)


def daemon_params(config: MpsDaemonConfig) -> dict[str, Any]:
    """The daemon's config as plan params (JSON-compatible, part of the plan's digest)."""
    return asdict(config)


def _daemon(params: Mapping[str, Any]) -> MpsDaemonConfig:
    raw = params.get("daemon")
    if not isinstance(raw, Mapping):
        raise BadParams("target", "no MPS daemon is configured for it ([[fleets.NAME.mps]])")
    fields = dict(raw)
    servers = tuple(
        MpsServerConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in dict(s).items()})  # type: ignore[arg-type]
        for s in fields.pop("servers", ())
    )
    return MpsDaemonConfig(**fields, servers=servers)


def _server_env(daemon: MpsDaemonConfig, server: MpsServerConfig) -> str:
    shares = []
    if server.thread_pct is not None:
        shares.append(f"{server.thread_pct:g}% of the SMs")
    if server.pinned_mem_limit is not None:
        shares.append(f"pinned memory {server.pinned_mem_limit}")
    return f" with {', '.join(shares)}" if shares else ""


def plan_mps_restart(snapshot: Snapshot, params: Mapping[str, Any]) -> Plan:
    target = text_param(params, "target")
    if target is None:
        raise BadParams("target", "which GPU, slot or VM? (a target of [[fleets.NAME.mps]])")
    daemon = _daemon(params)
    if daemon.target != target:
        raise BadParams("target", f"the daemon's config is for {shown(daemon.target)}")
    timeout_s = finite_number(
        "timeout_s",
        params.get("timeout_s", DEFAULT_TIMEOUT_S),
        minimum=MIN_ACTION_TIMEOUT_S,
        maximum=MAX_ACTION_TIMEOUT_S,
    )
    reason = text_param(params, "reason") or DEFAULT_REASON
    force = bool(params.get("force", False))
    on_target = {b.name: b for b in backends_on(snapshot, target)}
    if daemon.transport == "kube" and daemon.node:  # the node's pods all share its daemon
        on_target.update({b.name: b for b in node_backends(snapshot, daemon.node)})
    for server in daemon.servers:
        if server.backend in snapshot.backends:
            on_target[server.backend] = snapshot.backends[server.backend]
    backends = tuple(on_target[n] for n in sorted(on_target))

    # what this action drains, and so undrains: a backend drained already stays drained,
    # unless a restart drained it (its reason): then this run finishes what that one began
    def ours(b: Backend) -> bool:
        return b.state is not BackendState.DRAINED or b.reason == reason

    drain = tuple(b for b in backends if ours(b))
    kept = tuple(b.name for b in backends if not ours(b))
    unknown = tuple(s.backend for s in daemon.servers if s.backend not in snapshot.backends)

    pre = [Precondition("daemon", True, f"MPS daemon for {target}: {daemon.where()}")]
    pre.extend(_others_serving(snapshot, drain, force))
    if kept:
        text = f"{', '.join(kept)} drained already: left drained afterwards"
        pre.append(Precondition("drained_already", True, text, warning=True))
    if unknown:
        text = f"{', '.join(unknown)} not in the registry: restarted, not drained"
        pre.append(Precondition("unregistered", True, text, warning=True))

    probe_targets = {str(t["name"]): t for t in params.get("probe_targets") or ()}
    steps: list[Step] = []
    for b in drain:
        steps.append(Step(f"draining:{b.name}", f"set {b.name} state=draining, weight 0"))
    for b in drain:
        steps.append(Step(f"wait:{b.name}", f"wait until {b.name} has nothing in flight"))
    for b in drain:
        steps.append(Step(f"drained:{b.name}", f"mark {b.name} drained (reason: {reason})"))
    for s in daemon.servers:
        # quit waits for connected clients (seen on the H200): a server must be stopped first
        text = " ".join(s.stop) if s.stop else "no stop command: its manager must stop it"
        steps.append(Step(f"stop-server:{s.backend}", f"stop {s.backend}: {text}"))
    steps.append(Step("quit-daemon", f"quit the MPS control daemon ({daemon.where()})"))
    steps.append(Step("start-daemon", f"start the MPS control daemon ({daemon.where()})"))
    if daemon.default_thread_pct is not None:
        steps.append(
            Step(
                "thread-pct",
                f"set the default active thread percentage to {daemon.default_thread_pct:g}",
            )
        )
    if daemon.pinned_mem_limit is not None:
        steps.append(
            Step(
                "pinned-mem",
                f"set device {daemon.device}'s default pinned memory limit to "
                f"{daemon.pinned_mem_limit}",
            )
        )
    for s in daemon.servers:
        text = " ".join(s.start) if s.start else "no start command: started by its own manager"
        steps.append(
            Step(f"start-server:{s.backend}", f"start {s.backend}{_server_env(daemon, s)}: {text}")
        )
    for s in daemon.servers:
        how = " ".join(s.ready) if s.ready else "no ready command: taken as ready once started"
        steps.append(
            Step(
                f"ready:{s.backend}",
                f"wait until {s.backend} is ready ({how}, {s.ready_timeout_s:g} s)",
            )
        )
    probed = [s.backend for s in daemon.servers if s.backend in probe_targets]
    steps.append(
        Step(
            "probe",
            "check the daemon serves the servers"
            + (f"; probe {', '.join(probed)}" if probed else ""),
        )
    )
    for b in drain:
        steps.append(Step(f"undrain:{b.name}", f"undrain {b.name} (its weight restored)"))

    names = tuple(b.name for b in backends)
    slots = tuple(sorted({b.slot_id for b in backends if b.slot_id}))
    return Plan(
        action="mps-restart",
        target=target,
        tier=Tier.DISRUPTIVE,
        preconditions=tuple(pre),
        steps=tuple(steps),
        blast_radius=BlastRadius(names, slots, capacity_share_pct(snapshot, names)),
        undo="nothing to undo: a restart that fails leaves its backends drained; run it again "
        f"(gpucon mps-restart {target}) or undrain them",
        params={
            "target": target,
            "daemon": daemon_params(daemon),
            "drain": [b.name for b in drain],
            "reason": reason,
            "timeout_s": timeout_s,
            "poll_s": finite_number(
                "poll_s", params.get("poll_s", POLL_S), minimum=0.01, maximum=60.0
            ),
            "probe_targets": [dict(probe_targets[n]) for n in probed],
        },
        summary=f"restart MPS on {target}: {len(drain)} backend(s) out of service meanwhile",
        made_at=snapshot.taken_at,
    )


class _Run:
    """One apply: the progress, the daemon, the step helper, the times of each step."""

    def __init__(self, plan: Plan, controls: Controls, progress: Progress) -> None:
        self.plan = plan
        self.controls = controls
        self.progress = progress
        self.config = _daemon(plan.params)
        self.times: dict[str, float] = {}
        self.notes: list[str] = []
        if controls.mps is None:
            raise StepFailed("quit-daemon", "no MPS daemon is configured")
        self.daemon: MpsDaemon = controls.mps(plan.target)

    def step(self, key: str, text: str, fn: Callable[[], str | None]) -> None:
        self.progress(ProgressEvent(key, StepStatus.STARTED, text))
        self.times[key] = time.monotonic()
        try:
            said = fn()
        except StepFailed as failure:
            self.progress(ProgressEvent(key, StepStatus.FAILED, str(failure)))
            raise
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            self.progress(ProgressEvent(key, StepStatus.FAILED, detail))
            kind = StepTimeout if isinstance(exc, TimeoutError) else StepFailed
            raise kind(key, detail) from exc
        self.progress(ProgressEvent(key, StepStatus.DONE, said or text))

    def run_command(self, key: str, argv: tuple[str, ...], env: Mapping[str, str]) -> str:
        done = self.daemon.run(argv, env, self.config.timeout_s * 6)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()
            raise StepFailed(
                key, f"{argv[0]} exited {done.returncode}" + (f": {tail[-1]}" if tail else "")
            )
        return f"{' '.join(argv)}: done"

    # --- the daemon's steps --------------------------------------------------------------
    def quit_daemon(self) -> str:
        if not self.daemon.running():
            return "the daemon was not running: nothing to quit"
        try:
            self.daemon.stop(DAEMON_WAIT_S)
        except Exception as exc:
            # the daemon waits for its clients: a server still connected holds quit up
            raise StepFailed(
                "quit-daemon",
                f"{exc} (quit waits for connected clients: is a server still running? "
                "stop it, then run the restart again)",
            ) from exc
        return "the daemon quit"

    def start_daemon(self) -> str:
        if self.daemon.running():
            return "the daemon answers already"
        self.daemon.start(DAEMON_WAIT_S)
        return "the daemon answers"

    def thread_pct(self) -> str:
        pct = self.config.default_thread_pct
        assert pct is not None
        if not self.daemon.speaks(PCT_QUERY):
            note = "this daemon does not speak set_default_active_thread_percentage: skipped"
            self.notes.append(note)
            return note
        self.daemon.set_default_thread_pct(pct)
        now = self.daemon.default_thread_pct()
        if now is None or abs(now - pct) > 0.01:
            raise StepFailed("thread-pct", f"set {pct:g} but the daemon reads back {now}")
        return f"default active thread percentage {now:g} (read back)"

    def pinned_mem(self) -> str:
        limit = self.config.pinned_mem_limit
        device = self.config.device
        assert limit is not None
        if not self.daemon.speaks(f"get_default_device_pinned_mem_limit {device}"):
            note = "this daemon does not speak set_default_device_pinned_mem_limit: skipped"
            self.notes.append(note)
            return note
        self.daemon.set_default_pinned_mem_limit(device, limit)
        now = self.daemon.default_pinned_mem_limit(device)
        if now is None:
            raise StepFailed("pinned-mem", f"set {limit} but the daemon reads back no limit")
        return f"device {device} default pinned memory limit {now} (read back)"

    # --- the servers' steps ------------------------------------------------------------
    def server_env(self, server: MpsServerConfig) -> dict[str, str]:
        env = self.daemon.client_env()
        if server.thread_pct is not None:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = f"{server.thread_pct:g}"
        if server.pinned_mem_limit is not None:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = server.pinned_mem_limit
        return env

    def wait_ready(self, server: MpsServerConfig) -> str:
        key = f"ready:{server.backend}"
        if not server.ready:
            return f"{server.backend}: no ready command, taken as ready"
        deadline = time.monotonic() + server.ready_timeout_s
        tries = 0
        while True:
            tries += 1
            done = self.daemon.run(server.ready, self.server_env(server), self.config.timeout_s)
            if done.returncode == 0:
                return f"{server.backend} is ready (after {tries} check(s))"
            left = deadline - time.monotonic()
            if left <= 0:
                raise StepTimeout(
                    key, f"{server.backend} not ready after {server.ready_timeout_s:g} s"
                )
            text = f"{server.backend} not ready yet ({left:.0f} s left)"
            self.progress(ProgressEvent(key, StepStatus.RUNNING, text))
            time.sleep(min(float(self.plan.params.get("poll_s", POLL_S)), max(0.0, left)))

    def probe(self) -> str:
        said = []
        started = [s for s in self.config.servers if s.start]
        if started and self.config.transport != "kube":
            pids = self.daemon.server_pids()
            if not pids:
                raise StepFailed("probe", "the servers are ready but the daemon serves no client")
            said.append(f"the daemon runs {len(pids)} MPS server(s)")
        for raw in self.plan.params.get("probe_targets") or ():
            said.append(self._probe_one(dict(raw)))
        return "; ".join(said) or "nothing to check: no server is started by gpucon"

    def _probe_one(self, raw: dict[str, Any]) -> str:
        from gpucon.config import ProbeTarget

        prober = self.controls.prober
        target = ProbeTarget(**raw)
        if prober is None:
            return f"{target.name}: no prober"
        # a few requests, each given time for a slow model (an SDXL image takes seconds)
        result = prober.probe(target, PROBE_BOUNDS)
        if result.succeeded < result.sent or result.sent == 0:
            errors = ", ".join(f"{k} {v}" for k, v in sorted(result.errors.items()))
            raise StepFailed(
                "probe",
                f"{target.name}: {result.succeeded}/{result.sent} answered"
                + (f" ({errors})" if errors else ""),
            )
        p95 = result.latency_ms.get("p95")
        return f"{target.name}: {result.succeeded}/{result.sent} answered" + (
            f", p95 {p95:.0f} ms" if p95 is not None else ""
        )


def apply_mps_restart(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
    drain = [str(n) for n in plan.params.get("drain") or []]
    reason = str(plan.params.get("reason", DEFAULT_REASON))
    try:
        run = _Run(plan, controls, progress)
    except StepFailed as failure:
        return Outcome(plan.action, plan.target, OutcomeStatus.FAILED, str(failure), plan.digest)
    config = run.config
    started = time.monotonic()
    outage: float | None = None
    try:
        drain_group(
            controls,
            drain,
            reason,
            float(plan.params.get("timeout_s", DEFAULT_TIMEOUT_S)),
            float(plan.params.get("poll_s", POLL_S)),
            progress,
        )
        down_at = time.monotonic()  # the servers stop serving from here until ready
        for s in config.servers:
            key = f"stop-server:{s.backend}"
            if s.stop:
                env = run.server_env(s)
                run.step(
                    key,
                    f"stop {s.backend}",
                    partial(run.run_command, key, s.stop, env),
                )
            else:
                progress(ProgressEvent(key, StepStatus.DONE, "no stop command"))
        run.step("quit-daemon", "quit the daemon", run.quit_daemon)
        run.step("start-daemon", "start the daemon", run.start_daemon)
        if config.default_thread_pct is not None:
            run.step("thread-pct", "default active thread percentage", run.thread_pct)
        if config.pinned_mem_limit is not None:
            run.step("pinned-mem", "default pinned memory limit", run.pinned_mem)
        for s in config.servers:
            key = f"start-server:{s.backend}"
            if s.start:
                env = run.server_env(s)
                run.step(
                    key,
                    f"start {s.backend}",
                    partial(run.run_command, key, s.start, env),
                )
            else:
                progress(ProgressEvent(key, StepStatus.DONE, "no start command"))
        for s in config.servers:
            run.step(f"ready:{s.backend}", f"wait for {s.backend}", partial(run.wait_ready, s))
        outage = time.monotonic() - down_at
        run.step("probe", "check the servers", run.probe)
        undrain_group(controls, drain, reason, progress)
    except StepFailed as failure:
        status = OutcomeStatus.TIMEOUT if isinstance(failure, StepTimeout) else OutcomeStatus.FAILED
        return Outcome(
            plan.action,
            plan.target,
            status,
            f"{failure}; the run stopped there: run it again to finish (every step is idempotent)",
            plan.digest,
            state_left=_state_left(run, drain),
            details=_details(run, started, outage),
        )
    finally:
        run.daemon.close()
    message = f"MPS restarted on {plan.target}"
    if outage is not None:
        message += f"; servers were out for {outage:.1f} s"
    message += "".join(f" ({n})" for n in run.notes)
    return Outcome(
        plan.action,
        plan.target,
        OutcomeStatus.OK,
        message,
        plan.digest,
        state_left=_state_left(run, drain),
        details=_details(run, started, outage),
    )


def _details(run: _Run, started: float, outage: float | None) -> dict[str, Any]:
    return {
        "outage_s": None if outage is None else round(outage, 3),
        "total_s": round(time.monotonic() - started, 3),
        "notes": list(run.notes),
    }


def _state_left(run: _Run, names: list[str]) -> str:
    try:
        daemon = "MPS daemon running" if run.daemon.running() else "MPS daemon NOT running"
    except Exception as exc:
        daemon = f"MPS daemon state unknown ({type(exc).__name__})"
    registry = describe_state(run.controls, names)
    return daemon + (f"; {registry}" if registry else "")


def recheck_mps_restart(plan: Plan, controls: Controls) -> list[str]:
    """Each backend the plan drains must still be in the registry."""
    changed = []
    for name in [str(n) for n in plan.params.get("drain") or []]:
        if controls.registry.backend(name) is None:
            changed.append(f"{name} is no longer in the registry")
    return changed


plan = plan_mps_restart
apply = apply_mps_restart
recheck = recheck_mps_restart
