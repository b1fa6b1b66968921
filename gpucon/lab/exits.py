"""The lab says when one of its children dies: the scheduler, a backend server, Redis.

A lab is where one breaks things on purpose, and where things break that were not meant to
(the scheduler died of a ``FLUSHALL`` under its blocked read and the lab said nothing: the
console showed a queue nobody read while the lab's terminal looked fine). ``watch_exits``
polls the lab's processes and prints, once each, which one exited, how (its exit code or the
signal), and the last line of its log, so what was killed on purpose and what died of its own
are both told where the lab was started.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence

from gpucon.lab.processes import ManagedProcess
from gpucon.redact import redact


def exit_line(proc: ManagedProcess) -> str | None:
    """``lab: scheduler exited with code 1; its log ends: ResponseError: ...``, or None while it
    runs (or was never started)."""
    if proc.proc is None:
        return None
    code = proc.proc.poll()
    if code is None:
        return None
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    tail = proc.log_tail(1).strip()
    ends = f"; its log ends: {tail[:160]}" if tail else ""
    return redact(f"lab: {proc.name} {how}{ends} ({proc.log_path})")


def newly_exited(processes: Sequence[ManagedProcess], told: set[str]) -> list[str]:
    """The exit lines of the processes that exited since the last call (``told`` names those
    already told, and is updated)."""
    lines = []
    for proc in processes:
        if proc.name in told:
            continue
        line = exit_line(proc)
        if line is not None:
            told.add(proc.name)
            lines.append(line)
    return lines


def watch_exits(
    processes: Sequence[ManagedProcess],
    say: Callable[[str], None],
    stop: threading.Event,
    every_s: float = 1.0,
) -> threading.Thread:
    """A daemon thread that says each child's exit once, until ``stop`` is set."""

    def run() -> None:
        told: set[str] = set()
        while not stop.wait(every_s):
            for line in newly_exited(processes, told):
                say(line)

    thread = threading.Thread(target=run, name="lab-exits", daemon=True)
    thread.start()
    return thread
