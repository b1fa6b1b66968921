"""A plan with a warning: the WARN line stands out, the plan can still be confirmed."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Button, Static

from gpucon.actions import drain
from gpucon.model.fleet import Backend, LatencyStats, Slot, SlotKind
from gpucon.model.snapshot import Snapshot
from gpucon.screens.plan import PlanScreen


class Host(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[bool | None] = []

    def compose(self) -> ComposeResult:
        yield Static("host")


def hot_fleet() -> Snapshot:
    backends = {
        f"b{i}": Backend(f"b{i}", slot_id=f"s{i}", model="sdxl", weight=1.0) for i in range(3)
    }
    return Snapshot(
        taken_at=1.0,
        backends=backends,
        slots={f"s{i}": Slot(f"s{i}", SlotKind.MIG, activity_pct=100.0) for i in range(3)},
        latency={n: LatencyStats(n, req_per_s=0.2, p95_ms=56000.0) for n in backends},
        slo_p95_ms={n: 14000.0 for n in backends},
    )


async def test_a_warned_drain_shows_warn_and_can_still_be_confirmed() -> None:
    plan = drain.plan_drain(hot_fleet(), {"backend": "b0"})
    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(PlanScreen(plan), app.answers.append)
        await pilot.pause()
        body = str(app.screen.query_one("#plan-body", Static).render())
        said = " WARN  headroom:sdxl: 2 backends take its 0.2 req/s (of sdxl's 0.6/s): no headroom"
        assert said in body
        warned = str(app.screen.query_one("#plan-verdict", Static).render())
        assert warned.startswith("1 warning(s): it can be applied")
        confirm = app.screen.query_one("#confirm", Button)
        assert not confirm.disabled
        await pilot.click("#confirm")
        await pilot.pause()
        assert app.answers == [True]
