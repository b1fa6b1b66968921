"""Startup to first data frame vs a Textual hello-world, and CPU/memory/terminal bytes per minute.

Run: ``.venv/bin/python -m benchmarks.startup_cpu [--seconds 60] [--repeat 9] [--base DIR]
[--startup-only] [--live CONFIG [--marker TEXT]]``; ``--base`` starts another checkout's demo
interleaved with this one's (before/after in one run, on the same machine state); ``--live``
starts ``gpucon live --config CONFIG --read-only`` instead of the demo, its first frame the
one that shows ``--marker`` (default: the demo's backend name; on a machine without a GPU, an
NVML-only config's first frame shows the fleet's name).
Every figure comes from this one run, on this machine, in a 180×50 pseudo-terminal.

Printed for each program: wall and CPU (user+sys from process start) to the first frame,
min/median/max; the ratio of the medians to the hello-world's; and, steadier on a shared
machine, each round's ratio (a start against the hello-world's start of the same round),
min/median/max, wall and CPU.

Both programs start the same way (``python FILE`` / ``python -m gpucon.commands.cli demo``) with the
same environment. Python's bytecode cache is on (in a temporary ``PYTHONPYCACHEPREFIX``, after
one warm-up start of each), as it is for any installed package: pip compiles a wheel's
modules at install time, and Textual's are compiled in the venv already. (This VM's shell
sets ``PYTHONDONTWRITEBYTECODE=1``: an editable checkout without ``__pycache__`` folders
recompiles every gpucon module it imports on every start, about 30 ms more.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.pty_run import run_in_pty

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
GPUCON = [PY, "-m", "gpucon.commands.cli"]
HELLO = [PY, str(ROOT / "benchmarks" / "hello_app.py")]
HELLO_LABEL = "textual hello-world"
# a backend name only the slot table shows: seen means the first frame with data is drawn
DATA_MARKER = b"sdxl"
STEADY_AFTER_S = 5.0  # "steady" terminal bytes: from this long after the first data frame


def child_env(cache_dir: str | None) -> dict[str, str]:
    """The environment both programs get: bytecode cached in ``cache_dir``, or not at all."""
    env = dict(os.environ)
    if cache_dir is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache_dir
    return env


@dataclass(frozen=True)
class Starts:
    """One program's repeated starts: wall seconds and CPU seconds (user+sys, from process
    start) to its first frame with data."""

    wall_s: tuple[float, ...]
    cpu_s: tuple[float, ...]

    def median_wall(self) -> float:
        return statistics.median(self.wall_s)

    def line(self, label: str) -> str:
        def spread(values: tuple[float, ...]) -> str:
            ms = sorted(v * 1000 for v in values)
            return f"{ms[0]:.0f}/{statistics.median(ms):.0f}/{ms[-1]:.0f}"

        return f"{label}: wall {spread(self.wall_s)} ms, CPU {spread(self.cpu_s)} ms"


def startup(
    repeat: int,
    env: dict[str, str],
    checkouts: dict[str, Path],
    console: tuple[list[str], bytes] = (["demo"], DATA_MARKER),
) -> tuple[dict[str, Starts], Starts]:
    """Each checkout's ``gpucon demo`` and the hello-world, started ``repeat`` times,
    interleaved so that all see the same machine state: ({label: starts}, hello-world). The
    order within a round turns by one each round, so that none always starts first (after a
    quiet moment) or last. ``console``: gpucon's arguments and the first frame's marker."""
    arguments, marker = console
    labels = [*checkouts, HELLO_LABEL]
    walls: dict[str, list[float]] = {label: [] for label in labels}
    cpus: dict[str, list[float]] = {label: [] for label in labels}
    for round_ in range(repeat):
        turn = round_ % len(labels)
        for label in labels[turn:] + labels[:turn]:
            if label == HELLO_LABEL:
                wall, cpu = _first_marker_s(HELLO, b"Hello, world", env, ROOT)
            else:
                wall, cpu = _first_marker_s([*GPUCON, *arguments], marker, env, checkouts[label])
            walls[label].append(wall)
            cpus[label].append(cpu)
    starts = {label: Starts(tuple(walls[label]), tuple(cpus[label])) for label in walls}
    hello = starts.pop(HELLO_LABEL)
    return starts, hello


def ratios(run: Starts, hello: Starts) -> str:
    """The ratio to the hello-world, round by round (each start against the hello-world's
    start of the same round): min/median/max, wall and CPU. The medians' ratio moves with
    whichever rounds the machine was busy in; the per-round ratios show how far it moves."""

    def spread(ours: tuple[float, ...], theirs: tuple[float, ...]) -> str:
        each = sorted(a / b for a, b in zip(ours, theirs, strict=True) if b > 0)
        return f"{each[0]:.2f}/{statistics.median(each):.2f}/{each[-1]:.2f}"

    return (
        f"per round: wall {spread(run.wall_s, hello.wall_s)}x, "
        f"CPU {spread(run.cpu_s, hello.cpu_s)}x (min/median/max)"
    )


def _first_marker_s(
    argv: list[str], marker: bytes, env: dict[str, str], cwd: Path
) -> tuple[float, float]:
    """(wall, CPU) seconds until ``marker`` shows, ``argv`` started in ``cwd`` (its checkout
    imported); a start that never shows it is tried once more."""
    # that checkout first; the rest of the path as it was (wheels carried to a device machine)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != "."]
    own_env = {**env, "PYTHONPATH": os.pathsep.join([str(cwd), *rest])}
    for _ in range(2):
        run = run_in_pty(
            argv, marker=marker, duration_s=20, stop_at_marker=True, env=own_env, cwd=str(cwd)
        )
        if run.marker_s is not None:
            return run.marker_s, run.cpu_at_marker_s
    raise SystemExit(f"{argv}: {marker!r} never shown")


def steady(
    argv: list[str], seconds: float, env: dict[str, str]
) -> tuple[float, float, float, float]:
    """CPU-s per minute, peak RSS MiB, terminal bytes/s (both counted after the first data
    frame) and steady terminal bytes/s (from STEADY_AFTER_S after it)."""
    run = run_in_pty(argv, marker=DATA_MARKER, duration_s=seconds + 15, env=env)
    if run.marker_s is None:
        raise SystemExit(f"{argv}: no data frame seen")
    steady_s = run.wall_s - run.marker_s
    per_min = (run.cpu_s - run.cpu_at_marker_s) / steady_s * 60.0
    bps = (run.bytes_written - run.bytes_at_marker) / steady_s
    return per_min, run.peak_rss_mib, bps, run.bytes_per_s_after(run.marker_s + STEADY_AFTER_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument(
        "--base", type=Path, default=None, help="another checkout, started interleaved (before)"
    )
    parser.add_argument(
        "--startup-only", action="store_true", help="the start-up figures alone (no CPU runs)"
    )
    parser.add_argument(
        "--live",
        metavar="CONFIG",
        type=Path,
        default=None,
        help="start gpucon live --config CONFIG --read-only instead of the demo (startup only)",
    )
    parser.add_argument(
        "--marker", default=None, help="with --live: the text its first frame shows"
    )
    args = parser.parse_args()

    kind = "demo"
    console: tuple[list[str], bytes] = (["demo"], DATA_MARKER)
    if args.live is not None:
        kind = "live"
        marker = DATA_MARKER if args.marker is None else args.marker.encode()
        console = (["live", "--config", str(args.live.resolve()), "--read-only"], marker)
        args.startup_only = True
    checkouts = {f"gpucon {kind}": ROOT}
    if args.base is not None:
        checkouts = {f"base {kind}": args.base.resolve(), f"gpucon {kind}": ROOT}
    with tempfile.TemporaryDirectory(prefix="gpucon-pyc-") as cache:
        cached = child_env(cache)
        for cwd in checkouts.values():  # warm-up: bytecode cached, as installed
            _first_marker_s([*GPUCON, *console[0]], console[1], cached, cwd)
        _first_marker_s(HELLO, b"Hello, world", cached, ROOT)
        starts, hello = startup(args.repeat, cached, checkouts, console)
        print(
            f"startup to first data frame, {args.repeat} interleaved starts each "
            "(min/median/max; CPU = user+sys from process start):"
        )
        print("  " + hello.line("textual hello-world"))
        for label, run in starts.items():
            ratio = run.median_wall() / hello.median_wall()
            cpu_ratio = statistics.median(run.cpu_s) / statistics.median(hello.cpu_s)
            print(
                f"  {run.line(label)}; {ratio:.2f}x the hello-world's median wall "
                f"(goal <= 1.2x), {cpu_ratio:.2f}x its median CPU"
            )
            print(f"    {ratios(run, hello)}")
        if args.startup_only:
            return
        for label, extra, goal in (
            ("default demo", [], 1.5),
            ("--size 512", ["--size", "512"], 6.0),
        ):
            cpu, rss, bps, calm = steady([*GPUCON, "demo", *extra], args.seconds, cached)
            print(
                f"{label}: {cpu:.2f} CPU-s/min (goal < {goal}), peak RSS {rss:.0f} MiB, "
                f"{bps:.0f} bytes/s to the terminal ({calm:.0f} bytes/s from "
                f"{STEADY_AFTER_S:.0f} s after the first frame)"
            )


if __name__ == "__main__":
    main()
