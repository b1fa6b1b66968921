"""Leases that fail safe, against a real redis-server.

Redis stopped (SIGSTOP: it stops answering, as a hung or partitioned server does) while a
lease is held: the keeper marks it lost at its first renewal, long before the TTL would lapse
unseen. A drain whose lock is lost while it waits stops at its next step boundary with a
clear outcome (exit 5), and the backend stays ``draining`` with its owner and reason.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.lease import LockKeeper
from gpucon.actions.plan import Outcome, OutcomeStatus, ProgressEvent, StepStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab import registry_scripts as rs
from gpucon.lab.registration import BackendRecord, register_backends
from tests.helpers.servers import redis_server

pytestmark = pytest.mark.integration

TTL_S = 3.0  # renewed every 1 s
REDIS_TIMEOUT_S = 0.5


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A redis-server of this test's own (it is stopped and continued): URL and pid."""
    with redis_server(tmp_path) as url:
        client = redis.Redis.from_url(url)
        pid = int(client.info("server")["process_id"])
        client.close()
        try:
            yield url, pid
        finally:
            os.kill(pid, signal.SIGCONT)  # whatever the test did, let it stop normally


def fleet(url: str) -> redis.Redis:
    client = redis.Redis.from_url(url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    # a request in flight keeps the drain in its wait step
    client.eval(rs.ASSIGN_LUA, 3, *rs.script_keys("b1"), "1-0", "b1")
    return client


def test_the_lease_is_marked_lost_within_its_renewal_interval(
    own_redis: tuple[str, int],
) -> None:
    url, pid = own_redis
    registry = RedisRegistry.from_url(url, timeout_s=REDIS_TIMEOUT_S)
    controls = Controls(registry, AuditLog(Path(os.devnull)), "ann@h1")
    lease = registry.acquire_lock("b1", "ann@h1", "drain", TTL_S)
    keeper = LockKeeper(controls, [lease], TTL_S)
    with keeper:
        time.sleep(keeper.interval_s * 1.2)  # one renewal has succeeded
        assert not keeper.lost
        os.kill(pid, signal.SIGSTOP)
        stopped = time.time()
        deadline = time.monotonic() + TTL_S * 2
        while not keeper.lost:
            assert time.monotonic() < deadline, "the lease was never marked lost"
            time.sleep(0.01)
        detected = keeper.lost_at
        assert detected is not None
        after = detected - stopped
        os.kill(pid, signal.SIGCONT)
    print(f"lease lost {after:.2f} s after Redis stopped (interval {keeper.interval_s:g} s)")
    # the next renewal was due within one interval; it failed within the Redis timeout
    assert after <= keeper.interval_s + REDIS_TIMEOUT_S + 0.5, after
    # the renewal raised, or it was overdue (stuck on the stopped server) when last asked
    why = keeper.lost["b1"]
    assert "renewal failed: TimeoutError" in why or "no renewal succeeded for" in why, why
    assert after < TTL_S  # noticed before the lock could lapse unseen
    registry.close()


class WaitingDrain:
    """A drain of b1 (reason "bad fan") running in a thread, already in its wait step: a
    request is in flight, so it polls until something stops it."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.client = fleet(url)
        self.registry = RedisRegistry.from_url(url, timeout_s=REDIS_TIMEOUT_S)
        self.audit = tmp_path / "audit.jsonl"
        controls = Controls(
            self.registry, AuditLog(self.audit, self.registry.append_audit), "ann@h1"
        )
        snapshot, _ = read_registry(self.client)
        plan = drain.plan_drain(
            snapshot, {"backend": "b1", "timeout_s": 60, "poll_s": 0.05, "reason": "bad fan"}
        )
        waiting = threading.Event()
        self.outcomes: list[Outcome] = []

        def progress(event: ProgressEvent) -> None:
            if event.step == "wait:b1" and event.status is StepStatus.RUNNING:
                waiting.set()

        def act() -> None:
            self.outcomes.append(
                execute(drain.apply_drain, plan, controls, progress, lock_ttl_s=TTL_S)
            )

        self.worker = threading.Thread(target=act)
        self.worker.start()
        assert waiting.wait(10), "the drain never reached its wait step"

    def backend_state(self) -> tuple[str, str, str]:
        state = self.client.hgetall("gpucon:backend:b1")
        return (str(state["state"]), str(state["owner"]), str(state["reason"]))

    def close(self) -> None:
        self.registry.close()
        self.client.close()


def test_redis_stopped_during_a_drains_wait_stops_it_and_leaves_it_visible(
    own_redis: tuple[str, int], tmp_path: Path
) -> None:
    url, pid = own_redis
    run = WaitingDrain(url, tmp_path)
    os.kill(pid, signal.SIGSTOP)
    run.worker.join(timeout=20)
    assert run.outcomes, "the drain did not stop with Redis stopped"
    os.kill(pid, signal.SIGCONT)
    (outcome,) = run.outcomes
    assert outcome.status is OutcomeStatus.FAILED and outcome.exit_code == 5, outcome
    assert "wait:b1" in outcome.message
    # once Redis answers again, the backend's state is there for everyone: who and why
    assert run.backend_state() == ("draining", "ann@h1", "bad fan")
    events = [(r.event, r.status) for r in read_audit(run.audit)]
    assert events[0] == ("intent", "") and events[-1] == ("outcome", "failed")
    run.close()


def test_a_lock_lost_while_a_drain_waits_stops_it_at_the_next_step_boundary(
    redis_url: str, tmp_path: Path
) -> None:
    run = WaitingDrain(redis_url, tmp_path)
    took_over = time.monotonic()
    run.client.delete("gpucon:lock:b1")  # as if it had lapsed: someone else may now take it
    run.worker.join(timeout=10)
    stopped_after = time.monotonic() - took_over
    (outcome,) = run.outcomes
    assert outcome.status is OutcomeStatus.FAILED and outcome.exit_code == 5, outcome
    assert "stopped before 'wait:b1': the lock was lost" in outcome.message
    assert "expired or was taken over" in outcome.message
    assert outcome.details["lease_lost"]["targets"] == ["b1"]
    assert "state=draining" in outcome.state_left and "owner=ann@h1" in outcome.state_left
    assert stopped_after <= TTL_S / 3 + 1.0  # the next renewal, then the next poll
    assert [s.ok for s in outcome.steps] == [True, False]  # draining done, wait stopped
    assert run.backend_state() == ("draining", "ann@h1", "bad fan")
    records = read_audit(run.audit)
    assert [(r.event, r.step) for r in records][-2:] == [("step", "wait:b1"), ("outcome", "")]
    run.close()
