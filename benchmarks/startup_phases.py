"""Where a console's start goes, phase by phase, beside a Textual hello-world's.

Run: ``.venv/bin/python -m benchmarks.startup_phases [--starts 13] [--live CONFIG] [--base DIR]``:
the demo (and, with ``--live``, ``gpucon live --config CONFIG --read-only``, its marker
``--marker``; with ``--base``, another checkout's too, before) and ``benchmarks/hello_app.py``,
each started ``--starts`` times, interleaved round by round, in a 180×50 pty
(``benchmarks/pty_run.py``). Each start runs under this module's ``--child`` mode, which
notes the process's CPU time and the wall clock (from its first line) when a watched module is
first imported, when the console's steps begin and end (config, session, App), when the first
byte reaches the terminal, when the App first hands a frame to Textual's writer thread and
last does so before the marker reaches the terminal ("first draw", "last draw"), and when the
marker does (the first frame with data), then exits. Printed: each point's CPU min and
median, and the median wall. A live console's first reads are points too (each source's first
read, in the hub's workers, and the wait for them before the first snapshot,
``tick_if_read``). Diagnostics only: the marks cost a little themselves, and the totals are
not the start-up benchmark's (``benchmarks/startup_cpu.py`` counts from the process's start,
interpreter included).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]|\x1b[=>]")
# the first import of each of these is a point of the timeline
WATCHED = (
    *("gpucon.config", "gpucon.session", "gpucon.sim", "gpucon.sources.nvml", "pynvml"),
    *("gpucon.app", "textual", "textual.app", "textual.widgets._static"),
    *("gpucon.screens.fleet", "textual.drivers.linux_driver"),
)
# the console's steps (gpucon.commands.console): their start and end are points too
STEPS = ("_load_config", "_open", "_console")


class _Marks:
    """(point, CPU ms, wall ms) in the order they happened."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.points: list[tuple[str, float, float]] = []

    def mark(self, name: str) -> None:
        self.points.append((name, *self.now()))

    def now(self) -> tuple[float, float]:
        """(CPU ms, wall ms) now."""
        return time.process_time() * 1000, (time.perf_counter() - self.start) * 1000

    def write(self, path: str) -> None:
        with open(path, "w") as out:
            for name, cpu, wall in self.points:
                out.write(f"{name}\t{cpu:.1f}\t{wall:.1f}\n")


class _FirstImports:
    """A meta-path finder that finds nothing: it notes the first import of each watched
    module and lets the real finders go on."""

    def __init__(self, marks: _Marks) -> None:
        self.marks = marks
        self.seen: set[str] = set()

    def find_spec(self, name: str, path: object, target: object = None) -> ModuleSpec | None:
        if name in WATCHED and name not in self.seen:
            self.seen.add(name)
            self.marks.mark(f"import {name}")
        return None


class _Terminal:
    """Stands in for ``sys.__stderr__`` (where Textual draws): notes the first write, and
    writes the timeline and ends the process once the marker is on the terminal.

    It also notes when the App hands a frame to Textual's writer thread (``App._display``,
    on the UI thread): the first time, and the last time before the marker reaches the
    terminal ("last draw"), so a frame drawn but written late (the writer waiting for the
    interpreter) shows as the span from the last draw to the first frame."""

    def __init__(self, real: TextIO, marks: _Marks, marker: str, out: str) -> None:
        self.real, self.marks, self.marker, self.out = real, marks, marker, out
        self.tail = ""
        self.written = False
        self.last_draw: tuple[float, float] | None = None

    def _watch_draws(self) -> None:
        """Wrap ``App._display`` once Textual's app module is loaded (by the first write it
        is: the driver writes first): importing it sooner would move the imports measured."""
        app_module = sys.modules.get("textual.app")
        if app_module is None:
            return
        app_class = app_module.App
        display = app_class._display

        def drawn(app: Any, *args: Any, **kwargs: Any) -> Any:
            if self.last_draw is None:
                self.marks.mark("first draw")
            self.last_draw = self.marks.now()
            return display(app, *args, **kwargs)

        app_class._display = drawn

    def write(self, text: str) -> int:
        if not self.written:  # the driver's first escape codes: the App has started
            self.written = True
            self.marks.mark("first write")
            self._watch_draws()
        written = self.real.write(text)
        plain = ANSI.sub("", text)
        if self.marker in plain or self.marker in self.tail + plain[:64]:
            self.real.flush()
            if self.last_draw is not None:
                self.marks.points.append(("last draw", *self.last_draw))
            self.marks.mark("first frame")
            self.marks.write(self.out)
            os._exit(0)
        self.tail = plain[-64:]
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _timed(module: Any, name: str, marks: _Marks, before: Callable[[], None] | None = None) -> None:
    function: Callable[..., Any] = getattr(module, name)

    def step(*args: Any, **kwargs: Any) -> Any:
        marks.mark(f"{name} >")
        if before is not None:
            before()
        try:
            return function(*args, **kwargs)
        finally:
            marks.mark(f"{name} <")

    setattr(module, name, step)


