"""A drain whose registry stops answering: the outcome's state line says where Redis is, how long
it waited and that nothing was written, not ``state unknown (TimeoutError)``.

The plan is made from a real redis-server; the apply runs against a socket that accepts the
connection and never answers (a Redis that hangs), with a 0.3 s timeout.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gpucon.actions import drain, undrain
from gpucon.actions.plan import OutcomeStatus, Plan
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends

pytestmark = pytest.mark.integration


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose listener accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


def plans(url: str) -> tuple[Plan, Plan]:
    client = redis.Redis.from_url(url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=1.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", 0.0, "drained"),
        ],
    )
    snapshot, _ = read_registry(client)
    client.close()
    drained = drain.plan_drain(snapshot, {"backend": "b1", "poll_s": 0.02, "force": True})
    undrained = undrain.plan_undrain(snapshot, {"backend": "b2"})
    assert drained.ok and undrained.ok, (drained, undrained)
    return drained, undrained


def test_a_registry_that_does_not_answer_is_named_in_the_state_line(
    redis_url: str, silent_port: int, tmp_path: Path
) -> None:
    drained, undrained = plans(redis_url)
    registry = RedisRegistry.from_url(f"redis://127.0.0.1:{silent_port}/0", timeout_s=0.3)
    controls = Controls(registry, AuditLog(tmp_path / "a.jsonl", lambda _r: None), "ann@h1")
    try:
        drain_outcome = drain.apply_drain(drained, controls, lambda _event: None)
        undrain_outcome = undrain.apply_undrain(undrained, controls, lambda _event: None)
    finally:
        registry.close()
    where = f"127.0.0.1:{silent_port}"
    assert drain_outcome.status is not OutcomeStatus.OK
    assert drain_outcome.state_left == (
        f"b1: Redis at {where} did not answer in 0.3s: state unknown; nothing was written"
    )
    assert undrain_outcome.status is not OutcomeStatus.OK
    assert undrain_outcome.state_left == (
        f"b2: Redis at {where} did not answer in 0.3s: state unknown; nothing was written"
    )
    assert "TimeoutError" not in drain_outcome.state_left + undrain_outcome.state_left
