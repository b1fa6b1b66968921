"""Drain and undrain: stop sending a backend (or a Kubernetes node's backends) new work.

Drain (tier 2): ``state=draining`` and weight 0 (the weight it had is remembered in the
registry), wait until the backend's inflight requests and its pending queue entries reach 0,
then mark it ``drained`` with owner and reason. The plan shows the headroom of the backends
that take the load (``gpucon.actions.headroom``) and warns when they have none. A node drain
does that for every backend on the node, then cordons the node and evicts its GPU pods through
the Eviction API. A step that fails or times out stops the plan and leaves the backend
``draining``, owner and reason set.
Undrain (tier 1, ``gpucon.actions.undrain``) restores the weight it had and ``state=active``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from gpucon.actions.backends import (
    capacity_radius,
    describe_state,
    find_backend,
    node_backends,
    text_param,
)
from gpucon.actions.headroom import kept_serving_by, others_serving, state_line
from gpucon.actions.plan import (
    OUT_OF_SERVICE,
    Outcome,
    Plan,
    Precondition,
    Progress,
    ProgressEvent,
    Step,
    StepStatus,
    Tier,
)
from gpucon.actions.recheck import recheck_drain
from gpucon.actions.steps import finished, step_runner, stopped
from gpucon.actions.undrain import apply_undrain, plan_undrain
from gpucon.controls.base import Controls
from gpucon.errors import (
    MAX_ACTION_TIMEOUT_S,
    MIN_ACTION_TIMEOUT_S,
    BadParams,
    KeepsNoneServing,
    StepFailed,
    StepTimeout,
    finite_number,
    shown,
)
from gpucon.model.ages import fmt_elapsed
from gpucon.model.fleet import BackendState
from gpucon.model.snapshot import Snapshot
from gpucon.model.staleness import STALE_CADENCES

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_REASON = "drained with gpucon"
POLL_S = 0.2
SILENT_GRACE_S = 1.0  # beyond two heartbeat periods: one poll's and one read's lag


def plan_drain(snapshot: Snapshot, params: Mapping[str, Any]) -> Plan:
    """The drain plan for ``params["backend"]`` (or every backend of ``params["node"]``).

    Without a reason, a backend left ``draining`` by an interrupted drain keeps the reason
    that drain gave: running the drain again finishes it.
    """
    given = text_param(params, "reason")
    timeout_s = finite_number(
        "timeout_s",
        params.get("timeout_s", DEFAULT_TIMEOUT_S),
        minimum=MIN_ACTION_TIMEOUT_S,
        maximum=MAX_ACTION_TIMEOUT_S,
    )
    force = bool(params.get("force", False))
    node = text_param(params, "node")
    if node is not None:
        backends = node_backends(snapshot, node)
        if not backends and node not in snapshot.nodes:
            raise BadParams("node", f"unknown node {shown(node)}")
        target = node
    else:
        backends = (find_backend(snapshot, params.get("backend")),)
        target = backends[0].name
    resumed = [b.reason for b in backends if b.state is BackendState.DRAINING and b.reason]
    reason = given or (resumed[0] if resumed else DEFAULT_REASON)
    names = tuple(b.name for b in backends)

    pre: list[Precondition] = []
    pre.extend(state_line(snapshot, b, node) for b in backends)
    pre.extend(others_serving(snapshot, backends, force))
    pods = {b.pod for b in backends if b.pod}
    node_info = snapshot.nodes.get(node) if node is not None else None
    if node_info is not None:  # every GPU pod on the node, a backend's or not (a batch job)
        pods.update(node_info.gpu_pods)
    pods_sorted = tuple(sorted(pods))
    if node is not None:
        pre.append(
            Precondition(
                "kubernetes",
                bool(params.get("kube", False)),
                "Kubernetes is configured (cordon and evict)"
                if params.get("kube")
                else "Kubernetes is not configured: a node drain needs it",
            )
        )

    steps: list[Step] = []
    for b in backends:
        w = "n/a" if b.weight is None else f"{b.weight:g}"
        steps.append(Step(f"draining:{b.name}", f"set {b.name} state=draining, weight 0 (was {w})"))
    for b in backends:
        steps.append(
            Step(
                f"wait:{b.name}",
                f"wait until {b.name} has 0 in flight and 0 pending queue entries "
                f"(timeout {timeout_s:g} s)",
            )
        )
    for b in backends:
        steps.append(Step(f"drained:{b.name}", f"mark {b.name} drained (reason: {reason})"))
    if node is not None:
        steps.append(Step(f"cordon:{node}", f"cordon node {node}"))
        for pod in pods_sorted:
            steps.append(Step(f"evict:{pod}", f"evict pod {pod} (Eviction API, PDBs respected)"))

    slots = tuple(sorted({b.slot_id for b in backends if b.slot_id}))
    if node is not None:  # one command undrains the node's backends and uncordons it
        undo = f"gpucon undrain {node} --node (uncordons it, restores each backend's weight)"
    else:
        undo = "; ".join(f"gpucon undrain {n}" for n in names) or "nothing to undo"
        undo += (
            " (restores the weight it had)" if len(names) == 1 else " (restores each one's weight)"
        )
    return Plan(
        action="drain",
        target=target,
        tier=Tier.DISRUPTIVE,
        preconditions=tuple(pre),
        steps=tuple(steps),
        blast_radius=capacity_radius(snapshot, names, slots, OUT_OF_SERVICE),
        undo=undo,
        params={
            "backends": list(names),
            "node": node,
            "pods": list(pods_sorted),
            "reason": reason,
            "keep_serving": kept_serving_by(snapshot, backends, force),
            "timeout_s": timeout_s,
            "poll_s": finite_number(
                "poll_s", params.get("poll_s", POLL_S), minimum=0.01, maximum=60.0
            ),
        },
        summary=f"drain {target}: stop new work to {', '.join(names) or 'no backend'}",
        made_at=snapshot.taken_at,
    )


def _wait_idle(
    controls: Controls,
    name: str,
    deadline: float,
    poll_s: float,
    progress: Progress,
    clock: Callable[[], float],
) -> None:
    key = f"wait:{name}"
    most = 0  # the most work seen outstanding: the progress fraction counts down from it
    while True:
        rec = controls.registry.backend(name)
        inflight = (rec.inflight if rec else 0) or 0
        pending = controls.registry.pending_for(name)
        if inflight <= 0 and pending <= 0:
            progress(ProgressEvent(key, StepStatus.DONE, f"{name}: 0 in flight, 0 pending", 1.0))
            return
        outstanding = max(inflight, pending)
        most = max(most, outstanding)
        left = deadline - clock()
        silent = scheduler_silent(controls)
        counts = f"{inflight} in flight, {pending} pending{silent}"
        text = f"{name}: {counts} ({max(0.0, left):.0f} s left)"
        if left <= 0:
            progress(ProgressEvent(key, StepStatus.FAILED, f"timed out: {text}"))
            raise StepTimeout(key, f"timed out with {counts}")
        progress(ProgressEvent(key, StepStatus.RUNNING, text, 1.0 - outstanding / most))
        time.sleep(min(poll_s, max(0.0, left)))


def scheduler_silent(controls: Controls, now: Callable[[], float] = time.time) -> str:
    """``" (as the scheduler last counted …)"`` while the scheduler's heartbeat is silent: the
    counts a drain waits on are frozen then and will not reach 0 by themselves; "" while it
    beats, writes no heartbeat, or the heartbeat cannot be read (the wait reads on)."""
    try:
        beat = controls.registry.scheduler_heartbeat()
    except Exception:  # the counts were just read; their reader says what fails next
        return ""
    if beat is None:
        return ""
    age = now() - beat.at
    if age <= STALE_CADENCES * beat.every_s + SILENT_GRACE_S:
        return ""
    return (
        f" (as the scheduler {beat.scheduler} last counted {fmt_elapsed(age)} ago: its "
        "heartbeat stopped, nothing counts them down until it runs again)"
    )


def wait_step(
    controls: Controls,
    name: str,
    deadline: float,
    poll_s: float,
    progress: Progress,
    clock: Callable[[], float],
) -> None:
    """The step ``wait:name``: until ``name`` has nothing in flight or pending, or the deadline."""
    key = f"wait:{name}"
    progress(ProgressEvent(key, StepStatus.STARTED, f"waiting for {name}"))
    try:
        _wait_idle(controls, name, deadline, poll_s, progress, clock)
    except StepFailed:
        raise  # _wait_idle reported it
    except Exception as exc:  # the registry went away while we waited
        detail = f"{type(exc).__name__}: {exc}"
        progress(ProgressEvent(key, StepStatus.FAILED, detail))
        raise StepFailed(key, detail) from exc


def drain_backends(
    controls: Controls,
    names: Sequence[str],
    reason: str,
    deadline: float,
    poll_s: float,
    progress: Progress,
    clock: Callable[[], float],
    keep_serving: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Drain's steps for ``names``: all ``draining`` (weight 0), wait for each, all ``drained``.
    Raises ``StepFailed``/``StepTimeout`` naming the step that failed. ``keep_serving``: per
    backend, those of which one must still be active for its first write (nothing written
    for it otherwise: ``KeepsNoneServing``)."""
    registry = controls.registry
    owner = controls.operator
    run = step_runner(progress)
    for name in names:
        kept = tuple((keep_serving or {}).get(name, ()))
        begin = partial(registry.begin_drain, name, owner, reason, kept)
        run(f"draining:{name}", f"{name}: state=draining, weight 0", begin)
    for name in names:
        wait_step(controls, name, deadline, poll_s, progress, clock)
    for name in names:
        mark = partial(registry.mark_state, name, "drained", owner, reason)
        run(f"drained:{name}", f"{name}: state=drained", mark)


