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

from collections.abc import Mapping
from typing import Any

from gpucon.actions.backends import (
    capacity_radius,
    node_backends,
    text_param,
)
from gpucon.actions.drain_group import backends_on
from gpucon.actions.headroom import kept_serving_by, others_serving
from gpucon.actions.plan import (
    OUT_OF_SERVICE,
    Outcome,
    Plan,
    Precondition,
    Progress,
    Step,
    Tier,
)
from gpucon.config.mps import MpsDaemonConfig, MpsServerConfig
from gpucon.controls.base import Controls
from gpucon.controls.probe import ProbeBounds
from gpucon.errors import (
    MAX_ACTION_TIMEOUT_S,
    MIN_ACTION_TIMEOUT_S,
    BadParams,
    finite_number,
    shown,
)
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.records import as_dict
from gpucon.model.snapshot import Snapshot

DEFAULT_REASON = "MPS restart with gpucon"
DEFAULT_TIMEOUT_S = 120.0
DAEMON_WAIT_S = 15.0
POLL_S = 0.2
PCT_QUERY = "get_default_active_thread_percentage"
PROBE_BOUNDS = ProbeBounds(count=2, rate_per_s=2.0, concurrency=2, duration_s=30.0, timeout_s=20.0)


def daemon_params(config: MpsDaemonConfig) -> dict[str, Any]:
    """The daemon's config as plan params (JSON-compatible, part of the plan's digest)."""
    return as_dict(config)


def daemon_from_params(params: Mapping[str, Any]) -> MpsDaemonConfig:
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
    daemon = daemon_from_params(params)
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
    pre.extend(others_serving(snapshot, drain, force))
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
        blast_radius=capacity_radius(snapshot, names, slots, OUT_OF_SERVICE),
        undo="nothing to undo: a restart that fails leaves its backends drained; run it again "
        f"(gpucon mps-restart {target}) or undrain them",
        params={
            "target": target,
            "daemon": daemon_params(daemon),
            "drain": [b.name for b in drain],
            "keep_serving": kept_serving_by(snapshot, drain, force),
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


def recheck_mps_restart(plan: Plan, controls: Controls) -> list[str]:
    """Each backend the plan drains must still be in the registry."""
    changed = []
    for name in [str(n) for n in plan.params.get("drain") or []]:
        if controls.registry.backend(name) is None:
            changed.append(f"{name} is no longer in the registry")
    return changed


def apply_mps_restart(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
    """Run the plan's steps (``gpucon.actions.mps_apply``)."""
    from gpucon.actions.mps_apply import apply_restart

    return apply_restart(plan, controls, progress)


plan = plan_mps_restart
apply = apply_mps_restart
recheck = recheck_mps_restart
