"""Key-to-screen latency of ``gpucon demo`` at 8, 512 and 2,048 GPUs, while it ticks.

Run: ``python -m benchmarks.key_latency [--sizes 8 512 2048] [--rounds 3] [--base DIR]
[--load N] [--repeat N]``.
The demo runs in a 180×50 pseudo-terminal at its default 1 s refresh. After the first data
frame and a warm-up, each timed key is written to the terminal at a random moment of the tick
cycle, and the clock stops when the terminal has received the text that shows the key's effect
(ANSI codes stripped):

- ``s`` (sort by the next column; a live column re-sorts every row): the column's title with
  its arrow in the header; 13 presses walk every column, the 14th (back to the default order,
  no arrow) is not timed;
- ``/`` then ``ω`` typed three times (the filter box, then the filter re-applied to every row at
  each key): the box's placeholder, then ``ω``, ``ωω``, ``ωωω``; Escape (not timed) clears it;
- ``z`` (pause): the banner; ``z`` again (not timed) resumes.

Prints p50 / p99 / max per size (and per key kind), from this one run; with ``--base`` the same
is measured for another checkout, one program at a time, sizes interleaved. ``--repeat N`` runs
each program N times (interleaved) and prints the min / median / max of each figure over the
runs. ``--load N`` runs N busy loops (Python processes at the same priority, each one core's
worth) beside every program measured, so a loaded machine is the same machine each run: on
this 2-core box ``--load 2`` leaves the console about two thirds of a core.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pty
import random
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.pty_run import ANSI
from benchmarks.steady_state import LIFT_CAP

ROOT = Path(__file__).resolve().parents[1]
GOAL_P99_MS = 150.0
TIMEOUT_S = 10.0
# (title, arrow) the header shows after each `s`, from the default order
SORTS = [
    ("HOST", "▲"),
    ("GPU", "▲"),
    ("SLOT", "▲"),
    ("PROFILE", "▲"),
    ("ACT%", "▼"),
    ("TREND", "▼"),
    ("MEM GiB", "▼"),
    ("BACKEND", "▲"),
    ("WT", "▼"),
    ("STATE", "▲"),
    ("INFL", "▼"),
    ("P95/SLO ms", "▼"),
    ("REQ/S", "▼"),
]


class Terminal:
    """A program in a pseudo-terminal; reads what it writes, stripped of ANSI codes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(cwd)  # `python -c` puts the working directory first on sys.path
            os.execvpe(argv[0], argv, dict(env, TERM="xterm-256color", COLUMNS="180", LINES="50"))
        fcntl_winsize(fd)
        self.pid, self.fd = pid, fd

    def read_for(self, seconds: float) -> bytes:
        out = b""
        end = time.perf_counter() + seconds
        while (left := end - time.perf_counter()) > 0:
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.05))
            if ready:
                try:
                    out += os.read(self.fd, 1 << 16)
                except OSError:
                    break
        return out

    def until(self, marker: bytes | re.Pattern[bytes], timeout: float) -> float | None:
        """Seconds until ``marker`` shows in what the program writes from now on."""
        pattern = marker if isinstance(marker, re.Pattern) else re.compile(re.escape(marker))
        start = time.perf_counter()
        seen = b""
        while (waited := time.perf_counter() - start) < timeout:
            ready, _, _ = select.select([self.fd], [], [], 0.02)
            if ready:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except OSError:
                    return None
                seen = (seen + chunk)[-(1 << 16) :]
                if pattern.search(ANSI.sub(b"", seen)):
                    return time.perf_counter() - start
            del waited
        return None

    def key(
        self, data: bytes, marker: bytes | re.Pattern[bytes] | None, timeout: float = 10.0
    ) -> float | None:
        self.read_for(0.0)  # drop what was written before the key
        os.write(self.fd, data)
        return None if marker is None else self.until(marker, timeout)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        for _ in range(60):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    break
            time.sleep(0.05)
        else:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        os.close(self.fd)


