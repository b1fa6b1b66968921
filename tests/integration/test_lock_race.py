"""Two consoles racing to drain one backend: exactly one acts, the other is told who holds it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.audit import AuditLog, read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import LockHeld, Outcome, OutcomeStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab import registry_scripts as rs
from gpucon.lab.registration import BackendRecord, register_backends

pytestmark = pytest.mark.integration


def console(redis_url: str, audit: Path, operator: str) -> Controls:
    registry = RedisRegistry.from_url(redis_url)
    return Controls(registry, AuditLog(audit, registry.append_audit), operator)


def test_two_consoles_race_to_drain_one_backend(redis_url: str, tmp_path: Path) -> None:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2"),
        ],
    )
    # one request in flight keeps the winner inside its action (holding the lock) for a while
    c.eval(rs.ASSIGN_LUA, 2, rs.backend_key("b1"), rs.assigned_key("b1"), "1-0")
    snapshot, _ = read_registry(c)
    params = {"backend": "b1", "timeout_s": 10, "poll_s": 0.05}
    consoles = {
        "ann@h1": console(redis_url, tmp_path / "ann.jsonl", "ann@h1"),
        "bob@h2": console(redis_url, tmp_path / "bob.jsonl", "bob@h2"),
    }
    barrier = threading.Barrier(2)
    outcomes: dict[str, Outcome] = {}

    def act(operator: str) -> None:
        plan = drain.plan_drain(snapshot, {**params, "reason": f"by {operator}"})
        barrier.wait()
        outcomes[operator] = execute(drain.apply_drain, plan, consoles[operator], lambda e: None)

    threads = [threading.Thread(target=act, args=(op,)) for op in consoles]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while len(outcomes) < 1:  # the loser answers at once; the winner waits for b1
        assert time.monotonic() < deadline
        time.sleep(0.02)
    ((loser, lost),) = outcomes.items()
    winner = next(op for op in consoles if op != loser)
    assert lost.status is OutcomeStatus.LOCK_HELD
    assert f"b1 is locked by {winner} (drain) since 20" in lost.message
    c.eval(rs.RELEASE_LUA, 2, rs.backend_key("b1"), rs.assigned_key("b1"), "1-0")
    for t in threads:
        t.join(timeout=5)
    assert outcomes[winner].status is OutcomeStatus.OK
    state = c.hgetall("gpucon:backend:b1")
    assert state["owner"] == winner and state["reason"] == f"by {winner}"
    # the loser wrote nothing but its refusal to its own audit log
    loser_log = read_audit(tmp_path / f"{loser.split('@')[0]}.jsonl")
    assert [(r.event, r.status) for r in loser_log] == [("refused", "lock_held")]
    assert c.exists("gpucon:lock:b1") == 0
    c.close()


def test_lock_is_renewed_while_held_and_released_only_by_its_owner(redis_url: str) -> None:
    ann = RedisRegistry.from_url(redis_url)
    bob = RedisRegistry.from_url(redis_url)
    lease = ann.acquire_lock("b9", "ann@h1", "drain", ttl_s=0.3)
    with pytest.raises(LockHeld) as info:
        bob.acquire_lock("b9", "bob@h2", "drain", ttl_s=0.3)
    assert info.value.holder == "ann@h1"
    assert info.value.since == pytest.approx(lease.since)
    assert info.value.exit_code == 4
    # a lease that is not the owner's cannot release or renew it
    forged = type(lease)(lease.target, "not-the-token", lease.holder, lease.since, lease.action)
    assert not bob.release_lock(forged)
    assert not bob.renew_lock(forged, 10)
    # renewing keeps it past its first TTL
    for _ in range(4):
        time.sleep(0.15)
        assert ann.renew_lock(lease, 0.3)
    with pytest.raises(LockHeld):
        bob.acquire_lock("b9", "bob@h2", "drain", ttl_s=0.3)
    assert ann.release_lock(lease)
    assert not ann.release_lock(lease)  # released once
    bob_lease = bob.acquire_lock("b9", "bob@h2", "drain", ttl_s=0.3)
    # an owner that stops renewing loses it by the TTL
    time.sleep(0.45)
    ann.acquire_lock("b9", "ann@h1", "drain", ttl_s=1)
    assert not bob.release_lock(bob_lease)
    ann.close()
    bob.close()
