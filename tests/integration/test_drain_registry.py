"""Drain and undrain through the real Redis registry: states, weights, waiting, timeout, audit."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import Outcome, OutcomeStatus, ProgressEvent, StepStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.errors import ExitCode, StateMoved
from gpucon.lab import registry_scripts as rs
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys

pytestmark = pytest.mark.integration


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    yield c
    c.close()


def controls_for(redis_url: str, tmp_path: Path, operator: str = "ann@h1") -> Controls:
    registry = RedisRegistry.from_url(redis_url)
    return Controls(registry, AuditLog(tmp_path / "audit.jsonl", registry.append_audit), operator)


def assign(c: redis.Redis, backend: str, entry_id: str) -> None:
    """What the reference scheduler does when it hands an entry to a backend."""
    ok = c.eval(rs.ASSIGN_LUA, 3, *rs.script_keys(backend), entry_id, backend)
    assert ok[0] == 1


def answer(c: redis.Redis, backend: str, entry_id: str) -> None:
    """What it does when the backend answered."""
    c.eval(rs.RELEASE_LUA, 3, *rs.script_keys(backend), entry_id, backend)


def test_drain_waits_for_inflight_and_pending_then_marks_drained(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    assign(client, "b1", "1-0")
    assign(client, "b1", "2-0")
    snapshot, version = read_registry(client)
    plan = drain.plan_drain(snapshot, {"backend": "b1", "reason": "xid 79", "timeout_s": 10})
    controls = controls_for(redis_url, tmp_path)
    events: list[ProgressEvent] = []
    result: list[Outcome] = []
    worker = threading.Thread(
        target=lambda: result.append(execute(drain.apply_drain, plan, controls, events.append))
    )
    worker.start()
    deadline = time.monotonic() + 5
    while client.hget(keys.backend_key("b1"), "state") != "draining":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    # draining: weight 0, the old weight remembered, and the scheduler can assign no new entry
    assert client.hget(keys.backend_key("b1"), "weight") == "0"
    assert client.hget(keys.backend_key("b1"), "weight_before_drain") == "2.0"
    refused = client.eval(rs.ASSIGN_LUA, 3, *rs.script_keys("b1"), "3-0", "b1")
    assert refused[0] == 0
    time.sleep(0.3)
    assert worker.is_alive()  # still waiting: two entries in flight
    assert any(e.status is StepStatus.RUNNING and "2 in flight" in e.text for e in events)
    answer(client, "b1", "1-0")
    deadline = time.monotonic() + 5
    while not any(e.fraction == 0.5 for e in events):  # one of two answered: half done
        assert time.monotonic() < deadline
        time.sleep(0.02)
    answer(client, "b1", "2-0")
    worker.join(timeout=5)
    outcome = result[0]
    assert outcome.status is OutcomeStatus.OK, outcome
    state = client.hgetall(keys.backend_key("b1"))
    assert state["state"] == "drained"
    assert state["owner"] == "ann@h1" and state["reason"] == "xid 79"
    assert int(client.get(keys.VERSION) or 0) == version + 2
    assert client.hget(keys.backend_key("b2"), "state") == "active"  # untouched
    # the lock is gone once the action finished
    assert client.exists(keys.lock_key("b1")) == 0

    # audit: intent first, then each step, then the outcome — in the file and in the stream
    records = read_audit(tmp_path / "audit.jsonl")
    assert [r.event for r in records] == ["intent", "step", "step", "step", "outcome"]
    assert [r.step for r in records[1:4]] == ["draining:b1", "wait:b1", "drained:b1"]
    assert {r.digest for r in records} == {plan.digest}
    assert {r.operator for r in records} == {"ann@h1"}
    assert records[-1].status == "ok"
    stream: Any = client.xrange(keys.AUDIT)
    assert [f["event"] for _, f in stream] == [r.event for r in records]
    assert stream[0][1]["target"] == "b1"

    # undrain restores the weight it had
    snapshot, _ = read_registry(client)
    undo = drain.plan_undrain(snapshot, {"backend": "b1"})
    outcome2 = execute(drain.apply_undrain, undo, controls, lambda e: None)
    assert outcome2.ok, outcome2
    state = client.hgetall(keys.backend_key("b1"))
    assert state["state"] == "active" and float(state["weight"]) == 2.0
    assert "weight_before_drain" not in state


def test_drain_timeout_leaves_draining_with_owner_and_reason(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    assign(client, "b1", "1-0")  # never answered
    snapshot, _ = read_registry(client)
    plan = drain.plan_drain(
        snapshot, {"backend": "b1", "reason": "bad card", "timeout_s": 0.5, "poll_s": 0.05}
    )
    controls = controls_for(redis_url, tmp_path, operator="bob@h2")
    started = time.monotonic()
    outcome = execute(drain.apply_drain, plan, controls, lambda e: None)
    assert time.monotonic() - started < 3
    assert outcome.status is OutcomeStatus.TIMEOUT
    assert outcome.exit_code is ExitCode.TIMEOUT
    assert "1 in flight, 1 pending" in outcome.message
    assert "state=draining" in outcome.state_left
    state = client.hgetall(keys.backend_key("b1"))
    assert state["state"] == "draining" and state["weight"] == "0"
    assert state["owner"] == "bob@h2" and state["reason"] == "bad card"
    records = read_audit(tmp_path / "audit.jsonl")
    assert records[0].event == "intent"
    assert (records[-2].step, records[-2].status) == ("wait:b1", "failed")
    assert (records[-1].event, records[-1].status) == ("outcome", "timeout")
    assert client.exists(keys.lock_key("b1")) == 0


def test_registry_writes_bump_the_version_and_name_the_client(
    client: redis.Redis, redis_url: str
) -> None:
    registry = RedisRegistry.from_url(redis_url)
    before = registry.version()
    registry.begin_drain("b2", "ann@h1", "test")
    registry.mark_state("b2", "drained", "ann@h1", "test")
    registry.undrain("b2", "ann@h1", "test", default_weight=5.0)
    assert registry.version() == before + 3
    assert registry.backend("b2") is not None
    assert float(client.hget(keys.backend_key("b2"), "weight") or 0) == 1.0
    names = [c["name"] for c in client.client_list()]
    assert "gpucon-actions" in names
    with pytest.raises(Exception, match="no backend named 'ghost'"):
        registry.begin_drain("ghost", "ann@h1", "test")
    registry.close()


def test_audit_stream_is_capped(
    client: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keys, "AUDIT_MAXLEN", 10)
    registry = RedisRegistry.from_url(redis_url)
    for i in range(600):
        registry.append_audit({"event": "intent", "n": i, "text": json.dumps({"i": i})})
    # MAXLEN ~ trims whole stream nodes (100 entries each): far fewer than written remain
    assert 10 <= client.xlen(keys.AUDIT) <= 200
    newest: Any = client.xrevrange(keys.AUDIT, count=1)
    newest = newest[0][1]
    assert newest["n"] == "599"
    registry.close()


def test_registry_lost_during_the_wait_fails_the_step_and_says_so(tmp_path: Path) -> None:
    from tests.helpers.servers import redis_server

    (tmp_path / "r").mkdir()
    with redis_server(tmp_path / "r") as url:
        c = redis.Redis.from_url(url, decode_responses=True)
        register_backends(
            c,
            [
                BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
                BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
            ],
        )
        assign(c, "b1", "1-0")
        snapshot, _ = read_registry(c)
        plan = drain.plan_drain(snapshot, {"backend": "b1", "timeout_s": 30, "poll_s": 0.05})
        registry = RedisRegistry.from_url(url, timeout_s=0.5)
        controls = Controls(registry, AuditLog(tmp_path / "audit.jsonl"), "ann@h1")
        result: list[Outcome] = []
        worker = threading.Thread(
            target=lambda: result.append(execute(drain.apply_drain, plan, controls, print))
        )
        worker.start()
        deadline = time.monotonic() + 5
        while c.hget(keys.backend_key("b1"), "state") != "draining":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        c.close()
    # the server is gone now, mid-wait
    worker.join(timeout=15)
    assert not worker.is_alive()
    outcome = result[0]
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.exit_code is ExitCode.STEP_FAILED
    assert "step 'wait:b1' failed" in outcome.message
    assert "state unknown" in outcome.state_left
    log = read_audit(tmp_path / "audit.jsonl")
    assert [(r.event, r.step, r.status) for r in log] == [
        ("intent", "", ""),
        ("step", "draining:b1", "done"),
        ("step", "wait:b1", "failed"),
        ("outcome", "", "failed"),
    ]


def test_state_changes_are_compare_and_set_on_the_state_they_start_from(
    client: redis.Redis, redis_url: str
) -> None:
    ann = RedisRegistry.from_url(redis_url)
    bob = RedisRegistry.from_url(redis_url)
    ann.begin_drain("b1", "ann@h1", "xid 79")
    bob.undrain("b1", "bob@h2", "back", default_weight=9.0)  # b1 moved on under ann's drain
    version = ann.version()
    with pytest.raises(StateMoved, match="b1 is active, not draining") as info:
        ann.mark_state("b1", "drained", "ann@h1", "xid 79")
    assert info.value.exit_code is ExitCode.REFUSED
    # nothing written: bob's undrain stands, with the weight it restored
    state = client.hgetall(keys.backend_key("b1"))
    assert state["state"] == "active" and float(state["weight"]) == 2.0
    assert state["owner"] == "bob@h2" and "weight_before_drain" not in state
    assert ann.version() == version
    # undrain of a backend that is active already would overwrite its weight: refused too
    ann.set_weights({"b1": 7.0}, None, "carol@h3", "tuned")
    with pytest.raises(StateMoved, match="b1 is active, not drained or draining"):
        ann.undrain("b1", "ann@h1", "back", default_weight=1.0)
    assert float(client.hget(keys.backend_key("b1"), "weight") or 0) == 7.0
    with pytest.raises(Exception, match="state: 'bogus' is not a state gpucon sets"):
        ann.mark_state("b1", "bogus", "ann@h1", "x")
    ann.close()
    bob.close()


def test_a_drain_whose_backend_was_undrained_meanwhile_fails_and_keeps_the_weight(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """Someone outside the guard (another tool, an old console) undrains b1 while ann waits."""
    assign(client, "b1", "1-0")
    snapshot, _ = read_registry(client)
    plan = drain.plan_drain(snapshot, {"backend": "b1", "timeout_s": 10, "poll_s": 0.02})
    controls = controls_for(redis_url, tmp_path)
    result: list[Outcome] = []
    worker = threading.Thread(
        target=lambda: result.append(execute(drain.apply_drain, plan, controls, lambda e: None))
    )
    worker.start()
    deadline = time.monotonic() + 5
    while client.hget(keys.backend_key("b1"), "state") != "draining":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    other = RedisRegistry.from_url(redis_url)
    assert other.undrain("b1", "bob@h2", "needed back", default_weight=1.0) == 2.0
    answer(client, "b1", "1-0")
    worker.join(timeout=5)
    outcome = result[0]
    assert outcome.status is OutcomeStatus.FAILED, outcome
    assert "b1 is active, not draining" in outcome.message
    state = client.hgetall(keys.backend_key("b1"))
    assert state["state"] == "active" and float(state["weight"]) == 2.0
    assert state["owner"] == "bob@h2"
    other.close()
