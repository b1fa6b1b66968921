"""The MPS restart's apply: each step of ``gpucon.actions.mps_restart``'s plan, in order.

``apply_restart`` drains through ``gpucon.actions.drain_group``, drives the daemon through
``Controls.mps`` (here, over SSH, the operator's pod, or the demo's) and the servers' commands
through the same transport, and stops at the first step that fails, saying which and leaving
the state it names (``state_left``). Every step finds what is already done and does not do it
again, so a run after a crash or a failure converges. ``outage_s`` is the time from stopping
the servers until the last one is ready.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from gpucon.actions.backends import describe_state
from gpucon.actions.drain import kept_of
from gpucon.actions.drain_group import drain_group, undrain_group
from gpucon.actions.mps_restart import (
    DAEMON_WAIT_S,
    DEFAULT_REASON,
    DEFAULT_TIMEOUT_S,
    PCT_QUERY,
    POLL_S,
    PROBE_BOUNDS,
    daemon_from_params,
)
from gpucon.actions.plan import Outcome, Plan, Progress, ProgressEvent, StepStatus
from gpucon.actions.steps import finished, run_step, stopped
from gpucon.config.mps import MpsServerConfig
from gpucon.controls.base import Controls, MpsDaemon
from gpucon.errors import StepFailed, StepTimeout


class _Run:
    """One apply: the progress, the daemon, the step helper, the times of each step."""

    def __init__(self, plan: Plan, controls: Controls, progress: Progress) -> None:
        self.plan = plan
        self.controls = controls
        self.progress = progress
        self.config = daemon_from_params(plan.params)
        self.times: dict[str, float] = {}
        self.notes: list[str] = []
        if controls.mps is None:
            raise StepFailed("quit-daemon", "no MPS daemon is configured")
        self.daemon: MpsDaemon = controls.mps(plan.target)

    def step(self, key: str, text: str, fn: Callable[[], str | None]) -> None:
        self.times[key] = time.monotonic()
        run_step(self.progress, key, text, fn)

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
    def server_step(self, verb: str, server: MpsServerConfig, argv: tuple[str, ...]) -> None:
        """``stop-server:NAME`` or ``start-server:NAME``: the server's own command (done at
        once when it has none)."""
        key = f"{verb}-server:{server.backend}"
        if not argv:
            self.progress(ProgressEvent(key, StepStatus.DONE, f"no {verb} command"))
            return
        env = self.server_env(server)
        self.step(key, f"{verb} {server.backend}", partial(self.run_command, key, argv, env))

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


def apply_restart(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
    drain = [str(n) for n in plan.params.get("drain") or []]
    reason = str(plan.params.get("reason", DEFAULT_REASON))
    try:
        run = _Run(plan, controls, progress)
    except StepFailed as failure:
        return stopped(plan, failure)
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
            keep_serving=kept_of(plan),
        )
        down_at = time.monotonic()  # the servers stop serving from here until ready
        for s in config.servers:
            run.server_step("stop", s, s.stop)
        run.step("quit-daemon", "quit the daemon", run.quit_daemon)
        run.step("start-daemon", "start the daemon", run.start_daemon)
        if config.default_thread_pct is not None:
            run.step("thread-pct", "default active thread percentage", run.thread_pct)
        if config.pinned_mem_limit is not None:
            run.step("pinned-mem", "default pinned memory limit", run.pinned_mem)
        for s in config.servers:
            run.server_step("start", s, s.start)
        for s in config.servers:
            run.step(f"ready:{s.backend}", f"wait for {s.backend}", partial(run.wait_ready, s))
        outage = time.monotonic() - down_at
        run.step("probe", "check the servers", run.probe)
        undrain_group(controls, drain, reason, progress)
    except StepFailed as failure:
        return stopped(
            plan,
            failure,
            message=f"{failure}; the run stopped there: run it again to finish "
            "(every step is idempotent)",
            state_left=_state_left(run, drain),
            details=_details(run, started, outage),
        )
    finally:
        run.daemon.close()
    message = f"MPS restarted on {plan.target}"
    if outage is not None:
        message += f"; servers were out for {outage:.1f} s"
    message += "".join(f" ({n})" for n in run.notes)
    return finished(
        plan, message, state_left=_state_left(run, drain), details=_details(run, started, outage)
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
