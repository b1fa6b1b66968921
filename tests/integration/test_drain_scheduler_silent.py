"""A drain waiting on counts a dead scheduler left frozen says so, against a real redis-server.

``kill -9`` of the scheduler in ``gpucon lab`` leaves a backend's in-flight count and its
assigned entries where they were: the drain waited its whole timeout on "1 in flight, 1
pending" as if requests were still being served. Now its progress and its timeout name the
silent heartbeat, so the operator knows the counts cannot fall until the scheduler runs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus, ProgressEvent, StepStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab import registry_scripts as rs
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys
from gpucon.registry.heartbeat import heartbeat_text

pytestmark = pytest.mark.integration

# what a drain that stopped after its first write says it left
LEFT_DRAINING = (
    "; left draining (weight 0: no new work), not marked drained: b1; run the drain again to "
    "finish, or undo: gpucon undrain b1 (restores the weight it had)"
)


def drain_with_heartbeat(url: str, beat_age_s: float) -> tuple[str, list[str]]:
    """Drain b1 (one request in flight) with the scheduler's heartbeat ``beat_age_s`` old:
    the outcome's message and the wait step's progress lines."""
    client = redis.Redis.from_url(url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=1.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    client.eval(rs.ASSIGN_LUA, 3, *rs.script_keys("b1"), "1-0", "b1")
    client.hset(keys.SCHEDULERS, "sched-1", heartbeat_text(time.time() - beat_age_s))
    registry = RedisRegistry.from_url(url)
    controls = Controls(registry, AuditLog(Path(os.devnull)), "ann@h1")
    snapshot, _ = read_registry(client)
    params = {"backend": "b1", "timeout_s": 1.0, "poll_s": 0.1}
    plan = drain.plan_drain(snapshot, params)
    lines: list[str] = []

    def progress(event: ProgressEvent) -> None:
        if event.step == "wait:b1" and event.status is StepStatus.RUNNING:
            lines.append(event.text)

    outcome = execute(drain.apply_drain, plan, controls, progress)
    assert outcome.status is OutcomeStatus.TIMEOUT, outcome
    assert client.hget(keys.backend_key("b1"), "state") == "draining"  # as before: said so
    registry.close()
    client.close()
    return outcome.message, lines


def test_a_drain_on_a_silent_schedulers_counts_names_the_heartbeat(redis_url: str) -> None:
    message, lines = drain_with_heartbeat(redis_url, beat_age_s=40.0)
    silent = (
        "(as the scheduler sched-1 last counted 40s ago: its heartbeat stopped, nothing counts "
        "them down until it runs again)"
    )
    assert message == (
        f"step 'wait:b1' failed: timed out with 1 in flight, 1 pending {silent}{LEFT_DRAINING}"
    )
    assert lines and all(silent in line for line in lines), lines


def test_a_drain_on_a_beating_schedulers_counts_says_nothing_more(redis_url: str) -> None:
    message, lines = drain_with_heartbeat(redis_url, beat_age_s=0.5)
    assert message == (
        f"step 'wait:b1' failed: timed out with 1 in flight, 1 pending{LEFT_DRAINING}"
    )
    assert lines and not any("heartbeat" in line for line in lines), lines
