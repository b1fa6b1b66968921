"""CUDA MPS control, local transport: drive ``nvidia-cuda-mps-control`` on this machine.

Starts the control daemon (``nvidia-cuda-mps-control -d``) with a given pipe and log
directory, sends it commands on stdin (``get_server_list``, ``get_default_active_thread_
percentage``, ``set_default_active_thread_percentage``, ``set_default_device_pinned_mem_limit``,
``quit``, ...), and reads its state into ``MpsState``. Every command runs as an argument list
(no shell) with a timeout; every failure raises ``MpsError`` naming the command. Values are
validated before anything is sent, so a bad percentage or limit changes nothing.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpucon.model.fleet import MpsState

CONTROL_EXECUTABLE = "nvidia-cuda-mps-control"
# what the daemon prints when asked for a value it has no setting for
_UNSET_ANSWERS = frozenset({"", "none", "n/a", "not set"})
_MEM_LIMIT = re.compile(r"^[0-9]+(\.[0-9]+)?[KMGT]?$")
_DEVICE = re.compile(r"^([0-9]+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F-]+)$")


class MpsError(Exception):
    """An MPS control command failed; the message names the command and why."""


@dataclass(frozen=True, slots=True)
class MpsAnswer:
    command: str
    stdout: str
    stderr: str
    returncode: int


@dataclass
class MpsControl:
    """One MPS control daemon, identified by its pipe directory."""

    pipe_dir: Path
    log_dir: Path
    executable: str = CONTROL_EXECUTABLE
    timeout_s: float = 5.0
    extra_env: Mapping[str, str] = field(default_factory=dict)
    runner: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(self.pipe_dir)
        env["CUDA_MPS_LOG_DIRECTORY"] = str(self.log_dir)
        return env

    def _run(self, argv: list[str], stdin: str | None, what: str) -> MpsAnswer:
        try:
            done = self.runner(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                env=self._env(),
                check=False,
            )
        except FileNotFoundError as exc:
            raise MpsError(f"{what}: {self.executable} not found ({exc.strerror})") from exc
        except subprocess.TimeoutExpired as exc:
            raise MpsError(f"{what}: no answer within {self.timeout_s:g}s") from exc
        except OSError as exc:
            raise MpsError(f"{what}: {exc}") from exc
        answer = MpsAnswer(what, done.stdout or "", done.stderr or "", done.returncode)
        if done.returncode != 0:
            detail = (answer.stderr or answer.stdout).strip().splitlines()
            raise MpsError(
                f"{what}: exit status {done.returncode}" + (f": {detail[-1]}" if detail else "")
            )
        return answer

    # --- daemon lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Start the control daemon (``-d``) on this pipe directory."""
        for directory in (self.pipe_dir, self.log_dir):
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._run([self.executable, "-d"], None, f"{self.executable} -d")

    def command(self, text: str) -> str:
        """Send one control command; its stdout, stripped."""
        if "\n" in text or "\r" in text or not text.strip():
            raise MpsError(f"MPS command {text!r}: must be one non-empty line")
        return self._run([self.executable], text + "\n", f"MPS command {text!r}").stdout.strip()

    def quit(self, wait_s: float = 5.0) -> None:
        """Ask the daemon to quit and wait until it has exited (its pid file is removed)."""
        self.command("quit")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not self.pid_file().exists():
                return
            time.sleep(0.05)
        if self.is_running():
            raise MpsError(f"MPS command 'quit': daemon still answers after {wait_s:g}s")

    def control_socket(self) -> Path:
        return self.pipe_dir / "control"

    def pid_file(self) -> Path:
        """Written by the daemon while it runs; removed when it exits (the socket stays)."""
        return self.pipe_dir / "nvidia-cuda-mps-control.pid"

    def is_running(self) -> bool:
        """True when a daemon answers on this pipe directory."""
        if not self.pid_file().exists():
            return False
        try:
            self.command("get_default_active_thread_percentage")
        except MpsError:
            return False
        return True

    # --- queries -----------------------------------------------------------------------------
    def server_pids(self) -> tuple[int, ...]:
        return parse_pids(self.command("get_server_list"))

    def default_thread_pct(self) -> float | None:
        return parse_percentage(self.command("get_default_active_thread_percentage"))

    def thread_pct_of(self, server_pid: int) -> float | None:
        return parse_percentage(self.command(f"get_active_thread_percentage {int(server_pid)}"))

    def default_pinned_mem_limit(self, device: str | int = 0) -> str | None:
        answer = self.command(f"get_default_device_pinned_mem_limit {check_device(device)}")
        return None if answer.lower() in _UNSET_ANSWERS else answer

    # --- settings ----------------------------------------------------------------------------
    def set_default_thread_pct(self, pct: float) -> None:
        self.command(f"set_default_active_thread_percentage {format_percentage(pct)}")

    def set_default_pinned_mem_limit(self, device: str | int, limit: str) -> None:
        self.command(
            f"set_default_device_pinned_mem_limit {check_device(device)} {check_mem_limit(limit)}"
        )

    def state(self, device: str | int = 0) -> MpsState:
        """The daemon's state; ``daemon_running=False`` (and nothing else) when it is down."""
        if not self.is_running():
            return MpsState(daemon_running=False)
        pids = self.server_pids()
        return MpsState(
            daemon_running=True,
            default_thread_pct=self.default_thread_pct(),
            thread_pct_by_server=tuple(
                (str(pid), pct) for pid in pids if (pct := self.thread_pct_of(pid)) is not None
            ),
            pinned_mem_limit=self.default_pinned_mem_limit(device),
        )


def format_percentage(pct: float) -> str:
    """The percentage as the daemon takes it; ValueError naming the field when out of range."""
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not math.isfinite(pct):
        raise ValueError(f"active thread percentage: expected a number, got {pct!r}")
    if not 0 < pct <= 100:
        raise ValueError(f"active thread percentage: expected 0 < value <= 100, got {pct:g}")
    return f"{pct:g}"


def check_mem_limit(limit: str) -> str:
    text = str(limit).strip()
    if not _MEM_LIMIT.match(text):
        raise ValueError(f"pinned memory limit: expected a size like 2048M or 16G, got {limit!r}")
    return text


def check_device(device: str | int) -> str:
    text = str(device).strip()
    if not _DEVICE.match(text):
        raise ValueError(f"device: expected an index, GPU-UUID or MIG-UUID, got {device!r}")
    return text


def parse_pids(text: str) -> tuple[int, ...]:
    """PIDs from ``get_server_list`` output (one per line; other lines ignored)."""
    return tuple(int(token) for token in text.split() if token.isdigit())


def parse_percentage(text: str) -> float | None:
    """A percentage answer (``100.0``, ``60``); None when the daemon has none to give."""
    match = re.search(r"[0-9]+(\.[0-9]+)?", text)
    if match is None:
        return None
    value = float(match.group(0))
    return value if 0 < value <= 100 else None
