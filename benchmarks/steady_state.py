"""CPU and memory of ``gpucon demo`` over minutes: the first minute beside a steady-state window.

Run: ``python -m benchmarks.steady_state --size 512 --minutes 10 --window 5-10``
(``--churn``: every value changes every tick, ``benchmarks.churn``).
Each program runs in its own 180×50 pseudo-terminal; all of them run at the same time, so
that they see the same moments of a shared machine (``--base DIR`` adds the same command run
from another checkout, e.g. ``git archive`` of an older commit, for a before/after). Every
``--every`` seconds the benchmark reads each process's CPU seconds (user + system, from
process start, so start-up counts) and its current RSS from /proc.

Prints, per program: CPU-s/min over minute 1 (from process start), then over each 30 s slice
of the window (min / median / max) and the whole window; RSS at 60 s, at the window's start
and end, and its largest value in the window, and RSS(end)/RSS(60 s).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import sys
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.pty_run import CLOCK_TICKS

ROOT = Path(__file__).resolve().parents[1]
SLICE_S = 30.0

# the demo's cap, lifted for a checkout that has a lower one (the older code had 512)
LIFT_CAP = (
    "import sys, gpucon.sim.layout as L; L.MAX_SIZE = max(L.MAX_SIZE, 4096); "
    "from gpucon.commands.cli import main; sys.exit(main(sys.argv[1:]))"
)


@dataclass
class Child:
    label: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    pid: int = 0
    fd: int = -1
    started: float = 0.0
    bytes_written: int = 0
    # (seconds since start, CPU seconds, RSS MiB)
    samples: list[tuple[float, float, float]] = field(default_factory=list)


def _cpu_rss(pid: int) -> tuple[float, float] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return cpu, int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None
    return None


def start(child: Child) -> None:
    pid, fd = pty.fork()
    if pid == 0:
        env = dict(child.env, TERM="xterm-256color", COLUMNS="180", LINES="50")
        # `python -c` puts the working directory first on sys.path: run in the tree measured
        os.chdir(child.cwd)
        os.execvpe(child.argv[0], child.argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 180, 0, 0))
    child.pid, child.fd, child.started = pid, fd, time.perf_counter()


def stop(child: Child) -> None:
    try:
        os.kill(child.pid, signal.SIGTERM)
        for _ in range(60):
            if os.waitpid(child.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.05)
        else:
            os.kill(child.pid, signal.SIGKILL)
            os.waitpid(child.pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    os.close(child.fd)


def run(children: list[Child], seconds: float, every: float) -> None:
    for c in children:
        start(c)
    next_sample = time.perf_counter()
    try:
        while True:
            now = time.perf_counter()
            if now - children[0].started >= seconds:
                break
            fds = [c.fd for c in children if c.fd >= 0]
            ready, _, _ = select.select(fds, [], [], 0.2)
            for c in children:
                if c.fd in ready:
                    with contextlib.suppress(OSError):  # the program exited
                        c.bytes_written += len(os.read(c.fd, 65536))
            if now >= next_sample:
                for c in children:
                    got = _cpu_rss(c.pid)
                    if got is not None:
                        c.samples.append((now - c.started, *got))
                next_sample += every
    finally:
        for c in children:
            stop(c)


def _at(samples: list[tuple[float, float, float]], t: float) -> tuple[float, float, float]:
    """The first sample at or after ``t`` seconds (the last one if none)."""
    return next((s for s in samples if s[0] >= t), samples[-1])


def report(child: Child, window: tuple[float, float]) -> str:
    s = child.samples
    if len(s) < 3:
        return f"{child.label}: too few samples ({len(s)})"
    lo, hi = window
    m1 = _at(s, 60.0)
    minute1 = m1[1] / m1[0] * 60.0
    slices: list[float] = []
    t = lo
    while t + SLICE_S <= hi + 1e-6:
        a, b = _at(s, t), _at(s, t + SLICE_S)
        if b[0] > a[0]:
            slices.append((b[1] - a[1]) / (b[0] - a[0]) * 60.0)
        t += SLICE_S
    a, b = _at(s, lo), _at(s, hi)
    whole = (b[1] - a[1]) / (b[0] - a[0]) * 60.0 if b[0] > a[0] else float("nan")
    in_window = [r for (ts, _, r) in s if lo <= ts <= hi] or [b[2]]
    parts = [
        f"{child.label}:",
        f"  CPU-s/min minute 1 (from process start): {minute1:.2f}",
        f"  CPU per 1 s tick in the window (everything: source, merge, render, terminal): "
        f"{whole / 60 * 1000:.0f} ms",
        f"  CPU-s/min {lo / 60:.1f}-{hi / 60:.1f} min: whole {whole:.2f}; 30 s slices "
        + (
            f"min/median/max {min(slices):.2f}/{statistics.median(slices):.2f}/{max(slices):.2f}"
            if slices
            else "n/a"
        ),
        f"  RSS MiB at 60 s {m1[2]:.0f}, at {lo / 60:.1f} min {a[2]:.0f}, at {hi / 60:.1f} min "
        f"{b[2]:.0f}, max in window {max(in_window):.0f}; end/minute-1 {b[2] / m1[2]:.3f}",
        f"  terminal bytes/s {child.bytes_written / s[-1][0]:.0f}",
    ]
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, action="append", default=None)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--window", default="5-10", help="steady window in minutes, A-B")
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--base", type=Path, default=None, help="another checkout to compare")
    parser.add_argument(
        "--churn", action="store_true", help="every value changes every tick (benchmarks.churn)"
    )
    args = parser.parse_args()
    lo_m, hi_m = (float(x) for x in args.window.split("-"))
    window = (lo_m * 60.0, min(hi_m, args.minutes) * 60.0)
    children: list[Child] = []
    trees = [("new", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
    for size in args.size or [512]:
        for name, tree in trees:
            # this checkout's benchmarks, that tree's gpucon
            env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{ROOT}")
            if args.churn:
                argv = [sys.executable, "-m", "benchmarks.churn", "--size", str(size)]
            else:
                argv = [sys.executable, "-c", LIFT_CAP, "demo", "--size", str(size)]
            label = f"{name} --size {size}" + (" (every value changing)" if args.churn else "")
            children.append(Child(label, argv, env, tree))
    print(
        f"{len(children)} programs at once for {args.minutes:g} min, sampled every "
        f"{args.every:g} s; window {lo_m:g}-{min(hi_m, args.minutes):g} min",
        flush=True,
    )
    run(children, args.minutes * 60.0 + 1.0, args.every)
    for c in children:
        print(report(c, window))
    return 0


if __name__ == "__main__":
    sys.exit(main())
