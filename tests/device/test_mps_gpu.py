"""MpsControl against the real CUDA MPS control daemon on the GPU machine (device tool).

Starts a private daemon (its own pipe and log directory under a temporary folder, so nothing
else on the machine uses it), connects a tiny CUDA client, queries, changes the default active
thread percentage and pinned memory limit, and quits it cleanly.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucon.controls.mps import MpsControl, MpsError

pytestmark = pytest.mark.gpu
CLIENT = Path(__file__).with_name("cuda_client.py")


@pytest.fixture
def control(tmp_path: Path) -> Iterator[MpsControl]:
    if shutil.which("nvidia-cuda-mps-control") is None:
        pytest.skip("nvidia-cuda-mps-control is not installed here")
    ctl = MpsControl(pipe_dir=tmp_path / "mps-pipe", log_dir=tmp_path / "mps-log", timeout_s=10)
    yield ctl
    if ctl.pid_file().exists():
        with contextlib.suppress(MpsError):
            ctl.quit(wait_s=10)


def test_daemon_start_client_query_set_quit(control: MpsControl) -> None:
    assert not control.is_running()
    control.start()
    assert control.is_running()
    assert control.default_thread_pct() == 100.0
    env = dict(os.environ)
    env["CUDA_MPS_PIPE_DIRECTORY"] = str(control.pipe_dir)
    env["CUDA_MPS_LOG_DIRECTORY"] = str(control.log_dir)
    client = subprocess.Popen(
        [sys.executable, str(CLIENT)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout is not None and client.stdin is not None
        assert client.stdout.readline().strip() == "ready"
        servers = control.server_pids()
        assert len(servers) == 1, "a CUDA client under MPS makes the daemon start one server"
        control.set_default_thread_pct(50)
        assert control.default_thread_pct() == 50.0
        control.set_default_pinned_mem_limit(0, "2G")
        limit = control.default_pinned_mem_limit(0)
        assert limit is not None and "2" in limit
        state = control.state(device=0)
        assert state.daemon_running is True
        assert state.default_thread_pct == 50.0
        assert [pid for pid, _ in state.thread_pct_by_server] == [str(servers[0])]
        client.stdin.close()
        assert client.wait(timeout=30) == 0
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    started = time.monotonic()
    control.quit(wait_s=15)
    assert time.monotonic() - started < 5, "quit is seen when the daemon exits"
    assert not control.is_running()
    log = (control.log_dir / "control.log").read_text()
    assert "quit" in log.lower()