def _watch_reads(marks: _Marks) -> None:
    """The first reads (a live console's, in the hub's workers) and the wait for them before
    the first snapshot (``Hub.tick_if_read``): each one's start and end is a point. Called
    as the session opens, which imports the hub anyway."""
    from gpucon import hub

    read = hub.guarded_read  # type: ignore[attr-defined]
    seen: set[str] = set()

    def guarded_read(source: Any, *args: Any) -> Any:
        first = source.name not in seen
        seen.add(source.name)
        if first:
            marks.mark(f"{source.name} read >")
        try:
            return read(source, *args)
        finally:
            if first:
                marks.mark(f"{source.name} read <")

    hub.guarded_read = guarded_read  # type: ignore[attr-defined,assignment]
    _timed(hub.Hub, "tick_if_read", marks)


def child(argv: list[str]) -> None:
    """``--child OUT MARKER [--switch-interval S] (-m MODULE | FILE) ARGS...``: run the
    program, noting points (``--switch-interval``: Python's, set before anything else)."""
    out, marker, *argv = argv
    if argv[0] == "--switch-interval":
        sys.setswitchinterval(float(argv[1]))
        argv = argv[2:]
    target, *rest = argv
    marks = _Marks()
    marks.mark("first line")
    sys.meta_path.insert(0, _FirstImports(marks))
    real = sys.__stderr__
    assert real is not None
    # Textual's driver draws on sys.__stderr__: the stand-in sees every frame
    sys.__stderr__ = _Terminal(real, marks, marker, out)  # type: ignore[misc,assignment]
    import runpy

    if target == "-m":
        if rest[0] == "gpucon.commands.cli":
            from gpucon.commands import console

            for name in STEPS:
                _timed(
                    console, name, marks, (lambda: _watch_reads(marks)) if name == "_open" else None
                )
        sys.argv = rest
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = [target, *rest]
        runpy.run_path(target, run_name="__main__")


# one program to start: (label, argv after the child's own arguments, marker, checkout,
# Python's switch interval arguments)
Program = tuple[str, list[str], str, Path, list[str]]


def _starts(programs: list[Program], starts: int) -> None:
    """Each program started ``starts`` times, interleaved round by round (the order turning
    by one each round), so that all see the same machine state; then each one's points."""
    import statistics
    import tempfile

    from benchmarks.pty_run import run_in_pty

    cpu: dict[str, dict[str, list[float]]] = {p[0]: {} for p in programs}
    wall: dict[str, dict[str, list[float]]] = {p[0]: {} for p in programs}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="gpucon-phases-") as tmp:
        env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tmp) / "pyc"))
        for i in range(starts + 1):  # the first round fills the bytecode cache: not counted
            turn = i % len(programs)
            for label, program, marker, checkout, switch in programs[turn:] + programs[:turn]:
                out = Path(tmp) / f"marks{i}.tsv"
                out.unlink(missing_ok=True)
                argv = [sys.executable, "-m", "benchmarks.startup_phases", "--child", str(out)]
                # that checkout's gpucon (and this module) first on the path
                rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
                own_env = {**env, "PYTHONPATH": os.pathsep.join([str(checkout), str(ROOT), *rest])}
                run_in_pty(
                    [*argv, marker, *switch, *program],
                    marker=None,
                    duration_s=10,
                    env=own_env,
                    cwd=str(checkout),
                )
                if i == 0 or not out.exists():
                    continue
                for line in out.read_text().splitlines():
                    name, c, w = line.split("\t")
                    cpu[label].setdefault(name, []).append(float(c))
                    wall[label].setdefault(name, []).append(float(w))
    for label, *_ in programs:
        reached = len(wall[label].get("first frame", []))
        print(f"{label} ({reached} of {starts} starts reached the frame):")
        for name, values in cpu[label].items():
            print(
                f"  {name:34s} CPU min {min(values):6.1f} median {statistics.median(values):6.1f}"
                f"   wall median {statistics.median(wall[label][name]):6.1f} ms"
            )


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
        return
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--starts", type=int, default=13)
    parser.add_argument("--live", metavar="CONFIG", help="also gpucon live on this config")
    parser.add_argument("--marker", default="H200", help="the live console's first-frame text")
    parser.add_argument(
        "--switch-interval",
        type=float,
        metavar="S",
        help="also the live console with Python's thread switch interval S from its start",
    )
    parser.add_argument("--no-demo", action="store_true", help="leave the demo out")
    parser.add_argument(
        "--base",
        type=Path,
        metavar="DIR",
        help="also another checkout's consoles (before), started interleaved with these",
    )
    args = parser.parse_args()
    cli = ["-m", "gpucon.commands.cli"]
    checkouts = [("", ROOT)] if args.base is None else [("base ", args.base.resolve()), ("", ROOT)]
    programs: list[Program] = []
    for prefix, checkout in checkouts:
        if not args.no_demo:
            programs.append((f"{prefix}gpucon demo", [*cli, "demo"], "sdxl", checkout, []))
        if args.live:
            live = [*cli, "live", "--config", str(Path(args.live).resolve()), "--read-only"]
            programs.append((f"{prefix}gpucon live", live, args.marker, checkout, []))
            if args.switch_interval is not None:
                switch = ["--switch-interval", str(args.switch_interval)]
                label = f"{prefix}gpucon live, switch interval {args.switch_interval:g} s"
                programs.append((label, live, args.marker, checkout, switch))
    hello = str(ROOT / "benchmarks" / "hello_app.py")
    programs.append(("textual hello-world", [hello], "Hello, world", ROOT, []))
    _starts(programs, args.starts)


if __name__ == "__main__":
    main()
