"""`kill -9` mid-drain against a real redis-server: the audit calls it interrupted, the rerun
converges and keeps the reason the interrupted drain gave.

The drain is a real ``gpucon drain`` process, killed with SIGKILL while it waits for a request
in flight: its intent has no outcome and its lock stays until the TTL lapses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from gpucon.actions.audit import read_audit
from gpucon.commands.cli import main
from gpucon.lab import registry_scripts as rs
from gpucon.lab.registration import BackendRecord, register_backends

pytestmark = pytest.mark.integration


def audit_rows(capsys: pytest.CaptureFixture[str]) -> list[dict[str, str]]:
    assert main(["audit", "--json", "--limit", "100"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_killed_drain_reads_interrupted_and_the_rerun_converges(
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    client.eval(rs.ASSIGN_LUA, 3, *rs.script_keys("b1"), "1-0", "b1")
    audit = tmp_path / "audit.jsonl"
    env = {
        "GPUCON_CONFIG": str(tmp_path / "none.toml"),
        "GPUCON_REDIS_URL": redis_url,
        "GPUCON_AUDIT_PATH": str(audit),
        "GPUCON_OPERATOR": "ann@h1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    argv = [sys.executable, "-m", "gpucon.commands.cli", "drain", "b1", "--yes"]
    argv += ["--reason", "bad fan", "--timeout", "60"]
    proc = subprocess.Popen(
        argv, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while not any(r.step == "draining:b1" for r in read_audit(audit)):  # now in its wait
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert client.hget("gpucon:backend:b1", "state") == "draining"

    # its lock outlives it until the TTL lapses: while the holder's lock is there, "running"
    rows = audit_rows(capsys)
    assert (rows[0]["event"], rows[0]["status"]) == ("intent", "running")
    # running it again at once: the dead run's lock is still there, and the message says why
    assert main(["drain", "b1", "--yes"]) == 4
    assert "its lock lapses within 15 s: then run it again" in capsys.readouterr().out
    client.pexpire("gpucon:lock:b1", 1)  # the TTL lapses (as it would 15 s later)
    time.sleep(0.05)
    rows = audit_rows(capsys)
    assert [(r["event"], r["status"]) for r in rows] == [
        ("intent", "interrupted"),
        ("step", "done"),
        ("refused", "lock_held"),
    ]
    assert rows[0]["fleet"] == "default"
    assert main(["audit"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.split()[3:9] == ["default", "ann@h1", "intent", "drain", "b1", "interrupted"]

    # the request finishes; the same drain again, without a reason, completes the first one
    client.eval(rs.RELEASE_LUA, 3, *rs.script_keys("b1"), "1-0", "b1")
    assert main(["drain", "b1", "--yes", "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0]["plan"]["params"]["reason"] == "bad fan"
    assert out[1]["outcome"]["status"] == "ok"
    state = client.hgetall("gpucon:backend:b1")
    assert (state["state"], state["reason"]) == ("drained", "bad fan")
    assert state["weight_before_drain"] == "2.0"  # not the 0 the first drain had set
    rows = audit_rows(capsys)
    intents = [r["status"] for r in rows if r["event"] == "intent"]
    assert intents == ["interrupted", ""]  # the first stays interrupted; the rerun finished
    assert rows[-1]["event"] == "outcome" and rows[-1]["status"] == "ok"
    # and undrain gives back the weight it had before the interrupted drain
    assert main(["undrain", "b1", "--yes"]) == 0
    assert client.hget("gpucon:backend:b1", "weight") == "2.0"
    client.close()