def apply_drain(
    plan: Plan, controls: Controls, progress: Progress, clock: Callable[[], float] = time.monotonic
) -> Outcome:
    names = [str(n) for n in plan.params.get("backends", [])]
    reason = str(plan.params.get("reason", DEFAULT_REASON))
    deadline = clock() + float(plan.params.get("timeout_s", DEFAULT_TIMEOUT_S))
    poll_s = float(plan.params.get("poll_s", POLL_S))
    written = _WrittenDraining(progress)
    try:
        acting = names
        if plan.params.get("node"):  # a node's drained backends stay as they are (under lock)
            acting = [n for n in names if not already_drained(controls, n, progress)]
        drain_backends(controls, acting, reason, deadline, poll_s, written, clock, kept_of(plan))
        node = plan.params.get("node")
        if node:
            _drain_node(plan, controls, written, str(node), deadline, clock)
    except StepFailed as failure:
        refused = isinstance(failure.__cause__, KeepsNoneServing)  # in its own transaction
        said = str(failure.__cause__ if refused else failure) + written.note(plan.undo)
        left = describe_state(controls, names, nothing_written=not written.wrote)
        return stopped(plan, failure, message=said, state_left=left)
    message = f"drained {', '.join(names) or plan.target}"
    return finished(plan, message, state_left=describe_state(controls, names))


