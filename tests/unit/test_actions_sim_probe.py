"""The load probe on the simulated fleet: every backend is a target, latencies come from the
simulator's model of that backend, and the same bounds, plan, guard and report apply."""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucon.actions import probe
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus
from gpucon.commands.cli import main
from gpucon.config import GpuconConfig
from gpucon.controls.base import Controls
from gpucon.controls.probe_live import LiveProber
from gpucon.errors import BadParams
from gpucon.session import demo_controls
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.probe import REFUSED, ServiceNow, draw_latency_s, service_now
from gpucon.sim.runner import DemoFleetRunner

FAST = "bert-base-b0-gi2"  # ~15 ms a request in the default fleet
SLOW = "sd15-b0-gi1"  # ~2 s a request


@pytest.fixture(scope="module")
def runner() -> Iterator[DemoFleetRunner]:
    r = DemoFleetRunner.over(build_sim_fleet(7))
    yield r
    r.stop()


@pytest.fixture
def controls(runner: DemoFleetRunner, tmp_path: Path) -> Controls:
    return demo_controls(
        GpuconConfig(audit_path=tmp_path / "audit.jsonl", operator="t@h"), runner.fleet
    )


def now(**changes: float | bool | int) -> ServiceNow:
    base = dict(
        ready=True,
        service_s=0.1,
        busy=0.0,
        concurrency=4,
        batch_slowdown=0.2,
        compute_cv=0.3,
        error_rate=0.0,
    )
    return ServiceNow(**{**base, **changes})  # type: ignore[arg-type]


def draws(model: ServiceNow, inflight: int, n: int = 4000) -> list[float]:
    rng = random.Random(1)
    out = [draw_latency_s(model, inflight, rng) for _ in range(n)]
    assert all(isinstance(x, float) for x in out)
    return [float(x) for x in out]


def test_latency_follows_the_backends_service_time_and_load() -> None:
    alone = statistics.fmean(draws(now(), 1))
    assert alone == pytest.approx(0.1, rel=0.05)  # the service time, ±5 %
    # with 2 requests already computing and this one, each is slowed by batching: 1 + 0.2·2
    assert statistics.fmean(draws(now(busy=2.0), 1)) == pytest.approx(0.14, rel=0.05)
    # 4 servers and 6 requests: it waits for a server as well
    crowded = draws(now(busy=4.0), 2)
    assert statistics.fmean(crowded) > 0.1 * (1 + 0.2 * 3) * 1.2
    # a slower slot (interference) is slower by the same factor
    assert statistics.fmean(draws(now(service_s=0.3), 1)) == pytest.approx(0.3, rel=0.05)
    # the model's variability shows in the spread
    assert statistics.pstdev(draws(now(), 1)) / alone == pytest.approx(0.3, rel=0.15)


def test_a_backend_that_is_not_ready_refuses_and_errors_fail_their_share() -> None:
    rng = random.Random(2)
    assert draw_latency_s(now(ready=False), 1, rng) == REFUSED
    results = [draw_latency_s(now(error_rate=0.25), 1, rng) for _ in range(4000)]
    share = sum(isinstance(r, str) for r in results) / len(results)
    assert share == pytest.approx(0.25, abs=0.03)


def test_the_model_read_is_the_simulators(runner: DemoFleetRunner) -> None:
    fast, slow = service_now(runner.fleet, FAST), service_now(runner.fleet, SLOW)
    assert slow.service_s > 50 * fast.service_s
    with pytest.raises(KeyError, match="nope"):
        service_now(runner.fleet, "nope")


def test_every_backend_is_a_target_in_the_demo_and_the_probe_measures_it(
    runner: DemoFleetRunner, controls: Controls, tmp_path: Path
) -> None:
    snapshot = runner.snapshot()
    plan = probe.plan(snapshot, {"target": FAST, "simulated": True, "count": 30, "rate": 60})
    assert plan.ok and plan.target == FAST and plan.blast_radius.backends == (FAST,)
    assert "simulated fleet" in plan.steps[0].text
    outcome = execute(probe.apply, plan, controls, lambda e: None)
    assert outcome.status is OutcomeStatus.OK, outcome.message
    report = outcome.details
    assert report["mode"] == "sim" and report["sent"] == 30 and report["succeeded"] == 30
    model_ms = service_now(runner.fleet, FAST).service_s * 1000
    p50 = report["latency_ms"]["p50"]
    assert 0.8 * model_ms < p50 < 2.0 * model_ms, (p50, model_ms)
    assert report["latency_ms"]["p99"] >= p50
    assert 40 < report["offered_rate"] < 80
    # the summary is a step result in the audit log, as for a live probe
    steps = [r for r in read_audit(tmp_path / "audit-demo.jsonl") if r.step == "report"]
    assert steps and "30/30 ok" in steps[0].text


