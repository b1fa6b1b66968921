"""Cost of one tick at 8, 512 and 2,048 GPUs: source read, merge (hub), diff + render.

Run: ``.venv/bin/python -m benchmarks.tick_cost [--ticks 40] [--churn]``. The simulator
advances one second per tick with a frozen clock; the console runs headless at 180×50 with no
background thread, so each phase is timed alone, in CPU time of this process:

- read: the source's read (the simulator's step and read-out; with ``--churn`` every entity a
  new object with new values, as a live source builds them: ``benchmarks.churn``);
- merge:  ``Hub.tick()`` — merge readings, history rings, alert rules;
- diff + render: ``GpuconApp.show_snapshot()`` plus the screen update it causes, and the
  number of slot-table rows drawn (cache misses). Headless: the bytes a terminal would get are
  not written; ``steady_state --churn`` measures the whole process in a real pseudo-terminal.

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

from benchmarks.churn import ChurnSource
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


async def measure(
    size: int, ticks: int, stale: bool = False, churn: bool = False
) -> dict[str, float]:
    clock = Clock()
    sim = SimSource.for_demo(7, None, size, clock=clock)
    source = ChurnSource(sim) if churn else sim
    hub = Hub([source], refresh_s=1.0, clock=clock, slo_p95_ms_by_model=DEMO_SLO_P95_MS)
    for _ in range(30):  # warm the history so sparklines and windows are full
        clock.now += 1.0
        hub.poll_once()
        hub.tick()
    app = GpuconApp(hub, autostart=False, clock=clock)
    read: list[float] = []
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
            r0 = time.process_time()
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
                read.append((t0 - r0) * 1000)
                merge.append((t1 - t0) * 1000)
                render.append((t2 - t1) * 1000)
                drawn.append(table.row_renders - before)
        rows = table.row_count
    total = [a + b + c for a, b, c in zip(read, merge, render, strict=True)]
    return {
        "rows": rows,
        **{
            f"{name}_{stat}": f(values)
            for name, values in (
                ("read", read),
                ("merge", merge),
                ("render", render),
                ("total", total),
            )
            for stat, f in (("min", min), ("med", statistics.median), ("max", max))
        },
        "drawn": statistics.median(drawn),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=40)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 512, 2048])
    parser.add_argument("--stale", action="store_true", help="every value stale (source down)")
    parser.add_argument("--churn", action="store_true", help="every value changes every tick")
    args = parser.parse_args()
    import gc

    import gpucon.sim.layout

    # an older checkout (run with its gpucon first on PYTHONPATH) had a lower cap
    gpucon.sim.layout.MAX_SIZE = max(gpucon.sim.layout.MAX_SIZE, *args.sizes)
    gc.freeze()  # as the console does after its first frame
    results = {n: asyncio.run(measure(n, args.ticks, args.stale, args.churn)) for n in args.sizes}
    mode = "every value changing" if args.churn else "the simulator's own changes"
    print(f"ms per tick, min/median/max of {args.ticks} ticks ({mode}; CPU time, headless)")
    print("GPUs   rows  read               merge              diff+render        total")
    for n, r in results.items():
        cells = "  ".join(
            f"{r[p + '_min']:5.1f}/{r[p + '_med']:5.1f}/{r[p + '_max']:5.1f}"
            for p in ("read", "merge", "render", "total")
        )
        print(f"{n:>4} {r['rows']:>6}  {cells}   rows drawn {r['drawn']:.0f}")
    if 512 in results:
        big = results[512]
        print(
            f"total at 512: median {big['total_med']:.1f} ms (goal < {GOAL_MS_AT_512:.0f} ms"
            " with every value changing)"
        )
    if 8 in results and 512 in results:
        small = results[8]
        print(
            f"512 vs 8 GPUs (medians): merge {big['merge_med'] / small['merge_med']:.1f}x, "
            f"diff+render {big['render_med'] / small['render_med']:.2f}x"
        )


if __name__ == "__main__":
    main()