def fcntl_winsize(fd: int) -> None:
    import fcntl

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 180, 0, 0))


def one_program(tree: Path, size: int, rounds: int, warmup_s: float) -> dict[str, list[float]]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    term = Terminal([sys.executable, "-c", LIFT_CAP, "demo", "--size", str(size)], env, tree)
    times: dict[str, list[float]] = {"sort": [], "filter": [], "pause": []}
    rng = random.Random(size)
    try:
        if term.until(b"gpu-000", 60.0) is None:  # the first host: rows are drawn
            raise SystemExit(f"--size {size}: no data frame within 60 s")
        term.read_for(warmup_s)

        def timed(kind: str, data: bytes, marker: bytes | re.Pattern[bytes]) -> None:
            term.read_for(rng.uniform(0.2, 1.2))  # a random moment of the tick cycle
            got = term.key(data, marker, TIMEOUT_S)
            # a key not answered within the timeout counts as the timeout (and is named)
            times[kind].append(TIMEOUT_S * 1000 if got is None else got * 1000)
            if got is None:
                print(f"  --size {size}: {data!r} not answered within {TIMEOUT_S:.0f} s")
                term.read_for(5.0)  # let it catch up before the next key

        for _ in range(rounds):
            for title, arrow in SORTS:
                # a narrow column cuts its title before the arrow; REQ/S names its window
                shown = re.escape(title[:2].encode()) + rb"[^\n]{0,12}" + arrow.encode()
                timed("sort", b"s", re.compile(shown))
            term.key(b"s", None)  # back to the default order
            timed("filter", b"/", b"filter: host")
            for n in range(1, 4):
                timed("filter", "ω".encode(), ("ω" * n).encode())
            term.key(b"\x1b", None)
            timed("pause", b"z", b"PAUSED")
            term.read_for(0.3)
            term.key(b"z", None)
    finally:
        term.close()
    return times


@contextlib.contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    """``count`` busy loops for as long as the block runs (each its own process)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def p99_of(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    return (
        f"p50 {statistics.median(ordered):6.0f}  p99 {p99_of(values):6.0f}  max {ordered[-1]:6.0f}"
        f" ms  (n={len(ordered)})"
    )


def spread(values: list[float]) -> str:
    """min / median / max of one figure over the repeats."""
    return f"{min(values):.0f} / {statistics.median(values):.0f} / {max(values):.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 512, 2048])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds after first frame")
    parser.add_argument("--base", type=Path, default=None, help="another checkout to compare")
    parser.add_argument(
        "--load", type=int, default=0, help="busy loops beside each program (0: none)"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each program, interleaved (spread)"
    )
    args = parser.parse_args()
    trees = [("new", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
    load = f" beside {args.load} busy loops" if args.load else ""
    worst = 0.0
    for size in args.sizes:
        # (p50, p99, max) of each run, by tree
        runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in trees}
        for repeat in range(args.repeat):
            for name, tree in trees:
                with cpu_hogs(args.load):
                    times = one_program(tree, size, args.rounds, args.warmup)
                every = [t for kind in times.values() for t in kind]
                label = f"{name} --size {size}{load}" + (
                    f" (run {repeat + 1})" if args.repeat > 1 else ""
                )
                print(f"{label}: all keys {summary(every)}", flush=True)
                for kind, values in times.items():
                    print(f"    {kind:6s} {summary(values)}", flush=True)
                runs[name].append((statistics.median(every), p99_of(every), max(every)))
                if name == "new":
                    worst = max(worst, p99_of(every))
        if args.repeat > 1:
            for name, figures in runs.items():
                p50s, p99s, maxes = (list(f) for f in zip(*figures, strict=True))
                print(
                    f"{name} --size {size}{load}, {args.repeat} runs, min / median / max:"
                    f" p50 {spread(p50s)}, p99 {spread(p99s)}, max {spread(maxes)} ms",
                    flush=True,
                )
    print(f"worst p99 of this tree: {worst:.0f} ms (goal < {GOAL_P99_MS:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
