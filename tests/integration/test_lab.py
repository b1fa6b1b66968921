"""``gpucon lab``: it starts a real stack on loopback, writes a config gpucon opens, and leaves
no process behind when it stops — on SIGTERM, and even when it is killed outright.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis

from gpucon.config import load_config
from gpucon.lab.lab import LabOptions, LabStack
from gpucon.registry import keys
from tests.helpers.lab_cli import read_until

pytestmark = pytest.mark.integration


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def wait_gone(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_lab_stack_starts_everything_writes_a_config_and_stops_everything(
    tmp_path: Path,
) -> None:
    stack = LabStack(LabOptions(backends=2, directory=tmp_path / "lab"))
    stack.start()
    try:
        pids = [p.pid for p in stack.processes if p.pid is not None]
        expected = 4 + (1 if shutil.which("prometheus") else 0)  # redis, 2 backends, scheduler
        assert len(pids) == expected and all(alive(p) for p in pids)
        client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        assert client.smembers(keys.BACKENDS) == {"lab-b0", "lab-b1"}
        assert client.hget("gpucon:backend:lab-b0", "state") == "active"
        assert [g["name"] for g in client.xinfo_groups("gen:queue")] == ["g1"]
        client.close()
        for b in stack.backends:
            assert httpx.get(f"{b.url}/v2/health/ready").status_code == 200
        assert stack.config_path is not None
        config = load_config(stack.config_path, env={})
        fleet = config.fleet
        assert fleet.name == "lab" and fleet.redis is not None
        assert fleet.redis.url == stack.redis_url
        assert [t.name for t in fleet.probe_targets] == ["lab-b0", "lab-b1"]
        if shutil.which("prometheus"):
            assert fleet.prometheus is not None and fleet.prometheus.url == stack.prometheus_url
            # prometheus really scrapes the backends' Triton metrics
            query = f"{stack.prometheus_url}/api/v1/query"
            deadline = time.monotonic() + 15
            series: list[dict[str, object]] = []
            while time.monotonic() < deadline:
                reply = httpx.get(query, params={"query": "nv_inference_request_success"})
                series = reply.json()["data"]["result"]
                if len(series) == 2:
                    break
                time.sleep(0.2)
            instances = {s["metric"]["instance"] for s in series}  # type: ignore[index]
            assert instances == {b.url.removeprefix("http://") for b in stack.backends}
    finally:
        stack.stop()
    assert wait_gone(pids, 1.0) == []


def test_lab_refuses_bad_options_naming_the_field() -> None:
    with pytest.raises(ValueError, match="backends"):
        LabOptions(backends=0)
    with pytest.raises(ValueError, match="weights"):
        LabOptions(backends=2, weights=(1.0,))


def start_cli_lab(tmp_path: Path) -> tuple[subprocess.Popen[str], list[str]]:
    argv = [sys.executable, "-m", "gpucon.commands.cli", "lab", "--backends", "1", "--rate", "20",
            "--duration", "0.5", "--dir", str(tmp_path / "lab"), "--no-prometheus"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    if read_until(proc, lines, "traffic: done") is not None:
        return proc, lines
    proc.kill()
    raise AssertionError("gpucon lab did not start:\n" + "".join(lines))


def test_gpucon_lab_runs_traffic_and_stops_everything_on_sigterm(tmp_path: Path) -> None:
    proc, lines = start_cli_lab(tmp_path)
    kids = children_of(proc.pid)
    try:
        assert len(kids) == 3  # redis-server, one backend, the scheduler
        text = "".join(lines)
        assert "config" in text and str(tmp_path / "lab" / "config.toml") in text
        url = re.search(r"redis\s+(redis://\S+)", text)
        assert url is not None
        client = redis.Redis.from_url(url.group(1), decode_responses=True)
        sent = client.xlen("gen:queue")
        deadline = time.monotonic() + 10
        while client.xlen("gen:results") < sent and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.xlen("gen:results") == sent >= 10  # the traffic was answered
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "stopped everything it started" in out
    assert wait_gone(kids, 1.0) == []


def test_children_die_even_if_the_lab_is_killed(tmp_path: Path) -> None:
    proc, _lines = start_cli_lab(tmp_path)
    kids = children_of(proc.pid)
    assert len(kids) == 3
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert wait_gone(kids, 15.0) == []
