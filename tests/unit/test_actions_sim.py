"""The same actions on the simulated fleet: drain moves the demo's traffic, locks contend."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gpucon.actions import drain, rebalance
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus
from gpucon.config import GpuconConfig
from gpucon.controls.base import ReadOnlyError
from gpucon.errors import LockHeld
from gpucon.model.fleet import BackendState
from gpucon.session import demo_controls
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.registry import SimRegistry
from gpucon.sim.runner import DemoFleetRunner


def test_a_read_only_demo_session_refuses_to_build_controls(tmp_path: Path) -> None:
    from gpucon.session import DemoOptions, open_session

    session = open_session(
        GpuconConfig(audit_path=tmp_path / "a.jsonl"), demo=DemoOptions(), read_only=True
    )
    assert session.controls_factory is None
    with pytest.raises(ReadOnlyError):
        session.controls()
    assert not (tmp_path / "a.jsonl").exists()


def test_drain_in_the_demo_moves_traffic_and_undrain_restores(tmp_path: Path) -> None:
    runner = DemoFleetRunner(build_sim_fleet(7))
    fleet = runner.fleet
    fleet.step(30.0)
    snapshot = runner.snapshot()
    name = next(
        n for n, b in snapshot.backends.items() if b.state is BackendState.ACTIVE and b.weight
    )
    weight = snapshot.backends[name].weight
    controls = demo_controls(GpuconConfig(audit_path=tmp_path / "a.jsonl"), fleet)
    plan = drain.plan_drain(snapshot, {"backend": name, "timeout_s": 30, "poll_s": 0.01})

    # the sim advances in the background, as in the demo, so in-flight work finishes
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.005):
            fleet.step(0.5)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        outcome = execute(drain.apply_drain, plan, controls, lambda e: None)
    finally:
        stop.set()
        ticker.join()
    assert outcome.ok, outcome
    b = fleet.backend(name)
    assert b.state is BackendState.DRAINED and b.weight == 0.0 and b.inflight == 0
    assert b.owner == controls.operator
    fleet.step(10.0)
    assert fleet.backend(name).inflight == 0  # no new work reaches it
    assert read_audit(tmp_path / "a-demo.jsonl")[0].event == "intent"
    assert not (tmp_path / "a.jsonl").exists()  # the demo never writes the live file

    undo = drain.plan_undrain(runner.snapshot(), {"backend": name})
    assert execute(drain.apply_undrain, undo, controls, lambda e: None).ok
    b = fleet.backend(name)
    assert b.state is BackendState.ACTIVE and b.weight == weight


def test_sim_locks_and_stale_rebalance(tmp_path: Path) -> None:
    fleet = build_sim_fleet(7)
    ann, bob = SimRegistry(fleet), SimRegistry(fleet)
    lease = ann.acquire_lock("x", "ann@h1", "drain", 10)
    with pytest.raises(LockHeld, match="x is locked by ann@h1 \\(drain\\)"):
        bob.acquire_lock("x", "bob@h2", "drain", 10)
    assert ann.release_lock(lease)
    assert not ann.release_lock(lease)

    runner = DemoFleetRunner(fleet)
    snapshot = runner.snapshot()
    version = fleet.registry_version()
    names = sorted(snapshot.backends)[:2]
    stale = rebalance.plan_rebalance(
        snapshot, {"weights": {names[0]: 3.0}, "registry_version": version}
    )
    fleet.set_weights({names[1]: 2.0})  # someone else wrote since
    controls = demo_controls(GpuconConfig(audit_path=tmp_path / "a.jsonl"), fleet)
    outcome = execute(rebalance.apply_rebalance, stale, controls, lambda e: None)
    assert outcome.status is OutcomeStatus.REFUSED
    assert fleet.backend(names[0]).weight != 3.0
