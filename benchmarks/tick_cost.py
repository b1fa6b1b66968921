"""Cost of one tick at 8, 64 and 512 GPUs: merge (hub), then diff + render (the console).

Run: ``.venv/bin/python -m benchmarks.tick_cost [--ticks 40]``. The simulator advances one
second per tick with a frozen clock; the console runs headless at 180×50 with no background
thread, so each phase is timed alone, in CPU time of this process:

- merge:  ``Hub.tick()`` — merge readings, history rings, alert rules (simulator excluded);
- diff + render: ``GpuconApp.show_snapshot()`` plus the screen update it causes, and the
  number of slot-table rows drawn (cache misses).

Prints median and p90 per phase, and the 512/8 ratio (the table draws only visible rows, so
render cost must not grow with the fleet; merge grows with it). ``--stale`` measures the rare
case: the source stops answering after the warm-up, so every value is stale and each tick works
out which fields are stale and how old (merge) and draws stale cells with their ages (render).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.sim import DEMO_SLO_P95_MS
from gpucon.sim.source import SimSource
from gpucon.widgets.slot_table import SlotTable

GOAL_MS_AT_512 = 50.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


async def measure(size: int, ticks: int, stale: bool = False) -> dict[str, float]:
    clock = Clock()
    source = SimSource.for_demo(7, None, size, clock=clock)
    hub = Hub([source], refresh_s=1.0, clock=clock, slo_p95_ms_by_model=DEMO_SLO_P95_MS)
    for _ in range(30):  # warm the history so sparklines and windows are full
        clock.now += 1.0
        hub.poll_once()
        hub.tick()
    app = GpuconApp(hub, autostart=False, clock=clock)
    merge: list[float] = []
    render: list[float] = []
    drawn: list[int] = []
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(SlotTable)
        if stale:
            clock.now += 30.0  # the source's last good reading is 30 s old from here on
        for i in range(ticks + 5):
            clock.now += 1.0
            if not stale:
                hub.poll_once()
            t0 = time.process_time()
            snapshot = hub.tick()
            t1 = time.process_time()
            before = table.row_renders
            app.show_snapshot(snapshot)
            await pilot.pause()  # lets the screen update run
            t2 = time.process_time()
            if i >= 5:
                merge.append((t1 - t0) * 1000)
                render.append((t2 - t1) * 1000)
                drawn.append(table.row_renders - before)
        rows = table.row_count
    return {
        "rows": rows,
        "merge_ms": statistics.median(merge),
        "merge_p90": sorted(merge)[int(len(merge) * 0.9)],
        "render_ms": statistics.median(render),
        "render_p90": sorted(render)[int(len(render) * 0.9)],
        "drawn": statistics.median(drawn),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=40)
    parser.add_argument("--stale", action="store_true", help="every value stale (source down)")
    args = parser.parse_args()
    results = {n: asyncio.run(measure(n, args.ticks, args.stale)) for n in (8, 64, 512)}
    print("GPUs  rows  merge ms (med/p90)  diff+render ms (med/p90)  rows drawn  total ms")
    for n, r in results.items():
        total = r["merge_ms"] + r["render_ms"]
        print(
            f"{n:>4} {r['rows']:>5}  {r['merge_ms']:7.1f} / {r['merge_p90']:5.1f}"
            f"      {r['render_ms']:7.1f} / {r['render_p90']:5.1f}"
            f"          {r['drawn']:5.0f}   {total:6.1f}"
        )
    big, small = results[512], results[8]
    total = big["merge_ms"] + big["render_ms"]
    print(
        f"512 vs 8 GPUs: merge {big['merge_ms'] / small['merge_ms']:.1f}x, "
        f"diff+render {big['render_ms'] / small['render_ms']:.2f}x; "
        f"total at 512: {total:.1f} ms (goal < {GOAL_MS_AT_512:.0f} ms)"
    )


if __name__ == "__main__":
    main()
