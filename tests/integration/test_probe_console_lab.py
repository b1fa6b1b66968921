"""The console's `p` on a live fleet (the lab stack): its plan, edited params, progress from the
first request, and p50/p95/p99 of real requests that the backend's own log counts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from gpucon.actions.audit import read_audit
from gpucon.actions.plan import StepStatus
from gpucon.app import GpuconApp
from gpucon.config import load_config
from gpucon.lab.lab import LabStack
from gpucon.session import open_session
from tests.helpers.lab_stack import served, start_lab
from tests.ui.action_pilot import confirm_plan, open_plan
from tests.ui.rig import wait_until

pytestmark = pytest.mark.integration

SIZE = (160, 45)


@contextmanager
def lab_console(lab: LabStack) -> Iterator[GpuconApp]:
    """The live console on the lab's fleet, with its controls (a session refreshing every
    0.5 s, closed on exit)."""
    assert lab.config_path is not None
    config = load_config(lab.config_path, env={})
    session = open_session(config, refresh_s=0.5)
    try:
        yield GpuconApp(
            session.hub, mode="live", controls=session.controls(), config=config,
            fleet_name=session.fleet_name,
        )  # fmt: skip
    finally:
        session.close()


async def test_probe_key_on_the_lab_sends_real_requests_and_reports_quantiles(
    redis_url: str, tmp_path: Path
) -> None:
    with start_lab(redis_url, tmp_path / "lab", backends=2, service_ms=10) as lab:
        assert lab.config_path is not None
        url = lab.backends[0].url
        with lab_console(lab) as app:
            async with app.run_test(size=SIZE) as pilot:
                await wait_until(
                    pilot, lambda: app.snapshot is not None and bool(app.snapshot.backends), 20.0
                )
                await pilot.press("slash", *"lab-b0", "enter")
                await pilot.pause()
                screen = await open_plan(pilot, "p", timeout_s=20.0)
                plan = screen.plan
                assert plan.target == "lab-b0" and plan.ok
                assert f"directly to {url}" in plan.steps[0].text
                # a bad value is named, and nothing reaches the backend
                screen.query_one("#param-rate", Input).value = "-3"
                await pilot.click("#confirm")
                await pilot.pause()
                error = str(screen.query_one("#param-error", Static).render())
                assert app.screen is screen and error.startswith("rate: must be"), error
                assert served(url) == []
                for name, value in (("count", "40"), ("rate", "20"), ("concurrency", "2")):
                    screen.query_one(f"#param-{name}", Input).value = value
                await pilot.pause(0.3)  # a button ignores clicks while it shows the last one
                progress = await confirm_plan(pilot, timeout_s=20.0)
                seen: list[str] = []

                def watch() -> bool:
                    line = progress.lines.get("probe")
                    if line is not None and line[0] is StepStatus.RUNNING:
                        seen.append(line[1])
                    return progress.finished

                await wait_until(pilot, watch, timeout_s=30.0)
                outcome = progress.outcome
                assert outcome is not None and outcome.ok, outcome
                report = outcome.details
                assert report["mode"] == "direct" and report["bounds"]["count"] == 40
                assert report["succeeded"] == 40 and report["errors"] == {}
                lat = report["latency_ms"]
                assert all(lat[q] is not None for q in ("p50", "p95", "p99"))
                assert 10.0 <= lat["p50"] <= lat["p95"] <= lat["p99"]  # 10 ms service time
                assert 15.0 <= report["offered_rate"] <= 21.0
                shown = progress.outcome_text().plain
                assert "40/40 ok" in shown and "of 20/s planned" in shown
                assert report["verdict"]["kind"] in ("ok", "slow")
                # progress came while it ran, from the first requests on
                assert seen and "done (" in seen[0] and "/40 done" in seen[0]
        assert len(served(url)) == 40  # real requests, counted by the backend itself
        assert served(lab.backends[1].url) == []
        records = read_audit(lab.directory / "audit.jsonl")
        assert [r.event for r in records][-1] == "outcome" and records[-1].status == "ok"
        assert {r.fleet for r in records} == {"lab"}


async def test_probe_of_a_killed_lab_backend_warns_and_stops_early(
    redis_url: str, tmp_path: Path
) -> None:
    from gpucon.controls.probe import STOP_AFTER_CONNECT_ERRORS
    from tests.integration.test_liveness import kill_hard, process_of

    with start_lab(redis_url, tmp_path / "lab", backends=2, service_ms=10) as lab:
        assert lab.config_path is not None
        kill_hard(process_of(lab, "lab-b1"))
        with lab_console(lab) as app:
            async with app.run_test(size=SIZE) as pilot:

                def dead() -> bool:
                    live = app.snapshot.liveness.get("lab-b1") if app.snapshot else None
                    return live is not None and live.serving is False

                await wait_until(pilot, dead, 20.0)
                await pilot.press("slash", *"lab-b1", "enter")
                await pilot.pause()
                screen = await open_plan(pilot, "p", timeout_s=20.0)
                warned = {p.name: p.text for p in screen.plan.warnings}
                assert "is active but NOT READY (" in warned["backend"], screen.plan.preconditions
                assert "a direct probe reaches it" not in warned["backend"]
                assert screen.plan.params["count"] > STOP_AFTER_CONNECT_ERRORS
                await pilot.pause(0.3)
                progress = await confirm_plan(pilot, timeout_s=20.0)
                await wait_until(pilot, lambda: progress.finished, timeout_s=30.0)
                outcome = progress.outcome
                assert outcome is not None and not outcome.ok
                report = outcome.details
                # stopped after the first refused connections, not the whole count
                bounds = report["bounds"]
                assert report["sent"] <= STOP_AFTER_CONNECT_ERRORS + bounds["concurrency"]
                assert report["sent"] < bounds["count"]
                assert report["succeeded"] == 0
                assert sum(report["errors"].values()) >= STOP_AFTER_CONNECT_ERRORS
                assert report["verdict"]["kind"] == "failing"
                assert "stopped early" in report["verdict"]["text"]
                assert "stopped early" in progress.outcome_text().plain
