"""``gpucon demo --record FILE`` with FILE in a directory that does not exist, in a real
terminal (tmux, 150 columns): the console starts and shows the fleet, its status bar says
``REC FAILED`` with the OS's reason, a notification names the file once, and after ``q`` the
terminal keeps the reason (printed when the console exits); the exit status is 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.smoke.test_demo_tmux import START_S
from tests.smoke.test_two_am_tmux import start_demo

pytestmark = pytest.mark.slow


def test_the_console_starts_and_says_the_recording_failed(tmp_path: Path) -> None:
    path = tmp_path / "gone" / "night.sqlite"
    t = start_demo(tmp_path, "--record", str(path), width=150, height=40)
    try:
        screen = t.wait_for(
            "the table, REC FAILED and the notification",
            lambda s: (
                "REC FAILED night.sqlite: No such file or directory" in s
                and "node-" in s
                and "gpucon --record" in s
            ),
            START_S,
        )
        # the notification, once, with the whole reason (it wraps in its box: read it joined)
        joined = " ".join(line.strip(" │▌▐") for line in screen.splitlines())
        assert "cannot record to" in joined, screen
        assert screen.count("gpucon --record") == 1, screen
        t.press("q")
        after = t.wait_for("the console to exit", lambda s: "GPUCON-EXIT=" in s)
        assert "GPUCON-EXIT=0" in after, after
        said = t("capture-pane", "-p", "-J", "-t", "demo")  # -J: the wrapped line joined
        assert f"gpucon: --record: cannot record to {path}: No such file or directory" in said, said
        assert not path.parent.exists()
    finally:
        t("kill-server")
