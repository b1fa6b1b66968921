"""A node drain end to end: the drain action over the real Redis registry, the Kubernetes source
mapping backends to pods, and KubeControl cordoning and evicting through the stand-in API server
whose PodDisruptionBudget answers 429 first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus, ProgressEvent
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.kube import KubeControl
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.fleet import Health
from gpucon.model.merge import merge_readings
from gpucon.model.reading import Reading
from gpucon.model.snapshot import Snapshot
from gpucon.registry import keys
from gpucon.sources.kube import KubeSource
from tests.helpers.kube_standin import KubeStandIn

pytestmark = pytest.mark.integration

MIG = "nvidia.com/mig-3g.40gb"


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    with KubeStandIn() as server:
        server.add_node("gpu-a", {"nvidia.com/mig.config": "all-3g.40gb"}, {MIG: "2"})
        server.add_node("gpu-b", {"nvidia.com/mig.config": "all-3g.40gb"}, {MIG: "2"})
        # b1 is matched to its pod by label, b2 by pod IP; b3 serves on the other node
        server.add_pod(
            "ml", "llm-0", "gpu-a", {MIG: "1"}, {"app": "llm", "gpucon.io/backend": "b1"}
        )
        server.add_pod("ml", "llm-1", "gpu-a", {MIG: "1"}, {"app": "llm"}, pod_ip="10.1.0.7")
        server.add_pod("ml", "llm-2", "gpu-b", {MIG: "1"}, {"app": "llm"}, pod_ip="10.1.0.8")
        yield server


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://10.1.0.6:8000", "m", "gpu-a/gpu0/gi1", weight=1.0),
            BackendRecord("b2", "http://10.1.0.7:8000", "m", "gpu-a/gpu0/gi2", weight=1.0),
            BackendRecord("b3", "http://10.1.0.8:8000", "m", "gpu-b/gpu0/gi1", weight=1.0),
        ],
    )
    yield c
    c.close()


def fleet_snapshot(client: redis.Redis, kubeconfig: str) -> Snapshot:
    """The registry joined with what the Kubernetes source reads, as the hub would merge them."""
    registry, _ = read_registry(client)
    source = KubeSource(kubeconfig=kubeconfig, timeout_s=5.0)
    try:
        kube = source.read()
    finally:
        source.close()
    assert kube.health is Health.OK, kube.error
    redis_reading = Reading("redis", Health.OK, 0.0, backends=tuple(registry.backends.values()))
    merged = merge_readings([redis_reading, kube])
    return msgspec.structs.replace(registry, backends=merged.backends, nodes=merged.nodes)


def drain_node(
    standin: KubeStandIn, client: redis.Redis, redis_url: str, tmp_path: Path, timeout_s: float
) -> tuple[OutcomeStatus, str, list[ProgressEvent]]:
    kubeconfig = str(standin.write_kubeconfig(tmp_path / "kubeconfig"))
    snapshot = fleet_snapshot(client, kubeconfig)
    assert snapshot.backends["b2"].pod == "ml/llm-1"  # found by pod IP
    plan = drain.plan_drain(
        snapshot, {"node": "gpu-a", "kube": True, "timeout_s": timeout_s, "poll_s": 0.02}
    )
    assert plan.params["pods"] == ["ml/llm-0", "ml/llm-1"]
    registry = RedisRegistry.from_url(redis_url)
    kube = KubeControl(kubeconfig, timeout_s=5.0, backoff_s=0.05, backoff_max_s=0.2)
    controls = Controls(registry, AuditLog(tmp_path / "audit.jsonl"), "ann@h1", kube=kube)
    events: list[ProgressEvent] = []
    try:
        outcome = execute(drain.apply_drain, plan, controls, events.append)
    finally:
        kube.close()
        controls.close()
    return outcome.status, outcome.message, events


def test_node_drain_cordons_and_evicts_retrying_the_budgets_429(
    standin: KubeStandIn, client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    standin.add_pdb("ml", "llm-budget", {"app": "llm"}, max_unavailable=1)
    standin.evictions_refused_first = 2  # 429 twice before the budget is honoured
    status, message, events = drain_node(standin, client, redis_url, tmp_path, timeout_s=10.0)
    assert status is OutcomeStatus.OK, message
    assert client.hget(keys.backend_key("b1"), "state") == "drained"
    assert client.hget(keys.backend_key("b2"), "state") == "drained"
    assert client.hget(keys.backend_key("b3"), "state") == "active"
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True
    assert [r.body for r in standin.recorded("PATCH", "/api/v1/nodes/gpu-a")] == [
        {"spec": {"unschedulable": True}}
    ]
    posts = [r.path for r in standin.recorded("POST")]
    assert posts.count("/api/v1/namespaces/ml/pods/llm-0/eviction") == 3  # 429, 429, 201
    assert posts.count("/api/v1/namespaces/ml/pods/llm-1/eviction") == 1
    assert ("ml", "llm-0") not in standin.pods and ("ml", "llm-1") not in standin.pods
    assert ("ml", "llm-2") in standin.pods
    assert standin.recorded("DELETE") == []
    refusals = [e.text for e in events if "refused" in e.text]
    assert len(refusals) == 2 and "retrying in" in refusals[0]


def test_node_drain_stops_when_the_budget_never_allows_it(
    standin: KubeStandIn, client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    standin.add_pdb("ml", "llm-budget", {"app": "llm"}, min_available=3)  # no disruption allowed
    status, message, _ = drain_node(standin, client, redis_url, tmp_path, timeout_s=1.0)
    assert status is not OutcomeStatus.OK
    assert "evict pod ml/llm-0" in message and "llm-budget" in message
    assert ("ml", "llm-0") in standin.pods and ("ml", "llm-1") in standin.pods  # untouched
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True  # left cordoned, visibly
    assert client.hget(keys.backend_key("b1"), "state") == "drained"
    assert standin.recorded("DELETE") == []


def test_node_drain_waits_out_a_terminating_pod_before_the_budget_allows_the_next(
    standin: KubeStandIn, client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """An evicted pod stays Terminating for its grace period and is not healthy meanwhile, so
    the budget refuses the next eviction until it is gone; the drain retries through that."""
    standin.update_pod("ml", "llm-0", {"spec": {"terminationGracePeriodSeconds": 1}})
    standin.add_pdb("ml", "llm-budget", {"app": "llm"}, max_unavailable=1)
    status, message, events = drain_node(standin, client, redis_url, tmp_path, timeout_s=10.0)
    assert status is OutcomeStatus.OK, message
    evictions = {
        pod: [code for method, path, code in standin.answers if path.endswith(f"/{pod}/eviction")]
        for pod in ("llm-0", "llm-1")
    }
    assert evictions["llm-0"] == [201]  # accepted at once: it turned Terminating
    assert evictions["llm-1"][0] == 429 and evictions["llm-1"][-1] == 201
    assert set(evictions["llm-1"][:-1]) == {429}
    refusals = [e.text for e in events if "refused" in e.text]
    assert (
        refusals
        and "The disruption budget llm-budget needs 2 healthy pods and has 2 currently"
        in refusals[0]
    )
    # llm-0 went through Terminating (a MODIFIED event carrying its deletionTimestamp)
    history = standin.event_log("pods")
    llm0 = [
        (kind, bool(obj["metadata"].get("deletionTimestamp")))
        for kind, obj in history
        if obj["metadata"]["name"] == "llm-0"
    ]
    assert llm0[-2:] == [("MODIFIED", True), ("DELETED", True)]
    assert ("ml", "llm-0") not in standin.pods and ("ml", "llm-2") in standin.pods
