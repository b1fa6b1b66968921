"""CUDA MPS control: drive ``nvidia-cuda-mps-control`` here or on a VM (``mps_transport``).

Starts the control daemon (``nvidia-cuda-mps-control -d``) with a given pipe and log
directory, sends it commands on stdin (``get_server_list``, ``get_default_active_thread_
percentage``, ``set_default_active_thread_percentage``, ``set_default_device_pinned_mem_limit``,
``quit``, ...), and reads its state into ``MpsState``. Every command runs as an argument list
(no shell) with a timeout; every failure raises ``MpsError`` naming the command. Values are
validated before anything is sent, so a bad percentage or limit changes nothing.
The commands run through a transport (``gpucon.controls.mps_transport``): this machine by
default, or a VM over SSH. ``speaks(command)`` tells whether the driver's daemon knows a
command (older drivers have no pinned-memory limits).
"""

from __future__ import annotations

import math
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpucon.controls.mps_transport import LocalTransport, Transport
from gpucon.model.fleet import MpsState
from gpucon.sources.mps import parse_percentage, parse_pids

__all__ = [
    "CONTROL_EXECUTABLE",
    "MpsAnswer",
    "MpsControl",
    "MpsError",
    "check_device",
    "check_mem_limit",
    "format_percentage",
    "parse_percentage",
    "parse_pids",
]

CONTROL_EXECUTABLE = "nvidia-cuda-mps-control"
# what the daemon prints when asked for a value it has no setting for
_UNSET_ANSWERS = frozenset({"", "none", "n/a", "not set"})
# how a daemon says it does not know a command (older drivers: no pinned-memory limits)
_UNKNOWN_COMMAND = ("unrecognized", "unknown command", "invalid command", "not supported")
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
    # where the commands run; None: this machine, through ``runner``
    transport: Transport | None = None

    def __post_init__(self) -> None:
        if self.transport is None:
            self.transport = LocalTransport(self.runner)

    @property
    def where(self) -> str:
        return self._transport().where

    def _transport(self) -> Transport:
        assert self.transport is not None  # set in __post_init__
        return self.transport

    def env(self) -> dict[str, str]:
        """The variables that point a program at this daemon (its clients need them too)."""
        env = dict(self.extra_env)
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(self.pipe_dir)
        env["CUDA_MPS_LOG_DIRECTORY"] = str(self.log_dir)
        return env

    def _run(self, argv: list[str], stdin: str | None, what: str) -> MpsAnswer:
        try:
            done = self._transport().run(
                argv, stdin=stdin, env=self.env(), timeout_s=self.timeout_s
            )
        except FileNotFoundError as exc:
            raise MpsError(f"{what}: {self.executable} not found ({exc.strerror})") from exc
        except TimeoutError as exc:
            raise MpsError(f"{what}: no answer within {self.timeout_s:g}s") from exc
        except OSError as exc:
            raise MpsError(f"{what}: {exc}") from exc
        answer = MpsAnswer(what, done.stdout, done.stderr, done.returncode)
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
            try:
                self._transport().makedirs(str(directory))
            except OSError as exc:
                raise MpsError(f"{self.executable} -d: cannot make {directory}: {exc}") from exc
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
            if not self._pid_file_exists():
                return
            time.sleep(0.05)
        if self.is_running():
            raise MpsError(f"MPS command 'quit': daemon still answers after {wait_s:g}s")

    def control_socket(self) -> Path:
        return self.pipe_dir / "control"

    def pid_file(self) -> Path:
        """Written by the daemon while it runs; removed when it exits (the socket stays)."""
        return self.pipe_dir / "nvidia-cuda-mps-control.pid"

    def _pid_file_exists(self) -> bool:
        try:
            return self._transport().exists(str(self.pid_file()))
        except OSError as exc:
            raise MpsError(f"is the daemon running? {exc}") from exc

    def is_running(self) -> bool:
        """True when a daemon answers on this pipe directory."""
        if not self._pid_file_exists():
            return False
        try:
            self.command("get_default_active_thread_percentage")
        except MpsError:
            return False
        return True

    def speaks(self, query: str) -> bool:
        """Whether the daemon knows the command ``query`` (a read: ``get_...``). A daemon that
        does not answers "Unrecognized command" or the like; any other failure is raised."""
        try:
            self.command(query)
        except MpsError as error:
            text = str(error).lower()
            if any(word in text for word in _UNKNOWN_COMMAND):
                return False
            raise
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
