"""The lab says once which of its children exited, how, and the last line of its log: the
scheduler that died of an exception, a backend killed by SIGKILL; one still running says
nothing. Real child processes (``ManagedProcess``)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from gpucon.lab.exits import newly_exited, watch_exits
from gpucon.lab.processes import ManagedProcess

pytestmark = pytest.mark.integration


def started(tmp_path: Path, name: str, script: str) -> ManagedProcess:
    proc = ManagedProcess(name, ["sh", "-c", script], tmp_path / f"{name}.log")
    proc.start()
    return proc


def test_each_exit_is_told_once_with_how_and_the_logs_last_line(tmp_path: Path) -> None:
    crashed = started(
        tmp_path, "scheduler", "echo reading; echo 'ResponseError: UNBLOCKED'; exit 1"
    )
    killed = started(tmp_path, "lab-b1", "echo serving; exec sleep 60")
    running = started(tmp_path, "lab-b0", "exec sleep 60")
    try:
        assert crashed.proc is not None
        crashed.proc.wait(timeout=10)
        killed.signal_group(signal.SIGKILL)
        assert killed.proc is not None
        killed.proc.wait(timeout=10)
        told: set[str] = set()
        lines = newly_exited([crashed, killed, running], told)
        assert lines == [
            "lab: scheduler exited with code 1; its log ends: ResponseError: UNBLOCKED "
            f"({tmp_path / 'scheduler.log'})",
            f"lab: lab-b1 was killed by SIGKILL; its log ends: serving ({tmp_path / 'lab-b1.log'})",
        ]
        assert newly_exited([crashed, killed, running], told) == []  # once each

        said: list[str] = []
        stop = threading.Event()
        thread = watch_exits([running], said.append, stop, every_s=0.05)
        time.sleep(0.2)
        assert said == []  # still running
        running.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not said and time.monotonic() < deadline:
            time.sleep(0.05)
        assert said == [f"lab: lab-b0 was killed by SIGTERM ({tmp_path / 'lab-b0.log'})"]
        stop.set()
        thread.join(timeout=5)
        assert not thread.is_alive()
    finally:
        for proc in (crashed, killed, running):
            proc.stop(grace_s=2)
