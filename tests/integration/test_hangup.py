"""A dropped SSH session never leaves a console behind: when its terminal goes away (the pty
closed, SIGHUP) gpucon exits within 5 s, and a running action stops at a step boundary,
records how far it got and releases its locks."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gpucon.actions import drain, stop
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import Outcome, OutcomeStatus, ProgressEvent, StepStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab import registry_scripts as rs
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys

pytestmark = pytest.mark.integration

CONSOLE = "import sys; from gpucon.commands.cli import main; sys.exit(main(['demo']))"


def start_console(tmp_path: Path, *, ignore_sighup: bool = False) -> tuple[int, int]:
    """``gpucon demo`` on a fresh pty; returns (pid, the pty's master fd) once it drew."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty
        try:
            if ignore_sighup:  # as under nohup: only the tty's EIO tells
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
            os.environ.update(TERM="xterm-256color", XDG_CONFIG_HOME=str(tmp_path))
            os.environ["XDG_STATE_HOME"] = str(tmp_path / "state")
            os.execv(sys.executable, [sys.executable, "-c", CONSOLE])
        finally:
            os._exit(127)
    drawn = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and b"\x1b[?1049h" not in drawn:  # the alternate screen
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                drawn += os.read(fd, 65536)
            except OSError:
                break
    assert b"\x1b[?1049h" in drawn, drawn[-300:]
    time.sleep(0.5)  # a frame or two on screen
    return pid, fd


def wait_exit(pid: int, timeout_s: float) -> int | None:
    """The exit code, or None if the process is still there after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def kill_if_running(pid: int, code: int | None) -> None:
    """End the console this test started if the test failed before it exited."""
    if code is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@pytest.mark.parametrize("ignore_sighup", [False, True], ids=["sighup", "nohup"])
def test_closing_the_pty_ends_the_console_within_5_s(tmp_path: Path, ignore_sighup: bool) -> None:
    pid, fd = start_console(tmp_path, ignore_sighup=ignore_sighup)
    code = None
    try:
        os.close(fd)  # the SSH session dropped
        started = time.monotonic()
        code = wait_exit(pid, 5.0)
        assert code is not None, "the console outlived its terminal"
        assert code == 129, code  # its own exit, not killed by the signal
        assert time.monotonic() - started < 5.0
    finally:
        kill_if_running(pid, code)


def test_sighup_on_a_live_terminal_exits_and_restores_it(tmp_path: Path) -> None:
    pid, fd = start_console(tmp_path)
    code = None
    try:
        os.kill(pid, signal.SIGHUP)
        tail = b""
        deadline = time.monotonic() + 5.0
        while code is None and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                with contextlib.suppress(OSError):
                    tail += os.read(fd, 65536)
            code = wait_exit(pid, 0)
        assert code == 129
        assert b"\x1b[?1049l" in tail  # it left the alternate screen: the terminal is usable
    finally:
        os.close(fd)
        kill_if_running(pid, code)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(c, [
        BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
        BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
    ])  # fmt: skip
    yield c
    c.close()
    stop.clear()


def test_a_stop_ends_a_running_drain_at_a_step_boundary_and_frees_its_lock(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    ok = client.eval(rs.ASSIGN_LUA, 3, *rs.script_keys("b1"), "1-0", "b1")  # never answered
    assert ok[0] == 1
    snapshot, _ = read_registry(client)
    plan = drain.plan_drain(snapshot, {"backend": "b1", "timeout_s": 60, "poll_s": 0.05})
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(registry, AuditLog(tmp_path / "audit.jsonl"), "ann@h1")
    waiting = threading.Event()
    outcomes: list[Outcome] = []

    def progress(event: ProgressEvent) -> None:
        if event.step == "wait:b1" and event.status is StepStatus.RUNNING:
            waiting.set()

    worker = threading.Thread(
        target=lambda: outcomes.append(execute(drain.apply_drain, plan, controls, progress))
    )
    worker.start()
    assert waiting.wait(10), "the drain never reached its wait"
    assert client.exists(keys.lock_key("b1")) == 1
    stopped_at = time.monotonic()
    stop.request_stop("the console is closing: the terminal went away")
    assert stop.wait_idle(3.0)
    assert time.monotonic() - stopped_at < 1.0
    worker.join(1)
    (outcome,) = outcomes
    assert outcome.status is OutcomeStatus.FAILED
    assert "stopped before 'wait:b1': the console is closing" in outcome.message
    assert "state=draining" in outcome.state_left  # how far it got, said
    assert client.exists(keys.lock_key("b1")) == 0  # the lock is free at once, not at expiry
    records = read_audit(tmp_path / "audit.jsonl")
    assert (records[-1].event, records[-1].status) == ("outcome", "failed")
    # once stopping, nothing new starts
    again = execute(drain.apply_drain, plan, controls, lambda e: None)
    assert again.status is OutcomeStatus.REFUSED and "nothing was done" in again.message
    registry.close()
