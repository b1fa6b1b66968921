"""Two consoles racing: exactly one acts, the other is told who holds which lock since when.

Racing to drain one backend; and a node drain against an undrain of one of the node's backends
(the guard locks every backend in the blast radius, not only the node's name). The node drain
cordons through the Kubernetes stand-in API server (the official client talks HTTP to it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import ApplyFn, execute
from gpucon.actions.plan import Outcome, OutcomeStatus, Plan, Progress
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.kube import KubeControl
from gpucon.controls.registry import RedisRegistry
from gpucon.errors import LockHeld
from gpucon.lab import registry_scripts as rs
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys
from tests.helpers.kube_standin import KubeStandIn

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
    c.eval(rs.ASSIGN_LUA, 3, *rs.script_keys("b1"), "1-0", "b1")
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
    c.eval(rs.RELEASE_LUA, 3, *rs.script_keys("b1"), "1-0", "b1")
    for t in threads:
        t.join(timeout=5)
    assert outcomes[winner].status is OutcomeStatus.OK
    state = c.hgetall(keys.backend_key("b1"))
    assert state["owner"] == winner and state["reason"] == f"by {winner}"
    # the loser wrote nothing but its refusal to its own audit log
    loser_log = read_audit(tmp_path / f"{loser.split('@')[0]}.jsonl")
    assert [(r.event, r.status) for r in loser_log] == [("refused", "lock_held")]
    assert c.exists(keys.lock_key("b1")) == 0
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


@pytest.fixture
def node_fleet(redis_url: str, tmp_path: Path) -> Iterator[tuple[redis.Redis, str]]:
    """b1 (drained, weight 2 remembered) and b2 on node gpu-a; b3 on gpu-b keeps serving."""
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "gpu-a/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "gpu-a/gpu0/gi2", weight=1.0),
            BackendRecord("b3", "http://127.0.0.1:3", "m", "gpu-b/gpu0", weight=1.0),
        ],
    )
    setup = RedisRegistry.from_url(redis_url)
    setup.begin_drain("b1", "ops@h0", "bad card")
    setup.mark_state("b1", "drained", "ops@h0", "bad card")
    setup.close()
    with KubeStandIn() as server:
        server.add_node("gpu-a", {}, {"nvidia.com/gpu": "1"})
        yield c, str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    c.close()


def gated(apply: ApplyFn, go: threading.Event, inside: threading.Event) -> ApplyFn:
    """``apply`` that waits, holding the guard's locks, until the test lets it go."""

    def run(plan: Plan, controls: Controls, progress: Progress) -> Outcome:
        inside.set()
        assert go.wait(10)
        return apply(plan, controls, progress)

    return run


def node_race(
    client: redis.Redis, redis_url: str, kubeconfig: str, tmp_path: Path
) -> tuple[dict[str, Controls], dict[str, tuple[ApplyFn, Plan]]]:
    """Ann drains node gpu-a; Bob undrains b1, which is on gpu-a."""
    snapshot, _ = read_registry(client)
    kube = KubeControl(kubeconfig, timeout_s=5.0)
    ann = console(redis_url, tmp_path / "ann.jsonl", "ann@h1")
    consoles = {"ann@h1": Controls(ann.registry, ann.audit, ann.operator, kube=kube)}
    consoles["bob@h2"] = console(redis_url, tmp_path / "bob.jsonl", "bob@h2")
    node_plan = drain.plan_drain(
        snapshot, {"node": "gpu-a", "kube": True, "timeout_s": 10, "poll_s": 0.02}
    )
    assert node_plan.ok and node_plan.blast_radius.backends == ("b1", "b2")
    undrain_plan = drain.plan_undrain(snapshot, {"backend": "b1"})
    assert undrain_plan.ok
    plans: dict[str, tuple[ApplyFn, Plan]] = {
        "ann@h1": (drain.apply_drain, node_plan),
        "bob@h2": (drain.apply_undrain, undrain_plan),
    }
    return consoles, plans


