"""A steady fleet sends its terminal almost nothing; a changed value sends only its cells.

A NOC wall over SSH watches a fleet that is mostly steady. The hand-built fleet (with a sick
GPU, so that the alert and GPU panels are full) is read through a real Hub each second with
its values held still, and every screen update the app makes is played onto a character grid
(tests/ui/terminal_spy.py): after the first frames, a tick of a steady fleet writes nothing
but the coarse ages' steps, and a tick in which one GPU's temperature changed writes only that
GPU's line of the GPU panel. What the terminal was left showing is then compared with a
full repaint of every widget, so a skipped repaint cannot pass as a saving.
"""

from __future__ import annotations

import dataclasses
import statistics

import msgspec

from gpucon.model.reading import Reading
from tests.ui.fleet_fixture import FrozenClock, HandSource
from tests.ui.rig import Rig
from tests.ui.terminal_spy import TerminalSpy

SIZE = (180, 50)
TICKS = 30
# long enough for every alert the held values raise to have come (queue wait held 60 s)
WARMUP = 70


@dataclasses.dataclass
class SteadySource:
    """The hand-built fleet frozen at one step, each read fresh (stamped now); ``warming``
    (when set) is the H200 whose temperature rises a degree a read."""

    clock: FrozenClock
    name: str = "hand"
    cadence_s: float = 1.0
    timeout_s: float = 1.0
    warming: str | None = None
    reads: int = 0
    inner: HandSource = dataclasses.field(default_factory=lambda: HandSource(gpu_trouble=True))

    def read(self) -> Reading:
        self.reads += 1
        reading = msgspec.structs.replace(self.inner.read(), taken_at=self.clock.now)
        if self.warming is None:
            return reading
        gpus = tuple(
            msgspec.structs.replace(g, temperature_c=40.0 + self.reads % 40)
            if g.uuid == self.warming
            else g
            for g in reading.gpus
        )
        return msgspec.structs.replace(reading, gpus=gpus)

    def close(self) -> None:
        """Nothing to close."""


async def run_ticks(
    source: SteadySource,
) -> tuple[list[list[int]], list[int], list[str], list[str]]:
    """Cells written per line for each of ``TICKS`` ticks after the first frames, bytes per
    tick, and the terminal's rows before and after a full repaint of every widget."""
    rig = Rig(source=source, clock=source.clock)
    app = rig.app(warmup=WARMUP)
    spy = TerminalSpy(app)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(3):  # the first frames, and the first ticks' one-off repaints
            app.show_snapshot(rig.step())
            await pilot.pause()
        spy.take()
        lines: list[list[int]] = []
        sent: list[int] = []
        for _ in range(TICKS):
            app.show_snapshot(rig.step())
            await pilot.pause()
            frames = spy.take()
            lines.append(sorted({y for f in frames for y in f.lines}))
            sent.append(sum(f.bytes for f in frames))
        shown = spy.rows(*SIZE)
        for widget in app.screen.query("*"):
            widget.refresh()
        await pilot.pause()
        assert spy.take(), "the full repaint was not written"
        return lines, sent, shown, spy.rows(*SIZE)


async def test_a_steady_fleet_writes_next_to_nothing() -> None:
    lines, sent, shown, repainted = await run_ticks(SteadySource(FrozenClock()))
    # most ticks write nothing: the alerts' coarse ages step every 10 s (on a tick or two:
    # the alerts began on different seconds), and an alert that held for its time comes
    assert statistics.median(len(ys) for ys in lines) == 0, lines
    assert sum(1 for ys in lines if ys) <= TICKS // 3, lines
    # under 100 bytes a second on average (each alert's age step is its first few cells;
    # the alerts panel rewritten whole, as it was, is 2.6 kB)
    assert sum(sent) < 100 * TICKS, sent
    assert shown == repainted


async def test_a_changed_value_writes_only_its_line() -> None:
    source = SteadySource(FrozenClock(), warming="GPU-gpu-a-1")
    lines, sent, shown, repainted = await run_ticks(source)
    # the H200's line of the GPU panel, and nothing else, on the ticks without an age step
    changed = [ys for ys in lines if len(ys) == 1]
    assert len(changed) >= TICKS - TICKS // 3, lines
    assert len({ys[0] for ys in changed}) == 1, lines
    (row,) = {ys[0] for ys in changed}
    assert "H200" in shown[row] or "gpu-a/gpu1" in shown[row], shown[row]
    assert statistics.median(sent) < 200, sent
    assert shown == repainted
