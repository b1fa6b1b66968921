"""Ten `gpucon drain b1 --yes` at once against a real redis-server: exactly one acts.

Each is a real ``gpucon`` process. The per-target lock serialises them; the precondition
checked again under the lock (b1 is drained already, and by whom) refuses every one that got
the lock after the winner finished on a plan made while b1 was still active. So the audit has
one intent and one ``ok``; the other nine exit 3 (refused) or 4 (lock held).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from gpucon.actions.audit import read_audit
from gpucon.lab.registration import BackendRecord, register_backends

pytestmark = pytest.mark.integration

RACERS = 10


def race(env: dict[str, str], target: str) -> list[tuple[int, str]]:
    """Start RACERS drains of ``target`` at once; (exit code, stderr+stdout) of each."""
    argv = [sys.executable, "-m", "gpucon.commands.cli", "drain", target, "--yes"]
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(RACERS)
    ]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        results.append((proc.returncode, out.decode(errors="replace")))
    return results


@pytest.mark.parametrize("trial", range(2))
def test_ten_concurrent_drains_one_acts(redis_url: str, tmp_path: Path, trial: int) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    audit = tmp_path / "audit.jsonl"
    env = dict(os.environ)
    env.update(
        GPUCON_CONFIG=str(tmp_path / "none.toml"),
        GPUCON_REDIS_URL=redis_url,
        GPUCON_AUDIT_PATH=str(audit),
        GPUCON_OPERATOR=f"racer{trial}@test",
    )
    results = race(env, "b1")
    codes = sorted(code for code, _ in results)
    assert codes.count(0) == 1, results
    assert set(codes[1:]) <= {3, 4}, results
    records = read_audit(audit)
    assert [r.event for r in records].count("intent") == 1
    assert [(r.event, r.status) for r in records].count(("outcome", "ok")) == 1
    stream: Any = client.xrange("gpucon:audit")
    assert [f["event"] for _, f in stream].count("intent") == 1
    # a late racer is told the backend is drained and who drained it
    refused = [out for code, out in results if code == 3]
    for out in refused:
        assert "b1 is drained" in out, out
    assert all("set by racer" in out for out in refused if "changed since the plan" in out)
    state = client.hgetall("gpucon:backend:b1")
    assert state["state"] == "drained" and state["weight_before_drain"] == "2.0"
    assert not client.keys("gpucon:lock:*")
    client.close()