def close(consoles: dict[str, Controls]) -> None:
    for c in consoles.values():
        if isinstance(c.kube, KubeControl):
            c.kube.close()
        c.close()


def assert_consistent(client: redis.Redis, node_drain_acted: bool) -> None:
    b1 = client.hgetall(keys.backend_key("b1"))
    if node_drain_acted:  # drained again, the weight it had before the first drain remembered
        assert (b1["state"], b1["weight"], b1["weight_before_drain"]) == ("drained", "0", "2.0")
        assert client.hget(keys.backend_key("b2"), "state") == "drained"
    else:  # back in service with its weight; the node drain touched nothing
        assert (b1["state"], float(b1["weight"])) == ("active", 2.0)
        assert "weight_before_drain" not in b1
        assert client.hget(keys.backend_key("b2"), "state") == "active"
    assert not client.keys(keys.lock_key("*"))


@pytest.mark.parametrize("first", ["ann@h1", "bob@h2"])
def test_a_node_drain_and_an_undrain_of_its_backend_exclude_each_other(
    node_fleet: tuple[redis.Redis, str], redis_url: str, tmp_path: Path, first: str
) -> None:
    client, kubeconfig = node_fleet
    consoles, plans = node_race(client, redis_url, kubeconfig, tmp_path)
    second = next(op for op in consoles if op != first)
    go, inside = threading.Event(), threading.Event()
    outcomes: dict[str, Outcome] = {}
    apply, plan = plans[first]

    def act() -> None:
        outcomes[first] = execute(gated(apply, go, inside), plan, consoles[first], print)

    worker = threading.Thread(target=act)
    worker.start()
    assert inside.wait(5)  # first is inside its action, holding its locks
    apply2, plan2 = plans[second]
    lost = execute(apply2, plan2, consoles[second], print)
    go.set()
    worker.join(timeout=10)
    assert outcomes[first].status is OutcomeStatus.OK, outcomes[first]
    assert lost.status is OutcomeStatus.LOCK_HELD, lost
    if first == "ann@h1":
        assert "b1 is locked by ann@h1 (drain gpu-a) since 20" in lost.message
    else:
        assert "drain gpu-a touches b1: b1 is locked by bob@h2 (undrain) since 20" in lost.message
    assert_consistent(client, node_drain_acted=first == "ann@h1")
    loser_log = read_audit(tmp_path / f"{second.split('@')[0]}.jsonl")
    assert [(r.event, r.status) for r in loser_log] == [("refused", "lock_held")]
    close(consoles)


def test_two_consoles_race_a_node_drain_against_an_undrain(
    node_fleet: tuple[redis.Redis, str], redis_url: str, tmp_path: Path
) -> None:
    client, kubeconfig = node_fleet
    consoles, plans = node_race(client, redis_url, kubeconfig, tmp_path)
    barrier = threading.Barrier(2)
    go = threading.Event()
    outcomes: dict[str, Outcome] = {}

    def act(operator: str) -> None:
        apply, plan = plans[operator]
        barrier.wait()
        outcomes[operator] = execute(
            gated(apply, go, threading.Event()), plan, consoles[operator], print
        )

    threads = [threading.Thread(target=act, args=(op,)) for op in consoles]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while not outcomes:  # the loser answers at once; the winner holds its locks until go
        assert time.monotonic() < deadline
        time.sleep(0.01)
    ((loser, lost),) = outcomes.items()
    winner = next(op for op in consoles if op != loser)
    go.set()
    for t in threads:
        t.join(timeout=10)
    assert lost.status is OutcomeStatus.LOCK_HELD, lost
    assert f"is locked by {winner} " in lost.message and " since 20" in lost.message
    assert outcomes[winner].status is OutcomeStatus.OK, outcomes[winner]
    assert_consistent(client, node_drain_acted=winner == "ann@h1")
    close(consoles)
