"""Cost of one tick at 8, 512 and 2,048 GPUs: source read, merge (hub), render and terminal write.

Run: ``.venv/bin/python -m benchmarks.tick_cost [--ticks 40] [--churn]``. The simulator
advances one second per tick with a frozen clock; the console runs at 180×50 with no background
thread, so each phase is timed alone, in CPU time of this process:

- read: the source's read (the simulator's step and read-out; with ``--churn`` every entity a
  new object with new values, as a live source builds them: ``benchmarks.churn``);
- merge:  ``Hub.tick()`` — merge readings, history rings, alert rules;
- diff + render: ``GpuconApp.show_snapshot()`` plus the screen update it causes and its
  terminal write: the app runs on a driver that is Textual's headless one except that it says
  it is not headless, so Textual turns each update into the escape sequences a terminal gets
  and hands them to ``write``, which writes them to /dev/null (``TerminalSink``: the encoding
  and a system call a write, not a pseudo-terminal's; ``steady_state --churn`` measures the
  whole process in a real one). Also the number of slot-table rows drawn (cache misses) and
  the bytes written a tick.

Prints min/median/max per phase, and the 512/8 ratio (the table draws only visible rows, so
render cost must not grow with the fleet; merge grows with it). ``--base DIR`` measures another
checkout too (its ``gpucon``, this checkout's churn source and harness), each in its own
process, interleaved ``--repeat`` times, so both see the same moments of a shared machine;
the figures pool every tick of every run. ``--stale`` measures the rare
case: the source stops answering after the warm-up, so every value is stale and each tick works
out which fields are stale and how old (merge) and draws stale cells with their ages (render).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from textual.drivers.headless_driver import HeadlessDriver

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.model.history import DEFAULT_CAPACITY
from gpucon.sim import DEMO_SLO_P95_MS
from gpucon.sim.source import SimSource
from gpucon.widgets.slot_table import SlotTable

GOAL_MS_AT_512 = 50.0
# ticks before the measured ones (the figures of earlier rounds were taken after 30); a
# console that has run two minutes has its history's rings full and every rule reading its
# whole window: ``--warmup STEADY_TICKS`` measures that (a few ms more a tick at 512 GPUs)
WARMUP_TICKS = 30
STEADY_TICKS = DEFAULT_CAPACITY + 10
HERE = Path(__file__).resolve().parent
PHASES = ("read", "merge", "render", "total")


def _churn_source() -> Any:
    """This checkout's ``ChurnSource``, loaded by path: the same source whichever checkout's
    ``gpucon`` is measured (``--base``)."""
    spec = importlib.util.spec_from_file_location("tick_cost_churn", HERE / "churn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ChurnSource


class TerminalSink(HeadlessDriver):
    """Textual's headless driver, except that the app is told it is not headless: each
    screen update is rendered to the escape sequences a terminal would get, and written (to
    /dev/null, counted) in the update, as a console's driver writes them to its terminal."""

    written = 0
    _null = -1

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        if TerminalSink._null < 0:
            TerminalSink._null = os.open(os.devnull, os.O_WRONLY)
        TerminalSink.written += os.write(TerminalSink._null, data.encode())


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


async def measure(
    size: int, ticks: int, stale: bool = False, churn: bool = False, warmup: int = WARMUP_TICKS
) -> dict[str, Any]:
    clock = Clock()
    sim = SimSource.for_demo(7, None, size, clock=clock)
    source = _churn_source()(sim) if churn else sim
    hub = Hub([source], refresh_s=1.0, clock=clock, slo_p95_ms_by_model=DEMO_SLO_P95_MS)
    for _ in range(warmup):  # warm the history (``--warmup``)
        clock.now += 1.0
        hub.poll_once()
        hub.tick()
    app = GpuconApp(hub, autostart=False, clock=clock)
    app.driver_class = TerminalSink  # the terminal write counts (not headless: ``TerminalSink``)
    read: list[float] = []
    merge: list[float] = []
    render: list[float] = []
    drawn: list[int] = []
    sent: list[int] = []
    async with app.run_test(size=(180, 50), headless=False) as pilot:
        await pilot.pause()
        _collector_as_the_console_sets_it()  # after the first frame, as the console does
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
            written = TerminalSink.written
            app.show_snapshot(snapshot)
            await pilot.pause()  # lets the screen update (and its terminal write) run
            t2 = time.process_time()
            if i >= 5:
                read.append((t0 - r0) * 1000)
                merge.append((t1 - t0) * 1000)
                render.append((t2 - t1) * 1000)
                drawn.append(table.row_renders - before)
                sent.append(TerminalSink.written - written)
        rows = table.row_count
    return {
        "rows": rows,
        "read": read,
        "merge": merge,
        "render": render,
        "drawn": drawn,
        "bytes": sent,
    }


def summary(samples: dict[str, Any]) -> dict[str, float]:
    """min / median / max of each phase over the ticks (``samples``: ``measure``'s)."""
    zipped = zip(samples["read"], samples["merge"], samples["render"], strict=True)
    phases = {p: samples[p] for p in PHASES[:3]} | {"total": [a + b + c for a, b, c in zipped]}
    return {
        "rows": samples["rows"],
        **{
            f"{name}_{stat}": f(values)
            for name, values in phases.items()
            for stat, f in (("min", min), ("med", statistics.median), ("max", max))
        },
        "drawn": statistics.median(samples["drawn"]),
        # an older harness's samples have no bytes
        "bytes": statistics.median(samples.get("bytes") or [0]),
    }


