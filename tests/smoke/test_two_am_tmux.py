"""The 2 AM flow in a real terminal (tmux, 80x24): from launch to a confirmed drain of the dead
backend in five keystrokes, and a paused table that two captures seconds apart show the same.

Each test starts its own tmux server on a private socket (``Tmux`` from the demo smoke test);
the assertions read ``tmux capture-pane`` text, what a user would see.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.smoke.test_demo_tmux import Tmux

pytestmark = pytest.mark.slow


def start_demo(tmp_path: Path, *args: str, width: int = 80, height: int = 24) -> Tmux:
    """``gpucon demo ARGS`` in a new tmux server of its own, in a window ``width``x``height``;
    the shell says ``GPUCON-EXIT=<status>`` when the console exits."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/test installs it)")
    t = Tmux(tmp_path / "tmux.sock")
    t("-f", "/dev/null", "start-server")
    env = {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TERM": "xterm-256color",
    }
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    command = (
        f"env -u COLUMNS -u LINES {exports} {sys.executable} -m gpucon.commands.cli demo "
        f"{' '.join(args)}; echo GPUCON-EXIT=$?; sleep 30"
    )
    size = ("-x", str(width), "-y", str(height))
    t("new-session", "-d", "-s", "demo", *size, command)
    t("resize-window", "-t", "demo", *size)
    return t


@pytest.fixture
def backend_down(tmp_path: Path) -> Iterator[Tmux]:
    t = start_demo(tmp_path, "--size", "512", "--scenario", "backend-down", "--refresh", "1")
    try:
        yield t
    finally:
        t("kill-server")


def press(tmux: Tmux, key: str) -> None:
    subprocess.run(
        ["tmux", "-S", str(tmux.socket), "send-keys", "-t", "demo", key], check=True, timeout=10
    )


def test_five_keystrokes_from_launch_to_a_confirmed_drain_of_the_dead_backend(
    backend_down: Tmux,
) -> None:
    tmux = backend_down
    screen = tmux.wait_for("the dead backend's alert", lambda s: "backend down" in s, 60.0)
    line = next(row for row in screen.splitlines() if "backend down" in row)
    dead = line.split()[2]  # CRIT <age> NAME  backend down
    keys = ["Tab", "Enter", "d"]  # focus the alerts, go to the top alert's row, drain
    for key in keys:
        press(tmux, key)
        time.sleep(0.3)
    tmux.wait_for("the drain plan", lambda s: f"Drain {dead}" in s)
    keys += ["Tab", "Enter"]  # Cancel has the focus: Tab to the confirm button, Enter
    for key in keys[3:]:
        press(tmux, key)
        time.sleep(0.3)
    tmux.wait_for("the drain to finish", lambda s: f"OK: drained {dead}" in s, 30.0)
    assert len(keys) == 5


def test_paused_table_holds_still_while_the_live_one_moves(tmp_path: Path) -> None:
    tmux = start_demo(tmp_path, "--scenario", "burst", "--refresh", "0.5")
    try:
        tmux.wait_for("the table", lambda s: "P95/SLO ms" in s and "ALERTS" in s, 30.0)
        live = tmux.screen()
        tmux.wait_for("the live table to move", lambda s: s != live, 15.0)
        press(tmux, "z")
        tmux.wait_for("the pause banner", lambda s: "PAUSED — live data held since" in s)
        time.sleep(0.5)
        first = tmux.screen()
        time.sleep(3.0)  # six refreshes
        # all but the status line, which stays live by design (a source dying must show)
        assert tmux.screen().splitlines()[1:] == first.splitlines()[1:]
        press(tmux, "z")
        tmux.wait_for("the table to move again", lambda s: s != first and "PAUSED" not in s)
    finally:
        tmux("kill-server")
