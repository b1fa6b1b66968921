"""Startup to first data frame vs a Textual hello-world, and CPU/memory/terminal bytes per minute.

Run: ``.venv/bin/python -m benchmarks.startup_cpu [--seconds 60] [--repeat 5]``.
Every figure comes from this one run, on this machine, in a 180×50 pseudo-terminal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from benchmarks.pty_run import run_in_pty

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
GPUCON = [PY, "-m", "gpucon.cli"]
HELLO = [PY, str(ROOT / "benchmarks" / "hello_app.py")]
# a backend name only the slot table shows: seen means the first frame with data is drawn
DATA_MARKER = b"sdxl"


def startup(repeat: int) -> tuple[float, float]:
    gp: list[float] = []
    hello: list[float] = []
    for _ in range(repeat):  # interleaved so both see the same machine state
        h = run_in_pty(HELLO, marker=b"Hello, world", duration_s=20, stop_at_marker=True)
        g = run_in_pty([*GPUCON, "demo"], marker=DATA_MARKER, duration_s=20, stop_at_marker=True)
        if h.marker_s is None or g.marker_s is None:
            raise SystemExit(f"marker not seen: hello={h.marker_s} gpucon={g.marker_s}")
        hello.append(h.marker_s)
        gp.append(g.marker_s)
    return statistics.median(gp), statistics.median(hello)


def steady(argv: list[str], seconds: float) -> tuple[float, float, float]:
    """CPU-s per minute, peak RSS MiB and terminal bytes/s, counted after the first data frame."""
    run = run_in_pty(argv, marker=DATA_MARKER, duration_s=seconds + 15)
    if run.marker_s is None:
        raise SystemExit(f"{argv}: no data frame seen")
    steady_s = run.wall_s - run.marker_s
    per_min = (run.cpu_s - run.cpu_at_marker_s) / steady_s * 60.0
    return per_min, run.peak_rss_mib, (run.bytes_written - run.bytes_at_marker) / steady_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    gp, hello = startup(args.repeat)
    print(
        f"startup to first data frame: gpucon demo {gp * 1000:.0f} ms, "
        f"textual hello-world {hello * 1000:.0f} ms, ratio {gp / hello:.2f}x (goal <= 1.3x)"
    )
    for label, extra, goal in (("default demo", [], 1.5), ("--size 512", ["--size", "512"], 6.0)):
        cpu, rss, bps = steady([*GPUCON, "demo", *extra], args.seconds)
        print(
            f"{label}: {cpu:.2f} CPU-s/min (goal < {goal}), peak RSS {rss:.0f} MiB, "
            f"{bps:.0f} bytes/s to the terminal"
        )


if __name__ == "__main__":
    main()
