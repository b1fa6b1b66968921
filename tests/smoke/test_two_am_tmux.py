"""The 2 AM flow in a real terminal (tmux, 80x24): from launch to a confirmed drain of the dead
backend in five keystrokes, and a paused table that two captures seconds apart show the same.

Each test starts its own tmux server on a private socket (``Tmux`` from the demo smoke test);
the assertions read ``tmux capture-pane`` text, what a user would see, and each key is sent once
the screen shows the last one handled (no fixed sleeps: they must pass on a busy machine).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.smoke.test_demo_tmux import START_S, TABLE_KEYS, Tmux, key_bar

pytestmark = pytest.mark.slow


def start_demo(tmp_path: Path, *args: str, width: int = 80, height: int = 24) -> Tmux:
    """``gpucon demo ARGS`` in a new tmux server of its own, in a window ``width``x``height``;
    the shell says ``GPUCON-EXIT=<status>`` when the console exits."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/test installs it)")
    t = Tmux(tmp_path / "tmux.sock")
    env = {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TERM": "xterm-256color",
    }
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    command = (
        f"env -u COLUMNS -u LINES {exports} {sys.executable} -m gpucon.commands.cli demo "
        f"{' '.join(args)}; echo GPUCON-EXIT=$?; sleep 600"
    )
    t.new_session(command, width, height)
    return t


@pytest.fixture
def backend_down(tmp_path: Path) -> Iterator[Tmux]:
    t = start_demo(tmp_path, "--size", "512", "--scenario", "backend-down", "--refresh", "1")
    try:
        yield t
    finally:
        t("kill-server")


ALERT_KEYS = "⏎ Go to row"  # the key bar while the alerts have the focus


def table_lines(screen: str) -> list[str]:
    """All but the status line, which stays live by design (a source dying must show)."""
    return screen.splitlines()[1:]


def test_five_keystrokes_from_launch_to_a_confirmed_drain_of_the_dead_backend(
    backend_down: Tmux,
) -> None:
    tmux = backend_down
    # 512 GPUs, the incident 10 ticks in: the alert comes a while after the start
    screen = tmux.wait_for(
        "the dead backend's alert", lambda s: "backend down" in s and TABLE_KEYS in s, START_S
    )
    line = next(row for row in screen.splitlines() if "backend down" in row)
    dead = line.split()[2]  # CRIT <age> NAME  backend down
    keys: list[str] = []

    def press(key: str) -> None:
        keys.append(key)
        tmux.press(key)

    press("Tab")  # focus the alerts
    tmux.wait_for("the alerts' keys", lambda s: ALERT_KEYS in key_bar(s))
    press("Enter")  # go to the top alert's row: the table has the focus, that row selected
    tmux.wait_for("the table's keys", lambda s: TABLE_KEYS in key_bar(s))
    press("d")  # drain it
    tmux.wait_for("the drain plan", lambda s: f"Drain {dead}" in s)
    # Cancel has the focus from the plan's first frame: Tab to the confirm button, Enter (one
    # after the other: the plan screen takes both, in order)
    press("Tab")
    press("Enter")
    tmux.wait_for("the drain to finish", lambda s: f"OK: drained {dead}" in s)
    assert len(keys) == 5, keys


def test_paused_table_holds_still_while_the_live_one_moves(tmp_path: Path) -> None:
    tmux = start_demo(tmp_path, "--scenario", "burst", "--refresh", "0.5")
    try:
        tmux.wait_for("the table", lambda s: "P95/SLO ms" in s and "ALERTS" in s, START_S)
        live = tmux.screen()
        tmux.wait_for("the live table to move", lambda s: table_lines(s) != table_lines(live))
        tmux.press("z")
        tmux.wait_for("the pause banner", lambda s: "PAUSED — live data held since" in s)
        # the frame that was on its way when z came is drawn, then nothing moves: a live table
        # under a burst, refreshed every 0.5 s, never holds still for 1.5 s
        first = tmux.wait_still("the paused table to settle", table_lines, 1.5)
        held_until = time.monotonic() + 3.0  # six refreshes, each capture the same
        while time.monotonic() < held_until:
            assert table_lines(tmux.screen()) == table_lines(first)
            time.sleep(0.25)
        tmux.press("z")
        tmux.wait_for(
            "the table to move again",
            lambda s: table_lines(s) != table_lines(first) and "PAUSED" not in s,
        )
    finally:
        tmux("kill-server")