def _collector_as_the_console_sets_it() -> None:
    """What the console does to the garbage collector after its first frame (start-up's
    objects frozen, young passes once per many allocations); an older checkout without it
    just keeps the collector as it is."""
    import gc

    try:
        from gpucon.commands.console import _collector_on
    except ImportError:
        gc.enable()
        return
    _collector_on()


def _child(args: argparse.Namespace) -> None:
    """One checkout's measurement, printed as JSON (``--base``: run in its own process)."""
    results = {
        n: asyncio.run(measure(n, args.ticks, args.stale, args.churn, args.warmup))
        for n in args.sizes
    }
    print(json.dumps(results))


def _interleaved(
    args: argparse.Namespace,
) -> tuple[dict[str, dict[int, dict[str, Any]]], dict[str, dict[int, list[float]]]]:
    """Every checkout measured ``--repeat`` times, one after the other, each run in its own
    process (its ``gpucon`` first on the path); the ticks of all runs pooled, and each run's
    median total (the machine's speed moves from one run to the next: both checkouts' runs
    side by side show it)."""
    trees = [("now", HERE.parent)] + ([("before", Path(args.base).resolve())] if args.base else [])
    pooled: dict[str, dict[int, dict[str, Any]]] = {name: {} for name, _ in trees}
    per_run: dict[str, dict[int, list[float]]] = {name: {} for name, _ in trees}
    flags = [
        "--ticks",
        str(args.ticks),
        "--warmup",
        str(args.warmup),
        "--sizes",
        *map(str, args.sizes),
    ]
    flags += ["--churn"] * args.churn + ["--stale"] * args.stale
    for _ in range(args.repeat):
        for name, tree in trees:
            env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{HERE.parent}")
            out = subprocess.run(
                [sys.executable, str(HERE / "tick_cost.py"), "--child", *flags],
                env=env,
                cwd=tree,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for size, samples in json.loads(out.strip().splitlines()[-1]).items():
                phases = zip(samples["read"], samples["merge"], samples["render"], strict=True)
                totals = [sum(tick) for tick in phases]
                per_run[name].setdefault(int(size), []).append(statistics.median(totals))
                into = pooled[name].setdefault(int(size), {})
                for key, values in samples.items():
                    if isinstance(values, list):
                        into.setdefault(key, []).extend(values)
                    else:
                        into[key] = values
    return pooled, per_run


def _table(results: dict[int, dict[str, float]], label: str = "") -> None:
    print("GPUs   rows  read               merge              render+write       total")
    for n, r in results.items():
        cells = "  ".join(
            f"{r[p + '_min']:5.1f}/{r[p + '_med']:5.1f}/{r[p + '_max']:5.1f}" for p in PHASES
        )
        print(
            f"{n:>4} {r['rows']:>6}  {cells}   rows drawn {r['drawn']:.0f}, "
            f"{r['bytes'] / 1024:.1f} KiB written{label}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=40)
    parser.add_argument(
        "--warmup",
        type=int,
        default=WARMUP_TICKS,
        help=f"ticks before the measured ones ({STEADY_TICKS}: the history's rings full)",
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 512, 2048])
    parser.add_argument("--stale", action="store_true", help="every value stale (source down)")
    parser.add_argument("--churn", action="store_true", help="every value changes every tick")
    parser.add_argument("--base", default=None, help="another checkout, measured beside this one")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each checkout (--base)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import gc

    import gpucon.sim.layout

    # an older checkout (run with its gpucon first on PYTHONPATH) had a lower cap
    gpucon.sim.layout.MAX_SIZE = max(gpucon.sim.layout.MAX_SIZE, *args.sizes)
    gc.freeze()  # the imports (the console freezes again after its first frame: ``measure``)
    if args.child:
        _child(args)
        return
    mode = "every value changing" if args.churn else "the simulator's own changes"
    if args.base or args.repeat > 1:
        pooled, per_run = _interleaved(args)
        print(
            f"ms per tick, min/median/max of {args.ticks} ticks x {args.repeat} runs ({mode}; "
            "CPU time, terminal written to /dev/null)"
        )
        for name, by_size in pooled.items():
            print(f"-- {name}")
            _table({n: summary(samples) for n, samples in by_size.items()})
        for name, runs_by_size in per_run.items():
            for n, medians in runs_by_size.items():
                shown = " ".join(f"{m:.1f}" for m in medians)
                print(f"each run's median total, {name}, {n} GPUs (in run order): {shown}")
        return
    results = {
        n: summary(asyncio.run(measure(n, args.ticks, args.stale, args.churn, args.warmup)))
        for n in args.sizes
    }
    print(
        f"ms per tick, min/median/max of {args.ticks} ticks ({mode}; CPU time, terminal "
        "written to /dev/null)"
    )
    _table(results)
    if 512 in results:
        big = results[512]
        print(
            f"total at 512: median {big['total_med']:.1f} ms (goal < {GOAL_MS_AT_512:.0f} ms"
            " with every value changing)"
        )
        if 8 in results:
            small = results[8]
            print(
                f"512 vs 8 GPUs (medians): merge {big['merge_med'] / small['merge_med']:.1f}x, "
                f"render+write {big['render_med'] / small['render_med']:.2f}x"
            )


if __name__ == "__main__":
    main()
