"""A test rig: the hand-built fleet behind a real Hub with a frozen clock, and the app on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.model.snapshot import Snapshot
from gpucon.widgets.slot_table import SlotTable
from tests.ui.fleet_fixture import FrozenClock, HandSource, advance, hub_with


@dataclass
class Rig:
    source: HandSource = field(default_factory=HandSource)
    clock: FrozenClock = field(default_factory=FrozenClock)
    hub: Hub | None = None

    def __post_init__(self) -> None:
        self.hub = hub_with(self.source, self.clock)

    def step(self, steps: int = 1) -> Snapshot:
        assert self.hub is not None
        return advance(self.hub, self.source, self.clock, steps)

    def app(self, warmup: int = 30, **options: Any) -> GpuconApp:
        """The app on this rig's hub after ``warmup`` ticks; the hub thread is never started."""
        assert self.hub is not None
        if warmup:
            self.step(warmup)
        return GpuconApp(self.hub, autostart=False, clock=self.clock, **options)


def table_of(app: GpuconApp) -> SlotTable:
    return app.screen.query_one(SlotTable)


def table_lines(app: GpuconApp) -> list[str]:
    table = table_of(app)
    return [table.render_line(y).text for y in range(table.size.height)]
