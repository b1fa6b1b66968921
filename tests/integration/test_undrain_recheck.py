"""Undrain checks the node and the pod again under the lock: never active on a cordoned node.

A real redis-server registry and the Kubernetes stand-in API server (the official client
talks HTTP to it). An undrain planned before a node drain finished is refused when it gets
the lock after it, naming the cordoned node; an undrain whose pod was evicted is refused; and
a node drain racing an undrain of one of its backends never leaves that backend active on the
cordoned node.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.guard import ApplyFn, execute
from gpucon.actions.plan import Outcome, OutcomeStatus, Plan
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.kube import KubeControl
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from tests.helpers.kube_standin import KubeStandIn

pytestmark = pytest.mark.integration

MIG = "nvidia.com/mig-3g.40gb"
TRIALS = 20


def reset(client: redis.Redis, redis_url: str, standin: KubeStandIn) -> None:
    """b1 (drained by ops) and b2 on node gpu-a, b3 on gpu-b; gpu-a schedulable; b1's pod."""
    client.flushall()
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "gpu-a/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "gpu-a/gpu0/gi2", weight=1.0),
            BackendRecord("b3", "http://127.0.0.1:3", "m", "gpu-b/gpu0/gi1", weight=1.0),
        ],
    )
    setup = RedisRegistry.from_url(redis_url)
    setup.begin_drain("b1", "ops@h0", "bad card")
    setup.mark_state("b1", "drained", "ops@h0", "bad card")
    setup.close()
    standin.update_node("gpu-a", {"spec": {"unschedulable": None}})
    if ("ml", "b1-pod") not in standin.pods:
        labels = {"gpucon.io/backend": "b1"}
        standin.add_pod("ml", "b1-pod", "gpu-a", {MIG: "1"}, labels)


@pytest.fixture
def world(
    redis_url: str, tmp_path: Path
) -> Iterator[tuple[redis.Redis, KubeStandIn, dict[str, Controls]]]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with KubeStandIn() as standin:
        standin.add_node("gpu-a", {}, {MIG: "2"})
        standin.add_node("gpu-b", {}, {MIG: "2"})
        reset(client, redis_url, standin)
        kubeconfig = str(standin.write_kubeconfig(tmp_path / "kubeconfig"))
        consoles = {}
        for operator in ("ann@h1", "bob@h2"):
            registry = RedisRegistry.from_url(redis_url)
            audit = AuditLog(tmp_path / f"{operator}.jsonl", registry.append_audit)
            kube = KubeControl(kubeconfig, timeout_s=5.0)
            consoles[operator] = Controls(registry, audit, operator, kube=kube, kube_namespace="ml")
        yield client, standin, consoles
        for c in consoles.values():
            assert isinstance(c.kube, KubeControl)
            c.kube.close()
            c.close()
    client.close()


def node_drain_plan(client: redis.Redis) -> Plan:
    snapshot, _ = read_registry(client)
    return drain.plan_drain(
        snapshot, {"node": "gpu-a", "kube": True, "timeout_s": 10, "poll_s": 0.02}
    )


def test_an_undrain_planned_before_a_node_drain_is_refused_after_it(
    world: tuple[redis.Redis, KubeStandIn, dict[str, Controls]],
) -> None:
    client, standin, consoles = world
    snapshot, _ = read_registry(client)
    undrain_plan = drain.plan_undrain(snapshot, {"backend": "b1"})
    assert undrain_plan.ok and undrain_plan.params["on_node"] == "gpu-a"
    done = execute(drain.apply_drain, node_drain_plan(client), consoles["ann@h1"], lambda e: None)
    assert done.status is OutcomeStatus.OK, done
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True
    refused = execute(drain.apply_undrain, undrain_plan, consoles["bob@h2"], lambda e: None)
    assert refused.status is OutcomeStatus.REFUSED and refused.exit_code == 3, refused
    assert "node gpu-a, where b1 runs, is cordoned" in refused.message
    assert "gpucon undrain gpu-a --node" in refused.message
    assert client.hget("gpucon:backend:b1", "state") == "drained"


