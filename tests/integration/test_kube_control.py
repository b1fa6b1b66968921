"""KubeControl (official client) against the stand-in Kubernetes API server: cordon, labels,
evictions that respect PodDisruptionBudgets (429 retried with backoff), GPU pods on a node."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucon.config import FleetConfig, GpuconConfig, KubeConfig, RedisConfig
from gpucon.controls.base import KubeControl as KubeControlProtocol
from gpucon.controls.base import ReadOnlyError
from gpucon.controls.kube import (
    EvictionTimeout,
    KubeControl,
    KubeControlError,
    build_kube_control,
)
from gpucon.session import open_session
from tests.helpers.kube_standin import KubeStandIn

pytestmark = pytest.mark.integration

MIG = "nvidia.com/mig-3g.40gb"
EVICTION_PATH = "/api/v1/namespaces/ml/pods/llm-a-0/eviction"


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    with KubeStandIn() as server:
        server.add_node("gpu-a", {"nvidia.com/mig.config": "all-3g.40gb"}, {MIG: "2"})
        for i in range(2):
            server.add_pod(
                "ml",
                f"llm-a-{i}",
                "gpu-a",
                {MIG: "1"},
                labels={"app": "llm-a"},
                pod_ip=f"10.1.0.{i}",
            )
        server.add_pod("ml", "sidecar-0", "gpu-a", {"cpu": "1"}, labels={"app": "sidecar"})
        server.add_pod("ml", "llm-b-0", "gpu-b", {MIG: "1"}, labels={"app": "llm-b"})
        yield server


@pytest.fixture
def control(standin: KubeStandIn, tmp_path: Path) -> Iterator[KubeControl]:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    ctl = KubeControl(str(kubeconfig), timeout_s=5.0, backoff_s=0.05, backoff_max_s=0.4)
    yield ctl
    ctl.close()


def test_cordon_and_uncordon_send_the_right_patch(
    control: KubeControl, standin: KubeStandIn
) -> None:
    control.cordon("gpu-a")
    (patch,) = standin.recorded("PATCH")
    assert patch.path == "/api/v1/nodes/gpu-a"
    assert patch.body == {"spec": {"unschedulable": True}}
    assert patch.content_type == "application/strategic-merge-patch+json"
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True

    control.uncordon("gpu-a")
    assert standin.recorded("PATCH")[-1].body == {"spec": {"unschedulable": None}}
    assert "unschedulable" not in standin.nodes["gpu-a"]["spec"]


def test_set_node_label_patches_the_label_and_refuses_bad_ones_before_sending(
    control: KubeControl, standin: KubeStandIn
) -> None:
    control.set_node_label("gpu-a", "nvidia.com/mig.config", "all-1g.10gb")
    assert standin.recorded("PATCH")[-1].body == {
        "metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}
    }
    assert standin.nodes["gpu-a"]["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    with pytest.raises(ValueError, match="label value 'all 1g!'"):
        control.set_node_label("gpu-a", "nvidia.com/mig.config", "all 1g!")
    with pytest.raises(ValueError, match="label key 'Bad_Prefix/x'"):
        control.set_node_label("gpu-a", "Bad_Prefix/x", "v")
    assert len(standin.recorded("PATCH")) == 1


def test_patching_an_unknown_node_names_it_and_the_api_message(control: KubeControl) -> None:
    with pytest.raises(
        KubeControlError, match=r"cordon node gpu-z: HTTP 404 NotFound: .*not found"
    ):
        control.cordon("gpu-z")


def test_gpu_pods_on_a_node(control: KubeControl, standin: KubeStandIn) -> None:
    pods = control.gpu_pods_on("gpu-a")
    assert [p.ref for p in pods] == ["ml/llm-a-0", "ml/llm-a-1"]  # not the CPU sidecar
    assert pods[0].mig_profile == "3g.40gb"
    assert standin.recorded("GET")[-1].query["fieldSelector"] == "spec.nodeName=gpu-a"


def test_eviction_refused_with_429_first_is_retried_with_backoff_then_succeeds(
    control: KubeControl, standin: KubeStandIn
) -> None:
    standin.add_pdb("ml", "llm-a-budget", {"app": "llm-a"}, min_available=1)
    standin.evictions_refused_first = 2  # the API server answers 429 twice, then honours the PDB
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    control._sleep = sleep
    progress: list[str] = []
    control.evict("llm-a-0", "ml", timeout_s=5.0, on_progress=progress.append)

    posts = standin.recorded("POST", EVICTION_PATH)
    assert len(posts) == 3
    assert posts[0].body["kind"] == "Eviction"
    assert posts[0].body["apiVersion"] == "policy/v1"
    assert posts[0].body["metadata"] == {"name": "llm-a-0", "namespace": "ml"}
    assert slept == [0.05, 0.1]  # exponential backoff between the refusals
    assert ("ml", "llm-a-0") not in standin.pods  # evicted
    assert ("ml", "llm-a-1") in standin.pods  # the budget kept one
    assert "refused (attempt 1)" in progress[0] and "disruption budget" in progress[0]
    assert progress[-1] == "pod ml/llm-a-0 evicted (attempt 3)"
    assert standin.recorded("DELETE") == []  # never deleted directly


def test_eviction_blocked_by_the_budget_times_out_and_leaves_the_pod(
    control: KubeControl, standin: KubeStandIn
) -> None:
    standin.add_pdb(
        "ml", "llm-a-budget", {"app": "llm-a"}, min_available=2
    )  # no disruption allowed
    started = time.monotonic()
    with pytest.raises(EvictionTimeout) as caught:
        control.evict("llm-a-0", "ml", timeout_s=0.6)
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert "evict pod ml/llm-a-0: still refused after" in message
    assert "HTTP 429 TooManyRequests" in message and "llm-a-budget" in message
    assert "the pod was not evicted" in message
    assert elapsed <= 0.6 + 2.0  # gave up at the timeout (plus one request, on a busy CI host)
    assert len(standin.recorded("POST", EVICTION_PATH)) >= 3  # it did retry
    assert ("ml", "llm-a-0") in standin.pods
    assert standin.recorded("DELETE") == []


def test_evicting_a_pod_that_is_gone_is_done(control: KubeControl) -> None:
    progress: list[str] = []
    control.evict("ghost-0", "ml", timeout_s=2.0, on_progress=progress.append)
    assert progress == ["pod ml/ghost-0 is already gone"]


def test_api_server_down_is_a_clear_error(control: KubeControl, standin: KubeStandIn) -> None:
    standin.stop()
    with pytest.raises(KubeControlError, match=r"evict pod ml/llm-a-0: cannot reach 127\.0\.0\.1"):
        control.evict("llm-a-0", "ml", timeout_s=2.0)


def test_built_from_config_it_is_the_control_drain_uses(
    standin: KubeStandIn, tmp_path: Path
) -> None:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    control = build_kube_control(KubeConfig(kubeconfig=str(kubeconfig), timeout_s=3.0))
    assert isinstance(control, KubeControl)
    as_protocol: KubeControlProtocol = control  # mypy checks it meets the drain's contract
    as_protocol.cordon("gpu-a")
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True
    control.close()


def test_disruptions_allowed_by_each_budget(control: KubeControl, standin: KubeStandIn) -> None:
    standin.add_pdb("ml", "llm-a-budget", {"app": "llm-a"}, min_available=1)
    standin.add_pdb("ml", "llm-b-budget", {"app": "llm-b"}, max_unavailable=0)
    assert control.disruptions_allowed("ml") == {"llm-a-budget": 1, "llm-b-budget": 0}
    assert standin.recorded("GET")[-1].path == "/apis/policy/v1/namespaces/ml/poddisruptionbudgets"
    control.evict("llm-a-0", "ml", timeout_s=2.0)
    assert control.disruptions_allowed("ml")["llm-a-budget"] == 0


def test_a_session_makes_a_kube_control_only_when_not_read_only(
    standin: KubeStandIn, tmp_path: Path, redis_url: str
) -> None:
    kubeconfig = str(standin.write_kubeconfig(tmp_path / "kubeconfig"))
    fleet = FleetConfig(redis=RedisConfig(url=redis_url), kube=KubeConfig(kubeconfig=kubeconfig))
    config = GpuconConfig(fleets={"default": fleet}, audit_path=tmp_path / "audit.jsonl")
    with pytest.raises(ReadOnlyError):
        open_session(config, read_only=True).controls()
    assert standin.requests == []  # nothing was sent in read-only mode
    session = open_session(config, read_only=False)
    try:
        controls = session.controls()
        assert isinstance(controls.kube, KubeControl)
        controls.kube.cordon("gpu-a")
    finally:
        session.close()
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True
