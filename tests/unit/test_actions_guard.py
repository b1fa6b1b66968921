"""The guard: preconditions, lock, audit order and failures that never escape as exceptions."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
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
from gpucon.errors import LockHeld
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.registry import SimRegistry


def plan(ok: bool = True, target: str = "t1", backends: tuple[str, ...] = ()) -> Plan:
    return Plan(
        "noop",
        target,
        Tier.REVERSIBLE,
        (Precondition("p", ok, "fine" if ok else "broken"),),
        (Step("one", "step one"), Step("two", "step two")),
        BlastRadius(backends),
        "nothing",
    )


def controls(tmp_path: Path, operator: str = "ann@h1") -> Controls:
    return Controls(SimRegistry(build_sim_fleet(7)), AuditLog(tmp_path / "a.jsonl"), operator)


def two_steps(p: Plan, c: Controls, progress: Progress) -> Outcome:
    for key in ("one", "two"):
        progress(ProgressEvent(key, StepStatus.STARTED, key))
        progress(ProgressEvent(key, StepStatus.DONE, f"{key} done"))
    return Outcome(p.action, p.target, OutcomeStatus.OK, "all done", p.digest)


def test_audit_has_intent_then_steps_then_outcome(tmp_path: Path) -> None:
    c = controls(tmp_path)
    seen: list[ProgressEvent] = []
    outcome = execute(two_steps, plan(), c, seen.append)
    assert outcome.ok and [s.step for s in outcome.steps] == ["one", "two"]
    assert len(seen) == 4
    log = read_audit(tmp_path / "a.jsonl")
    assert [(r.event, r.step) for r in log] == [
        ("intent", ""),
        ("step", "one"),
        ("step", "two"),
        ("outcome", ""),
    ]
    assert all(r.operator == "ann@h1" and r.digest == plan().digest for r in log)
    assert log[0].ts <= log[1].ts <= log[3].ts


def test_failed_precondition_runs_nothing(tmp_path: Path) -> None:
    calls: list[Plan] = []

    def apply(p: Plan, c: Controls, progress: Progress) -> Outcome:
        calls.append(p)
        return two_steps(p, c, progress)

    outcome = execute(apply, plan(ok=False), controls(tmp_path), lambda e: None)
    assert outcome.status is OutcomeStatus.REFUSED and "p: broken" in outcome.message
    assert calls == []
    assert [r.event for r in read_audit(tmp_path / "a.jsonl")] == ["refused"]


def test_an_exception_in_apply_becomes_an_error_outcome_and_releases_the_lock(
    tmp_path: Path,
) -> None:
    c = controls(tmp_path)

    def boom(p: Plan, c: Controls, progress: Progress) -> Outcome:
        progress(ProgressEvent("one", StepStatus.STARTED, "one"))
        raise ConnectionError("registry unreachable")

    outcome = execute(boom, plan(), c, lambda e: None)
    assert outcome.status is OutcomeStatus.ERROR
    assert "ConnectionError: registry unreachable" in outcome.message
    assert read_audit(tmp_path / "a.jsonl")[-1].status == "error"
    lease = c.registry.acquire_lock("t1", "bob@h2", "noop", 5)  # released: free again
    assert c.registry.release_lock(lease)


def test_an_unwritable_audit_log_stops_the_action_before_any_step(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocked = tmp_path / "a.jsonl"
        blocked.mkdir()  # a directory where the file should be: root cannot write it either
    else:
        blocked = tmp_path / "ro" / "a.jsonl"
        blocked.parent.mkdir()
        blocked.parent.chmod(0o500)
    c = Controls(SimRegistry(build_sim_fleet(7)), AuditLog(blocked), "ann@h1")
    calls: list[Plan] = []

    def apply(p: Plan, c: Controls, progress: Progress) -> Outcome:
        calls.append(p)
        return two_steps(p, c, progress)

    outcome = execute(apply, plan(), c, lambda e: None)
    assert outcome.status is OutcomeStatus.ERROR
    assert (
        "audit log cannot be written" in outcome.message and "nothing was done" in outcome.message
    )
    assert calls == []


def test_the_lock_is_held_and_renewed_while_the_action_runs(tmp_path: Path) -> None:
    c = controls(tmp_path)
    other = SimRegistry(c.registry.fleet)  # type: ignore[attr-defined]
    held: list[str] = []

    def slow(p: Plan, c: Controls, progress: Progress) -> Outcome:
        time.sleep(1.0)  # longer than the lock's TTL: only renewal keeps it
        try:
            other.acquire_lock(p.target, "bob@h2", "noop", 1)
        except LockHeld as exc:
            held.append(exc.holder)
        return two_steps(p, c, progress)

    outcome = execute(slow, plan(), c, lambda e: None, lock_ttl_s=0.6)
    assert outcome.ok, outcome
    assert held == ["ann@h1"]


def test_a_broken_display_does_not_break_the_action(tmp_path: Path) -> None:
    def broken(event: ProgressEvent) -> None:
        raise RuntimeError("screen gone")

    assert execute(two_steps, plan(), controls(tmp_path), broken).ok


@pytest.mark.parametrize("target", ["b1", "[red]x[/]"])
def test_lock_is_per_target(tmp_path: Path, target: str) -> None:
    c = controls(tmp_path)
    lease = c.registry.acquire_lock(target, "bob@h2", "drain", 10)
    outcome = execute(two_steps, plan(target=target), c, lambda e: None)
    assert outcome.status is OutcomeStatus.LOCK_HELD
    assert f"{target} is locked by bob@h2 (drain) since" in outcome.message
    assert execute(two_steps, plan(target="other"), c, lambda e: None).ok
    c.registry.release_lock(lease)


def test_the_blast_radius_backends_are_locked_too_all_or_nothing(tmp_path: Path) -> None:
    """A node's plan needs every backend's lock: one held by a colleague refuses all of it."""
    c = controls(tmp_path)
    bob = SimRegistry(c.registry.fleet)  # type: ignore[attr-defined]
    held = bob.acquire_lock("b2", "bob@h2", "undrain", 10)
    calls: list[Plan] = []

    def apply(p: Plan, c: Controls, progress: Progress) -> Outcome:
        calls.append(p)
        return two_steps(p, c, progress)

    node_plan = plan(target="node-a", backends=("b3", "b1", "b2"))
    outcome = execute(apply, node_plan, c, lambda e: None)
    assert outcome.status is OutcomeStatus.LOCK_HELD and calls == []
    assert "noop node-a touches b2: b2 is locked by bob@h2 (undrain) since" in outcome.message
    # b1 was taken before b2 was found held: it was given back; node-a and b3 were never taken
    for key in ("b1", "node-a", "b3"):
        bob.release_lock(bob.acquire_lock(key, "bob@h2", "probe", 10))
    assert bob.release_lock(held)
    assert execute(apply, node_plan, c, lambda e: None).ok and calls == [node_plan]


def test_a_colleague_refused_on_a_backend_learns_which_action_holds_it(tmp_path: Path) -> None:
    c = controls(tmp_path)
    bob = SimRegistry(c.registry.fleet)  # type: ignore[attr-defined]
    refusals: list[str] = []

    def inside(p: Plan, c: Controls, progress: Progress) -> Outcome:
        for key in ("b1", "node-a"):
            try:
                bob.acquire_lock(key, "bob@h2", "undrain", 10)
            except LockHeld as exc:
                refusals.append(f"{exc.target}:{exc.holder}:{exc.action}")
        return two_steps(p, c, progress)

    outcome = execute(inside, plan(target="node-a", backends=("b1",)), c, lambda e: None)
    assert outcome.ok
    assert refusals == ["b1:ann@h1:noop node-a", "node-a:ann@h1:noop"]
    for key in ("b1", "node-a"):  # all released when the action ended
        bob.release_lock(bob.acquire_lock(key, "bob@h2", "probe", 10))


def test_every_lock_is_renewed_while_the_action_runs(tmp_path: Path) -> None:
    c = controls(tmp_path)
    bob = SimRegistry(c.registry.fleet)  # type: ignore[attr-defined]
    held: list[str] = []

    def slow(p: Plan, c: Controls, progress: Progress) -> Outcome:
        time.sleep(1.0)  # longer than the locks' TTL: only renewal keeps them
        for key in ("b1", "b2", "node-a"):
            try:
                bob.acquire_lock(key, "bob@h2", "noop", 1)
            except LockHeld:
                held.append(key)
        return two_steps(p, c, progress)

    node_plan = plan(target="node-a", backends=("b1", "b2"))
    assert execute(slow, node_plan, c, lambda e: None, lock_ttl_s=0.6).ok
    assert held == ["b1", "b2", "node-a"]
