"""Test rigs: a fleet behind a real Hub with a frozen clock, and the app on it.

``Rig`` runs the hand-built fleet (tests/ui/fleet_fixture.py); ``sim_rig`` runs the simulator
with a fixed seed. Both advance by polling and ticking the hub in the test's thread; the
hub's background thread is never started. ``StaticFeed`` holds one snapshot a test read itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, TypeVar, Unpack

from textual.pilot import Pilot

from gpucon.app import GpuconApp
from gpucon.config import GpuconConfig
from gpucon.controls.base import Controls
from gpucon.hub import Hub
from gpucon.model.snapshot import Snapshot
from gpucon.sim import DEMO_RATE_WINDOW, DEMO_SLO_P95_MS
from gpucon.sim.source import SimSource
from gpucon.sources.base import Source
from gpucon.widgets.slot_table import SlotTable
from tests.ui.fleet_fixture import FrozenClock, HandSource

R = TypeVar("R")


class AppOptions(TypedDict, total=False):
    """What a test may set on the app beyond the rig's feed and clock."""

    mode: str
    read_only: bool
    noc: bool
    theme: str | None
    keys: Mapping[str, str] | None
    controls: Controls | None
    controls_factory: Callable[[], Controls] | None
    fleet_name: str
    default_slo_ms: float
    page_s: float
    config: GpuconConfig | None


@dataclass
class Rig:
    source: Source = field(default_factory=HandSource)
    clock: FrozenClock = field(default_factory=FrozenClock)
    slo_p95_ms: dict[str, float] = field(default_factory=dict)
    rate_window: str | None = None
    hub: Hub = field(init=False)

    def __post_init__(self) -> None:
        self.hub = Hub(
            [self.source],
            refresh_s=1.0,
            clock=self.clock,
            slo_p95_ms_by_model=self.slo_p95_ms,
            rate_window=self.rate_window,
        )

    def step(self, steps: int = 1) -> Snapshot:
        """Advance the fleet and the clock one second ``steps`` times; the newest snapshot."""
        snapshot: Snapshot | None = None
        for _ in range(steps):
            if isinstance(self.source, HandSource):
                self.source.step += 1
            self.clock.now += 1.0
            self.hub.poll_once()
            snapshot = self.hub.tick()
        assert snapshot is not None
        return snapshot

    def app(self, warmup: int = 30, **options: Unpack[AppOptions]) -> GpuconApp:
        """The app on this rig's hub after ``warmup`` ticks."""
        if warmup:
            self.step(warmup)
        return GpuconApp(self.hub, autostart=False, clock=self.clock, **options)


@dataclass
class StaticFeed:
    """A feed holding one snapshot the test read itself (from a real registry, say)."""

    latest: Snapshot | None

    def start(self, on_snapshot: Callable[[Snapshot], None]) -> None:
        """Nothing to start: the test shows newer snapshots with ``app.show_snapshot``."""

    def stop(self) -> None:
        """Nothing runs."""


async def wait_until(
    pilot: Pilot[R],
    check: Callable[[], bool],
    timeout_s: float = 10.0,
    step: Callable[[], object] | None = None,
) -> None:
    """Let the app run until ``check()`` holds (``step()`` between looks), or fail at the
    deadline: tests wait on conditions, never on fixed sleeps."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        if step is not None:
            step()
        await pilot.pause(0.02)


def sim_rig(seed: int = 7, scenario: str | None = None, size: int | None = None) -> Rig:
    clock = FrozenClock()
    source = SimSource.for_demo(seed, scenario, size, clock=clock)
    return Rig(
        source=source,
        clock=clock,
        slo_p95_ms=dict(DEMO_SLO_P95_MS),
        rate_window=DEMO_RATE_WINDOW,
    )


class DemoConsole(NamedTuple):
    """The demo's console with its write side: the app, the simulated fleet it acts on, and the
    controls (audit under the test's tmp directory)."""

    app: GpuconApp
    fleet: Any
    controls: Controls


def demo_console(tmp_path: Path, operator: str | None = "demo@test") -> DemoConsole:
    """The default simulated fleet's console with the demo's controls, as `gpucon demo`
    builds it."""
    from gpucon.session import demo_controls

    rig = sim_rig()
    source: Any = rig.source
    audit = tmp_path / "audit.jsonl"
    config = (
        GpuconConfig(audit_path=audit, operator=operator)
        if operator
        else GpuconConfig(audit_path=audit)
    )
    controls = demo_controls(config, source.fleet)
    return DemoConsole(rig.app(controls=controls), source.fleet, controls)


def table_of(app: GpuconApp) -> SlotTable:
    return app.screen.query_one(SlotTable)


def table_lines(app: GpuconApp) -> list[str]:
    table = table_of(app)
    return [table.render_line(y).text for y in range(table.size.height)]