class _WrittenDraining:
    """Passes progress on, noting the backends this run set ``draining`` and not ``drained``:
    a run that stops says it left them so (no new work, not drained) and what to do next."""

    def __init__(self, forward: Progress) -> None:
        self.forward = forward
        self.draining: list[str] = []
        self.wrote = False  # a step that writes (any but a wait) is done

    def __call__(self, event: ProgressEvent) -> None:
        if event.status is StepStatus.DONE:
            step, _, name = event.step.partition(":")
            self.wrote = self.wrote or step != "wait"
            if step == "draining" and name not in self.draining:
                self.draining.append(name)
            elif step == "drained" and name in self.draining:
                self.draining.remove(name)
        self.forward(event)

    def note(self, undo: str) -> str:
        """``; left draining: …`` for the backends this run left draining; "" for none."""
        if not self.draining:
            return ""
        return (
            f"; left draining (weight 0: no new work), not marked drained: "
            f"{', '.join(self.draining)}; run the drain again to finish, or undo: {undo}"
        )


def kept_of(plan: Plan) -> dict[str, list[str]]:
    """The plan's ``keep_serving`` (``headroom.kept_serving_by``): per backend it drains, the
    backends of which one must still serve for its first write."""
    kept = plan.params.get("keep_serving")
    if not isinstance(kept, Mapping):
        return {}
    return {str(k): [str(n) for n in v] for k, v in kept.items() if isinstance(v, list)}


def already_drained(controls: Controls, name: str, progress: Progress) -> bool:
    """True (its steps reported done) when ``name`` is drained already, so a drain leaves it
    as it is: drained -> draining is not a move the registry makes."""
    record = controls.registry.backend(name)
    if record is None or record.state is not BackendState.DRAINED:
        return False
    for key in (f"draining:{name}", f"wait:{name}", f"drained:{name}"):
        progress(ProgressEvent(key, StepStatus.DONE, f"{name}: drained already, left as it is"))
    return True


def _drain_node(
    plan: Plan,
    controls: Controls,
    progress: Progress,
    node: str,
    deadline: float,
    clock: Callable[[], float],
) -> None:
    run = step_runner(progress)
    kube = controls.kube
    if kube is None:
        key = f"cordon:{node}"
        progress(ProgressEvent(key, StepStatus.FAILED, "Kubernetes is not configured"))
        raise StepFailed(key, "Kubernetes is not configured")
    run(f"cordon:{node}", f"cordon {node}", lambda: kube.cordon(node))
    for pod in plan.params.get("pods", []):
        namespace, _, name = str(pod).rpartition("/")
        key = f"evict:{pod}"

        def evict(name: str = name, namespace: str = namespace, key: str = key) -> None:
            def on_progress(text: str) -> None:
                progress(ProgressEvent(key, StepStatus.RUNNING, text))

            left = deadline - clock()
            if left <= 0:
                raise StepTimeout(key, "no time left for the eviction")
            kube.evict(name, namespace or controls.kube_namespace, left, on_progress)

        run(key, f"evict {pod}", evict)


# the catalog looks these names up; undrain (its own module) is re-exported with drain
__all__ = [
    "apply",
    "apply_drain",
    "apply_undrain",
    "plan",
    "plan_drain",
    "plan_undrain",
    "recheck",
]
plan = plan_drain
apply = apply_drain
recheck = recheck_drain
