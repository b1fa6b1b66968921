"""``gpucon mps-restart`` in the demo (the simulated VM's daemon and servers) and its refusals:
the plan in full, a brief outage the console sees (daemon down, servers not ready), recovery,
read-only refusal, an unknown target named, and --dry-run changing nothing."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from gpucon.actions import mps_restart
from gpucon.actions.guard import execute
from gpucon.commands.cli import main
from gpucon.config import GpuconConfig
from gpucon.model.fleet import BackendState
from gpucon.session import demo_controls
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.mps import demo_daemons
from gpucon.sim.runner import DemoFleetRunner


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCON_AUDIT_PATH", str(tmp_path / "audit.jsonl"))
    monkeypatch.setenv("GPUCON_OPERATOR", "cli@test")


def test_demo_dry_run_prints_the_whole_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mps-restart", "vm-b-1", "--demo", "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    keys = [s["key"] for s in plan["steps"]]
    assert keys[:2] == ["draining:sd15-vm-b-1", "draining:sdxl-vm-b-1"]
    for key in ("quit-daemon", "start-daemon", "thread-pct", "pinned-mem", "probe"):
        assert key in keys
    texts = " ".join(s["text"] for s in plan["steps"])
    assert "60% of the SMs" in texts and "40% of the SMs" in texts
    assert plan["tier"] == 2 and plan["blast_radius"]["backends"] == [
        "sd15-vm-b-1",
        "sdxl-vm-b-1",
    ]


def test_unknown_target_and_read_only_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mps-restart", "vm-nope", "--demo", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "vm-nope" in err and "vm-b-1" in err
    assert main(["--read-only", "mps-restart", "vm-b-1", "--demo", "--yes"]) == 3
    assert "read-only" in capsys.readouterr().err


def test_demo_restart_shows_an_outage_and_recovers(tmp_path: Path) -> None:
    fleet = build_sim_fleet()
    runner = DemoFleetRunner.over(fleet)
    try:
        (daemon,) = [d for d in demo_daemons(fleet) if d.target == "vm-b-1"]
        params = {"target": "vm-b-1", "daemon": mps_restart.daemon_params(daemon)}
        plan = mps_restart.plan_mps_restart(runner.snapshot(), params)
        controls = demo_controls(GpuconConfig(audit_path=tmp_path / "a.jsonl"), fleet)
        seen: list[tuple[bool | None, bool | None]] = []
        done = threading.Event()

        def watch() -> None:  # what the console would read while it runs
            while not done.is_set():
                snap = runner.snapshot()
                vm = snap.slots["vm:vm-b-1"].vm
                assert vm is not None and vm.mps is not None
                seen.append((vm.mps.daemon_running, snap.backends["sdxl-vm-b-1"].ready))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        outcome = execute(mps_restart.apply, plan, controls, lambda e: None)
        done.set()
        watcher.join()
        assert outcome.ok, outcome.message
        assert (False, False) in seen, "the daemon was seen down with its server not ready"
        after = runner.snapshot()
        assert after.backends["sdxl-vm-b-1"].state is BackendState.ACTIVE
        assert after.backends["sdxl-vm-b-1"].ready is True
        vm = after.slots["vm:vm-b-1"].vm
        assert vm is not None and vm.mps is not None and vm.mps.daemon_running is True
        assert outcome.details["outage_s"] is not None and outcome.details["outage_s"] > 1.0
    finally:
        runner.stop()
