"""The guard under the lock: preconditions checked again on fresh state, leases that fail safe.

On the simulated registry (the demo's write side); the same paths against a real
redis-server are in tests/integration (test_concurrent_drains, test_lease_lost).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gpucon.actions import drain
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.lease import LockKeeper
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
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.registry import SimRegistry
from gpucon.sim.runner import DemoFleetRunner


def noop_plan(target: str = "t1") -> Plan:
    return Plan(
        "noop",
        target,
        Tier.REVERSIBLE,
        (Precondition("p", True, "fine"),),
        (Step("one", "step one"), Step("two", "step two")),
        BlastRadius(),
        "nothing",
    )


def controls(tmp_path: Path, registry: SimRegistry | None = None) -> Controls:
    registry = registry or SimRegistry(build_sim_fleet(7))
    return Controls(registry, AuditLog(tmp_path / "a.jsonl"), "ann@h1")


def never(p: Plan, c: Controls, progress: Progress) -> Outcome:
    raise AssertionError("apply must not run")


def test_a_failed_recheck_refuses_before_the_intent_and_frees_the_lock(tmp_path: Path) -> None:
    c = controls(tmp_path)
    seen: list[Plan] = []

    def recheck(plan: Plan, ctl: Controls) -> list[str]:
        seen.append(plan)
        # the check runs under the lock: nobody else can take it meanwhile
        with pytest.raises(Exception, match="t1 is locked by ann@h1"):
            ctl.registry.acquire_lock("t1", "bob@h2", "noop", 5)
        return ["t1 is drained already (set by bob@h2: maintenance)"]

    outcome = execute(never, noop_plan(), c, lambda e: None, recheck=recheck)
    assert seen and outcome.status is OutcomeStatus.REFUSED and outcome.exit_code == 3
    assert outcome.message == (
        "the fleet changed since the plan was made: t1 is drained already "
        "(set by bob@h2: maintenance); nothing was done"
    )
    assert [(r.event, r.status) for r in read_audit(tmp_path / "a.jsonl")] == [
        ("refused", "refused")
    ]
    c.registry.release_lock(c.registry.acquire_lock("t1", "bob@h2", "noop", 5))


def test_a_recheck_that_cannot_read_is_an_error_and_does_nothing(tmp_path: Path) -> None:
    def unreachable(plan: Plan, ctl: Controls) -> list[str]:
        raise ConnectionError("registry unreachable")

    outcome = execute(never, noop_plan(), controls(tmp_path), lambda e: None, recheck=unreachable)
    assert outcome.status is OutcomeStatus.ERROR
    assert "could not re-read t1 under the lock" in outcome.message
    assert "nothing was done" in outcome.message
    assert not (tmp_path / "a.jsonl").exists()  # no intent


def test_a_stale_drain_plan_is_refused_naming_who_drained_it(tmp_path: Path) -> None:
    runner = DemoFleetRunner.over(build_sim_fleet(7))
    try:
        snapshot = runner.snapshot()
        name = next(n for n, b in sorted(snapshot.backends.items()) if b.state == "active")
        params = {"backend": name, "timeout_s": 30, "poll_s": 0.02, "force": True}
        first = drain.plan_drain(snapshot, {**params, "reason": "bad fan"})
        stale = drain.plan_drain(snapshot, params)  # made while it was still active
        registry = SimRegistry(runner.fleet)
        bob = Controls(registry, AuditLog(tmp_path / "bob.jsonl"), "bob@h2")
        assert execute(drain.apply_drain, first, bob, lambda e: None).ok
        outcome = execute(drain.apply_drain, stale, controls(tmp_path, registry), lambda e: None)
    finally:
        runner.stop()
    assert outcome.status is OutcomeStatus.REFUSED
    assert f"{name} is drained already (set by bob@h2: bad fan): nothing to do" in outcome.message
    assert [r.event for r in read_audit(tmp_path / "a.jsonl")] == ["refused"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_that_expires_stops_the_action_at_the_next_step(tmp_path: Path) -> None:
    clock = Clock()
    c = controls(tmp_path, SimRegistry(build_sim_fleet(7), clock=clock))
    ran: list[str] = []
    lost = threading.Event()

    def apply(p: Plan, ctl: Controls, progress: Progress) -> Outcome:
        progress(ProgressEvent("one", StepStatus.STARTED, "one"))
        ran.append("one")
        clock.now += 60  # the lease lapses (a stalled process); bob takes the lock
        ctl.registry.acquire_lock("t1", "bob@h2", "noop", 60)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not lost.is_set():
            try:  # each poll is a step boundary
                progress(ProgressEvent("one", StepStatus.RUNNING, "waiting"))
            except Exception as exc:
                lost.set()
                # as drain's steps do: report the failure (the guard records it once) and stop
                progress(ProgressEvent("one", StepStatus.FAILED, str(exc)))
                raise
            time.sleep(0.01)
        ran.append("two")
        return Outcome(p.action, p.target, OutcomeStatus.OK, "done", p.digest)

    outcome = execute(apply, noop_plan(), c, lambda e: None, lock_ttl_s=0.3)
    assert ran == ["one"]
    assert outcome.status is OutcomeStatus.FAILED and outcome.exit_code == 5
    assert outcome.message.startswith("stopped before 'one': the lock was lost (t1: ")
    assert "expired or was taken over" in outcome.message
    assert outcome.details["lease_lost"]["targets"] == ["t1"]
    assert [(s.step, s.ok) for s in outcome.steps] == [("one", False)]
    events = [(r.event, r.step, r.status) for r in read_audit(tmp_path / "a.jsonl")]
    assert events[-2:] == [("step", "one", "failed"), ("outcome", "", "failed")]


class StallingRegistry(SimRegistry):
    """Renewals that hang (a Redis that stopped answering) once ``stall`` is set."""

    stall = threading.Event()

    def renew_lock(self, lease: object, ttl_s: float) -> bool:  # type: ignore[override]
        if self.stall.is_set():
            time.sleep(2.0)
            raise TimeoutError("Timeout reading from socket")
        return super().renew_lock(lease, ttl_s)  # type: ignore[arg-type]


def test_a_late_renewal_marks_the_lease_lost_before_it_returns(tmp_path: Path) -> None:
    registry = StallingRegistry(build_sim_fleet(7))
    c = controls(tmp_path, registry)
    lease = registry.acquire_lock("t1", "ann@h1", "noop", 0.6)
    with LockKeeper(c, [lease], 0.6) as keeper:
        time.sleep(0.3)
        assert keeper.lost_why() is None
        registry.stall.set()
        stalled = time.monotonic()
        while keeper.lost_why() is None:
            assert time.monotonic() - stalled < 1.5, "the lease was never marked lost"
            time.sleep(0.01)
        # overdue (an interval and a grace, within 90 % of the TTL: 0.54 s) long before the
        # stuck call returns
        assert time.monotonic() - stalled < 1.0
        assert "no renewal succeeded for" in (keeper.lost_why() or "")
        registry.stall.clear()
