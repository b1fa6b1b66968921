"""The plan's editable params: values shown, the plan made again, refusals named in place."""

from __future__ import annotations

from collections.abc import Mapping

from textual.widgets import Input, Static

from gpucon.actions import probe
from gpucon.actions.plan import Plan
from gpucon.config import ProbeTarget
from gpucon.model.fleet import Backend, LatencyStats
from gpucon.model.snapshot import Snapshot
from gpucon.screens.plan import PlanScreen
from tests.ui.test_plan_warn import Host

TARGET = ProbeTarget("b", "http://127.0.0.1:1", "llm")
SNAP = Snapshot(
    taken_at=1.0,
    backends={"b": Backend("b", model="llm")},
    latency={"b": LatencyStats("b", req_per_s=5.0, p50_ms=18.0, p95_ms=27.0)},
)


def replan(edits: Mapping[str, object]) -> Plan:
    return probe.plan(SNAP, {"target": "b", "probe_targets": (TARGET,), **edits})


async def test_edits_remake_the_plan_and_a_broken_plan_is_said_not_raised() -> None:
    plan = replan({})
    app = Host()
    calls: list[Mapping[str, object]] = []

    def flaky(edits: Mapping[str, object]) -> Plan:
        calls.append(edits)
        if edits.get("count") == "13":
            raise RuntimeError("registry went away")
        return replan(edits)

    async with app.run_test(size=(120, 50)) as pilot:
        screen = PlanScreen(plan, editable=probe.EDITABLE, replan=flaky)
        app.push_screen(screen, app.answers.append)
        await pilot.pause()
        # the defaults from its 18 ms service time, shown in the form
        assert screen.query_one("#param-count", Input).value == "200"
        assert screen.query_one("#param-rate", Input).value == "20"
        assert screen.query_one("#param-timeout", Input).value == "10"
        # Enter in a field makes the plan again: the form then shows what the plan holds
        count = screen.query_one("#param-count", Input)
        count.value = "50"
        count.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert screen.plan.params["count"] == 50 and app.answers == []
        assert "send up to 50 requests" in str(screen.query_one("#plan-body", Static).render())
        # an error that is not a refusal is shown under the form, the screen stays
        count.value = "13"
        await pilot.click("#confirm")
        await pilot.pause()
        error = str(screen.query_one("#param-error", Static).render())
        assert error == "RuntimeError: registry went away" and app.answers == []
        assert screen.plan.params["count"] == 50  # the last good plan is kept
        count.value = "50"
        await pilot.pause(0.3)  # a button ignores clicks while it shows the last one
        await pilot.click("#confirm")
        await pilot.pause()
        assert app.answers == [True] and screen.plan.params["count"] == 50


async def test_a_plan_without_editable_params_has_no_form() -> None:
    app = Host()
    async with app.run_test(size=(120, 50)) as pilot:
        app.push_screen(PlanScreen(replan({})), app.answers.append)
        await pilot.pause()
        assert not app.screen.query("#plan-params")
