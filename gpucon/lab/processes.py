"""Child processes of the lab: started in their own process group, stopped group and all.

Each process logs to a file in the lab directory. ``stop`` sends SIGTERM to the group, waits,
then SIGKILL, so nothing the lab started outlives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as exc:  # not up yet
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not come up in {timeout_s:.0f} s (last error: {last})")


def gpucon_argv(*args: str) -> list[str]:
    """argv running this gpucon's CLI with the current interpreter."""
    return [sys.executable, "-m", "gpucon.commands.cli", *args]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it if the lab dies without cleaning up (SIGKILL)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


class ManagedProcess:
    """One child in its own session/process group, logging to ``log_path``."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal_group(self, sig: int) -> None:
        # only while our child has not been reaped: its pid (= group id) cannot be reused yet
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def stop(self, grace_s: float = 5.0) -> None:
        if self.proc is None:
            return
        self.signal_group(signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.proc.wait(timeout=grace_s)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
