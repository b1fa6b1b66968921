"""Run a terminal program in a pseudo-terminal and measure it as a user's terminal would see it.

Measures: time from process start until a marker shows on screen, bytes written to the
terminal, CPU seconds (user + system, children included) and peak RSS, read from /proc.
Used by the startup and CPU benchmarks; Linux only.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from dataclasses import dataclass, field

ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]|\x1b[=>]")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class PtyResult:
    marker_s: float | None
    cpu_at_marker_s: float
    bytes_at_marker: int
    bytes_written: int
    cpu_s: float
    peak_rss_mib: float
    wall_s: float
    # (seconds since start, bytes) of every read from the terminal: steady-state rates
    writes: list[tuple[float, int]] = field(default_factory=list)

    def bytes_per_s_after(self, start_s: float) -> float:
        """Terminal bytes per second from ``start_s`` seconds after the start to the end."""
        span = self.wall_s - start_s
        late = sum(n for t, n in self.writes if t >= start_s)
        return late / span if span > 0 else 0.0


def _cpu_s(pid: int) -> float:
    """CPU seconds (user+sys) of the process, of the children it has waited for, and of its
    children still running, theirs included: a live console forks one for NVML's first read,
    and that CPU is the console's cost as much as its own threads' are."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = sum(int(tick) for tick in fields[11:15]) / CLOCK_TICKS
    for children in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError), open(children) as f:
            for child in f.read().split():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    cpu += _cpu_s(int(child))
    return cpu


def _cpu_and_rss(pid: int) -> tuple[float, float]:
    """CPU seconds of the process and its children (``_cpu_s``), and its high-water RSS in MiB."""
    try:
        cpu = _cpu_s(pid)
        rss = 0.0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    rss = int(line.split()[1]) / 1024
        return cpu, rss
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0, 0.0


def run_in_pty(
    argv: list[str],
    *,
    marker: bytes | None,
    duration_s: float,
    cols: int = 180,
    rows: int = 50,
    env: dict[str, str] | None = None,
    stop_at_marker: bool = False,
    capture: list[bytes] | None = None,
    cwd: str | None = None,
) -> PtyResult:
    """Start ``argv`` in a pty of cols×rows; run ``duration_s`` (or until the marker).
    ``capture``: every chunk the program wrote is appended to it; ``cwd``: the folder it
    starts in (``python -m`` imports that folder's checkout: before/after comparisons)."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        child_env = dict(os.environ if env is None else env)
        child_env.update(TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
        if cwd is not None:
            os.chdir(cwd)
        os.execvpe(argv[0], argv, child_env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    start = time.perf_counter()
    seen = b""
    marker_s: float | None = None
    cpu_at_marker = 0.0
    bytes_at_marker = 0
    total = 0
    writes: list[tuple[float, int]] = []
    cpu = rss = 0.0
    try:
        while True:
            elapsed = time.perf_counter() - start
            if elapsed >= duration_s or (stop_at_marker and marker_s is not None):
                break
            ready, _, _ = select.select([fd], [], [], min(0.05, duration_s - elapsed))
            if fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                total += len(chunk)
                if capture is not None:
                    capture.append(chunk)
                writes.append((time.perf_counter() - start, len(chunk)))
                if marker is not None and marker_s is None:
                    seen = (seen + ANSI.sub(b"", chunk))[-8192:]
                    if marker in seen:
                        marker_s = time.perf_counter() - start
                        cpu_at_marker = _cpu_and_rss(pid)[0]
                        bytes_at_marker = total
            cpu, rss = _cpu_and_rss(pid)
    finally:
        cpu, rss = _cpu_and_rss(pid) if _cpu_and_rss(pid)[0] else (cpu, rss)
        wall = time.perf_counter() - start
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(50):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    return PtyResult(marker_s, cpu_at_marker, bytes_at_marker, total, cpu, rss, wall, writes)