def test_an_undrain_whose_pod_is_gone_is_refused(
    world: tuple[redis.Redis, KubeStandIn, dict[str, Controls]],
) -> None:
    client, standin, consoles = world
    snapshot, _ = read_registry(client)
    b1 = msgspec.structs.replace(snapshot.backends["b1"], pod="ml/b1-pod", node="gpu-a")
    snapshot = msgspec.structs.replace(snapshot, backends={**snapshot.backends, "b1": b1})
    plan = drain.plan_undrain(snapshot, {"backend": "b1"})
    assert plan.params["pod"] == "ml/b1-pod"
    standin.delete_pod("ml", "b1-pod")  # evicted after the plan was made
    refused = execute(drain.apply_undrain, plan, consoles["bob@h2"], lambda e: None)
    assert refused.status is OutcomeStatus.REFUSED, refused
    assert "b1's pod ml/b1-pod no longer exists" in refused.message
    assert client.hget("gpucon:backend:b1", "state") == "drained"
    # with its pod back (rescheduled) and the node schedulable, the same undrain goes through
    standin.add_pod("ml", "b1-pod", "gpu-a", {MIG: "1"}, {"gpucon.io/backend": "b1"})
    again = execute(drain.apply_undrain, plan, consoles["bob@h2"], lambda e: None)
    assert again.status is OutcomeStatus.OK, again


def act(
    delay: float,
    apply: ApplyFn,
    plan: Plan,
    controls: Controls,
    outcomes: dict[str, Outcome],
    operator: str,
) -> None:
    threading.Event().wait(delay)
    outcomes[operator] = execute(apply, plan, controls, lambda e: None)


def test_a_node_drain_racing_an_undrain_never_leaves_it_active_on_a_cordoned_node(
    world: tuple[redis.Redis, KubeStandIn, dict[str, Controls]], redis_url: str
) -> None:
    client, standin, consoles = world
    rng = random.Random(9)
    tally: dict[str, int] = {}
    for _trial in range(TRIALS):
        reset(client, redis_url, standin)
        snapshot, _ = read_registry(client)
        undrain_plan = drain.plan_undrain(snapshot, {"backend": "b1"})
        node_plan = node_drain_plan(client)
        outcomes: dict[str, Outcome] = {}
        runs: dict[str, tuple[ApplyFn, Plan]] = {
            "ann@h1": (drain.apply_drain, node_plan),
            "bob@h2": (drain.apply_undrain, undrain_plan),
        }
        # the undrain starts up to 50 ms before or after the node drain
        threads = [
            threading.Thread(
                target=act,
                args=(rng.uniform(0, 0.05), *runs[op], consoles[op], outcomes, op),
            )
            for op in runs
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        state = client.hget("gpucon:backend:b1", "state")
        cordoned = bool(standin.nodes["gpu-a"]["spec"].get("unschedulable"))
        assert not (state == "active" and cordoned), outcomes
        assert outcomes["ann@h1"].status in (OutcomeStatus.OK, OutcomeStatus.LOCK_HELD)
        key = f"drain {outcomes['ann@h1'].status} / undrain {outcomes['bob@h2'].status}"
        tally[key] = tally.get(key, 0) + 1
    print(f"{TRIALS} trials: {tally}")


def test_a_node_drain_of_a_node_that_left_the_cluster_is_refused(
    world: tuple[redis.Redis, KubeStandIn, dict[str, Controls]],
) -> None:
    client, standin, consoles = world
    snapshot, _ = read_registry(client)
    plan = drain.plan_drain(snapshot, {"node": "gpu-b", "kube": True, "force": True})
    assert plan.ok and plan.blast_radius.backends == ("b3",)
    del standin.nodes["gpu-b"]  # removed from the cluster after the plan was made
    outcome = execute(drain.apply_drain, plan, consoles["ann@h1"], lambda e: None)
    assert outcome.status is OutcomeStatus.REFUSED, outcome
    assert "node gpu-b no longer exists in Kubernetes" in outcome.message
    assert client.hget("gpucon:backend:b3", "state") == "active"
