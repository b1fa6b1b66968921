"""`gpucon demo` in a real terminal (tmux), as a user runs it: start, see the table fill,
filter with `/`, open a detail with Enter, go back and quit with `q`.

tmux runs on a private socket in the test's temporary directory, never anyone's sessions;
the assertions read ``tmux capture-pane`` text, i.e. exactly what a user would see.

The tests wait on what the screen shows, never for a fixed time: the next key is sent once the
screen says the last one was handled (the key bar names the focused widget's keys: ``⏎ Detail``
for the table, ``⏎ Go to row`` for the alerts), with deadlines generous enough for a machine
busy with other work (they must pass beside a CPU hog).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

WIDTH, HEIGHT = 160, 45
# a console starting beside other work (imports, the first ticks) can take tens of seconds
START_S = 120.0
STEP_S = 60.0  # one key's effect on a busy machine
TABLE_KEYS = "⏎ Detail"  # the key bar while the slot table has the focus


class Tmux:
    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=60
        )
        return result.stdout

    def new_session(self, command: str, width: int, height: int) -> None:
        """Window ``demo`` running ``command``, on a server started with no user config.

        ``new-session`` starts the server itself (a separate ``start-server`` leaves a server
        with no session, which exits at once and may take the next client down with it). It
        is checked: a session that failed to start would read as a blank screen until a
        deadline, saying nothing of why."""
        argv = ["tmux", "-S", str(self.socket), "-f", "/dev/null", "new-session", "-d"]
        argv += ["-s", "demo", "-x", str(width), "-y", str(height), command]
        errors = []
        for _attempt in range(3):
            result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            if result.returncode == 0 and self.has_session():
                self("resize-window", "-t", "demo", "-x", str(width), "-y", str(height))
                return
            errors.append(f"rc={result.returncode} {result.stderr.strip()}")
            self("kill-server")
        raise AssertionError("tmux new-session failed: " + "; ".join(errors))

    def has_session(self) -> bool:
        result = subprocess.run(
            ["tmux", "-S", str(self.socket), "has-session", "-t", "demo"],
            capture_output=True,
            timeout=60,
        )
        return result.returncode == 0

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "demo")

    def press(self, *keys: str) -> None:
        """Send keys to the console (``-l``: literal text as one argument)."""
        self("send-keys", "-t", "demo", *keys)

    def wait_for(self, what: str, check: Callable[[str], bool], timeout: float = STEP_S) -> str:
        deadline = time.monotonic() + timeout
        text = shown = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if check(text):
                return text
            shown = text if text.strip() else shown
            time.sleep(0.2)
        raise AssertionError(
            f"timed out after {timeout:.0f}s waiting for {what}; the screen:\n{text}\n"
            f"the last screen with text on it:\n{shown}\n"
            f"tmux session there: {self.has_session()}; processes: {self.processes()}"
        )

    def processes(self) -> str:
        """What runs in the pane's process group (a console that never drew: hung or gone)."""
        pid = self("display-message", "-p", "-t", "demo", "#{pane_pid}").strip()
        if not pid.isdigit():
            return "no pane"
        ps = subprocess.run(
            ["ps", "-o", "pid,stat,etime,time,args", "--ppid", pid, "-p", pid],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return ps.stdout

    def wait_still(
        self, what: str, view: Callable[[str], object], still_s: float, timeout: float = STEP_S
    ) -> str:
        """The screen once ``view`` of it has not changed for ``still_s`` seconds."""
        deadline = time.monotonic() + timeout
        text = self.screen()
        since, seen = time.monotonic(), view(text)
        while time.monotonic() < deadline:
            time.sleep(0.2)
            text = self.screen()
            if view(text) != seen:
                since, seen = time.monotonic(), view(text)
            elif time.monotonic() - since >= still_s:
                return text
        raise AssertionError(
            f"timed out after {timeout:.0f}s waiting for {what}; the screen:\n{text}"
        )


def key_bar(screen: str) -> str:
    """The bottom line: the keys of the focused widget."""
    lines = [line for line in screen.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/test installs it)")
    t = Tmux(tmp_path / "tmux.sock")  # a private server: never anyone's sessions
    env = {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # no config: the demo needs none
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
    }
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    command = (
        # COLUMNS/LINES (pytest sets them) would override the pane's real size
        f"env -u COLUMNS -u LINES {exports} {sys.executable} -m gpucon.commands.cli demo --seed 7; "
        "echo GPUCON-EXIT=$?; sleep 600"  # the pane stays to be read; the server is killed
    )
    t.new_session(command, WIDTH, HEIGHT)  # no user config: a known, plain tmux
    try:
        yield t
    finally:
        t("kill-server")


def table_rows(screen: str) -> list[str]:
    """The slot table's rows: the lines above the bottom panels (the GPU panel names hosts too)."""
    rows = []
    for line in screen.splitlines():
        if line.startswith("─"):
            break
        if "node-" in line or "vm-" in line:
            rows.append(line)
    return rows


def test_demo_start_filter_detail_quit(tmux: Tmux) -> None:
    screen = tmux.wait_for(
        "the slot table to fill",
        lambda s: "HOST" in s and "DEMO" in s and len(table_rows(s)) >= 10,
        START_S,
    )
    assert "ACT%" in screen and "P95/SLO ms" in screen
    # the queue, GPU and alert panels are mounted in the frame after the first one
    screen = tmux.wait_for("the bottom panels", lambda s: "QUEUE" in s and "ALERTS" in s, START_S)
    assert "QUEUE" in screen and "ALERTS" in screen
    full = len(table_rows(screen))

    tmux.press("/")
    tmux.wait_for(
        "the filter box", lambda s: "filter: host, slot" in s and TABLE_KEYS not in key_bar(s)
    )
    tmux.press("-l", "bert")
    screen = tmux.wait_for(
        "the filter to apply", lambda s: 0 < len(table_rows(s)) < full and "bert" in s
    )
    rows = [r for r in table_rows(screen) if "HOST" not in r]
    assert all("bert" in r for r in rows), rows

    tmux.press("Enter")  # keep the filter, back to the table
    # the table has the focus again (a second Enter sent sooner would reach the filter box)
    tmux.wait_for("the table's keys", lambda s: TABLE_KEYS in key_bar(s) and "bert" in s)
    tmux.press("Enter")  # open the detail of the selected row
    detail = ("activity %", "BACKEND", "memory used GiB", "p95 ms", "bert")
    tmux.wait_for("the detail screen", lambda s: all(part in s for part in detail))

    tmux.press("q")  # back to the fleet
    tmux.wait_for("the fleet screen again", lambda s: "ACT%" in s and TABLE_KEYS in key_bar(s))
    tmux.press("q")  # quit
    tmux.wait_for("gpucon to exit cleanly", lambda s: "GPUCON-EXIT=" in s)
    assert "GPUCON-EXIT=0" in tmux.screen()
