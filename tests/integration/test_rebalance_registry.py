"""Rebalance through the real registry: all weights at once, and a stale plan is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from gpucon.actions import drain, rebalance
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.errors import BadParams, ExitCode
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys

pytestmark = pytest.mark.integration


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=1.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
            BackendRecord("b3", "http://127.0.0.1:3", "m", "h/gpu1", weight=1.0),
        ],
    )
    return c


def controls_for(redis_url: str, tmp_path: Path) -> Controls:
    registry = RedisRegistry.from_url(redis_url)
    return Controls(registry, AuditLog(tmp_path / "audit.jsonl", registry.append_audit), "ann@h1")


def weights(c: redis.Redis) -> dict[str, float]:
    return {n: float(c.hget(keys.backend_key(n), "weight") or "nan") for n in ("b1", "b2", "b3")}


def test_rebalance_applies_all_weights_in_one_version(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    snapshot, version = read_registry(client)
    plan = rebalance.plan_rebalance(
        snapshot, {"weights": {"b1": 3.0, "b2": 0.5}, "registry_version": version}
    )
    outcome = execute(rebalance.apply_rebalance, plan, controls_for(redis_url, tmp_path), print)
    assert outcome.ok, outcome
    assert weights(client) == {"b1": 3.0, "b2": 0.5, "b3": 1.0}
    assert int(client.get(keys.VERSION) or 0) == version + 1
    assert outcome.details["registry_version"] == version + 1


def test_stale_rebalance_plan_is_refused_and_changes_nothing(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    snapshot, version = read_registry(client)
    stale = rebalance.plan_rebalance(
        snapshot, {"weights": {"b1": 4.0, "b3": 0.25}, "registry_version": version}
    )
    # a colleague drains b2 after the plan was made
    controls = controls_for(redis_url, tmp_path)
    fresh_snapshot, _ = read_registry(client)
    other = drain.plan_drain(fresh_snapshot, {"backend": "b2", "timeout_s": 5})
    assert execute(drain.apply_drain, other, controls, lambda e: None).ok
    before = weights(client)
    outcome = execute(rebalance.apply_rebalance, stale, controls, lambda e: None)
    assert outcome.status is OutcomeStatus.REFUSED
    assert outcome.exit_code is ExitCode.REFUSED
    assert f"made at registry version {version}" in outcome.message
    assert "plan again" in outcome.message
    assert weights(client) == before  # nothing written
    # refused under the lock, before any intent: the rebalance never started
    log = read_audit(tmp_path / "audit.jsonl")
    assert [(r.event, r.action, r.status) for r in log[-1:]] == [
        ("refused", "rebalance", "refused")
    ]
    assert [r.event for r in log if r.action == "rebalance"] == ["refused"]


def test_rebalance_to_an_unknown_backend_is_refused_by_the_registry(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    snapshot, version = read_registry(client)
    plan = rebalance.plan_rebalance(snapshot, {"weights": {"b1": 2.0}, "registry_version": version})
    client.delete(keys.backend_key("b1"))  # removed behind our back, without a version bump
    registry = RedisRegistry.from_url(redis_url)
    with pytest.raises(BadParams, match=r"^weights\.b1: no backend named 'b1'"):
        registry.set_weights({"b1": 2.0}, version, "ann@h1", "test")
    outcome = execute(rebalance.apply_rebalance, plan, controls_for(redis_url, tmp_path), print)
    assert outcome.status is OutcomeStatus.REFUSED
    assert client.exists(keys.backend_key("b1")) == 0


def test_plan_on_a_snapshot_older_than_the_version_it_read_is_refused(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    # the console's snapshot is a tick old; a colleague changes b1 just before we press `b`
    snapshot, _ = read_registry(client)
    colleague = RedisRegistry.from_url(redis_url)
    colleague.set_weights({"b1": 5.0}, None, "bob@h2", "hot fix")
    version = int(client.get(keys.VERSION) or 0)  # read when the plan is made
    plan = rebalance.plan_rebalance(
        snapshot, {"weights": {"b1": 2.0, "b2": 2.0}, "registry_version": version}
    )
    outcome = execute(rebalance.apply_rebalance, plan, controls_for(redis_url, tmp_path), print)
    assert outcome.status is OutcomeStatus.REFUSED
    assert "the plan saw b1 at weight 1 but it is now 5" in outcome.message
    assert weights(client) == {"b1": 5.0, "b2": 1.0, "b3": 1.0}
    colleague.close()


def test_rebalance_writes_only_the_weights_it_changes(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    client.hset(keys.backend_key("b3"), mapping={"owner": "bob@h2", "reason": "pinned for a test"})
    snapshot, version = read_registry(client)
    plan = rebalance.plan_rebalance(
        snapshot,
        {"weights": {"b1": 2.0, "b2": 1.0, "b3": 1.0}, "registry_version": version},
    )
    outcome = execute(rebalance.apply_rebalance, plan, controls_for(redis_url, tmp_path), print)
    assert outcome.ok, outcome
    assert weights(client) == {"b1": 2.0, "b2": 1.0, "b3": 1.0}
    assert outcome.details["weights"] == {"b1": 2.0}
    # the backends whose weight did not change keep who last changed them, and why
    assert client.hget(keys.backend_key("b3"), "owner") == "bob@h2"
    assert client.hget(keys.backend_key("b3"), "reason") == "pinned for a test"
    assert client.hget(keys.backend_key("b1"), "owner") == "ann@h1"