def test_the_bounds_hold_in_the_demo(runner: DemoFleetRunner, controls: Controls) -> None:
    snapshot = runner.snapshot()
    with pytest.raises(BadParams, match="count: 501 exceeds the cap 500"):
        probe.plan(snapshot, {"target": FAST, "simulated": True, "count": 501})
    with pytest.raises(BadParams, match="concurrency: 17 exceeds the cap 16"):
        probe.plan(snapshot, {"target": FAST, "simulated": True, "concurrency": 17})
    with pytest.raises(BadParams, match=r"^target: no backend 'ghost'"):
        probe.plan(snapshot, {"target": "ghost", "simulated": True})
    with pytest.raises(BadParams, match=r"^via_queue:"):
        probe.plan(snapshot, {"target": FAST, "simulated": True, "via_queue": True})
    # a slow backend: 2 at once at most, the rest waits; sending stops at the duration
    plan = probe.plan(
        snapshot,
        {
            "target": SLOW,
            "simulated": True,
            "count": 200,
            "rate": 20,
            "concurrency": 2,
            "duration": 0.5,
            "timeout": 0.3,
        },
    )
    outcome = execute(probe.apply, plan, controls, lambda e: None)
    assert controls.prober is not None
    sender = controls.prober.last_sender  # type: ignore[attr-defined]
    assert sender.most_inflight == 2
    report = outcome.details
    assert report["sent"] <= 11 and report["errors"] == {"timeout": report["sent"]}
    # nothing answered within a timeout shorter than the backend's service time: the probe's
    # setting was wrong, not the backend; the verdict says so and what to change
    assert outcome.status is OutcomeStatus.OK
    assert report["verdict"]["kind"] == "too short"
    assert "raise the timeout" in report["verdict"]["text"]
    # the plan warned before anything was sent
    assert any(p.name == "timeout" and p.warning for p in plan.preconditions)


def test_a_live_fleet_still_takes_targets_only_from_the_config(
    runner: DemoFleetRunner, controls: Controls, tmp_path: Path
) -> None:
    snapshot = runner.snapshot()
    with pytest.raises(BadParams, match="not a configured probe target"):
        probe.plan(snapshot, {"target": FAST, "probe_targets": ()})
    # a demo plan given controls without the simulator's probe sends nothing anywhere
    plan = probe.plan(snapshot, {"target": FAST, "simulated": True})
    live_like = Controls(controls.registry, controls.audit, controls.operator, prober=LiveProber())
    outcome = execute(probe.apply, plan, live_like, lambda e: None)
    assert outcome.status is OutcomeStatus.REFUSED
    assert "simulated fleet" in outcome.message
    # and controls with no probe control at all (as a read-only console has none) send nothing
    no_prober = Controls(controls.registry, controls.audit, controls.operator)
    outcome = execute(probe.apply, plan, no_prober, lambda e: None)
    assert outcome.status is OutcomeStatus.REFUSED
    assert "no probe control" in outcome.message


def test_gpucon_probe_demo_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("GPUCON_AUDIT_PATH", str(tmp_path / "audit.jsonl"))
    code = main(["probe", FAST, "--demo", "--yes", "--json", "--count", "20", "--rate", "50"])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 0, lines
    assert lines[0]["plan"]["target"] == FAST
    report = lines[1]["outcome"]["details"]
    assert report["mode"] == "sim" and report["succeeded"] == 20
    assert main(["probe", "ghost", "--demo", "--yes"]) == 2
    assert "target: no backend 'ghost'" in capsys.readouterr().err
    assert main(["probe", FAST, "--demo", "--yes", "--rate", "1000"]) == 2
    assert "rate: 1000 exceeds the cap" in capsys.readouterr().err
