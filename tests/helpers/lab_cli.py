"""``gpucon lab`` run as a command in tests: its output read line by line until a line says
what the test waits for."""

from __future__ import annotations

import subprocess
import time


def read_until(
    proc: subprocess.Popen[str], lines: list[str], text: str, timeout_s: float = 30.0
) -> str | None:
    """Read ``proc``'s output into ``lines`` until a line contains ``text`` (returned); None
    when the output ends or ``timeout_s`` passes first."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return None
        lines.append(line)
        if text in line:
            return line
    return None
