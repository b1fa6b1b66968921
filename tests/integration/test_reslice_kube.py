"""Re-slice on Kubernetes: cordon, ``nvidia.com/mig.config``, follow the state label, uncordon;
against the Kubernetes API stand-in (real HTTPS, the official client) and a mig-manager
STAND-IN that moves ``nvidia.com/mig.config.state`` pending -> success (failed for a config it
does not know; stuck in pending for one it stalls on), with the real Redis registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from msgspec.structs import replace

from gpucon.actions import reslice, reslice_apply
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus, Plan
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.kube import KubeControl
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.fleet import BackendState, Gpu
from gpucon.model.snapshot import Snapshot
from tests.helpers.kube_standin import KubeStandIn
from tests.helpers.mig_manager_standin import CONFIG, STATE, MigManagerStandIn
from tests.helpers.mig_tables import table

pytestmark = pytest.mark.integration

NODE = "gpu-a"
PARTED = """
version: v1
mig-configs:
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  custom:
    - devices: all
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
"""


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("sdxl-1", "http://127.0.0.1:1", "sdxl", f"{NODE}/gpu0/gi1", weight=2.0),
            BackendRecord("sd15-2", "http://127.0.0.1:2", "sd15", f"{NODE}/gpu1/gi1", weight=1.0),
            BackendRecord("sdxl-9", "http://127.0.0.1:9", "sdxl", "gpu-b/gpu0", weight=1.0),
            BackendRecord("sd15-9", "http://127.0.0.1:8", "sd15", "gpu-b/gpu1", weight=1.0),
        ],
    )
    yield c
    c.close()


@pytest.fixture
def kube() -> Iterator[KubeStandIn]:
    with KubeStandIn() as standin:
        standin.add_node(NODE, {CONFIG: "all-disabled", STATE: "success"})
        yield standin


def plan_for(client: redis.Redis, config: str, timeout_s: float = 10.0) -> Plan:
    registry, _ = read_registry(client)
    gpu = Gpu("GPU-a", NODE, 0, "NVIDIA A100-SXM4-80GB", mig_profiles=table("a100_80gb"))
    snapshot: Snapshot = replace(registry, gpus={gpu.uuid: gpu})
    params = {
        "gpu": f"{NODE}/gpu0",
        "config_name": config,
        "config_text": PARTED,
        "executor": "kubernetes",
        "timeout_s": timeout_s,
        "poll_s": 0.02,
    }
    return reslice.plan_reslice(snapshot, params)


def controls_for(redis_url: str, tmp_path: Path, kube: KubeStandIn) -> Controls:
    registry = RedisRegistry.from_url(redis_url)
    config = kube.write_kubeconfig(tmp_path / "kubeconfig")
    return Controls(
        registry,
        AuditLog(tmp_path / "audit.jsonl", registry.append_audit),
        "ann@h1",
        kube=KubeControl(str(config), timeout_s=5.0),
    )


def node(kube: KubeStandIn) -> tuple[dict[str, str], bool]:
    obj = kube.nodes[NODE]
    return dict(obj["metadata"]["labels"]), bool(obj["spec"].get("unschedulable"))


def test_mig_manager_applies_the_config_and_the_node_is_uncordoned(
    client: redis.Redis, redis_url: str, tmp_path: Path, kube: KubeStandIn
) -> None:
    plan = plan_for(client, "all-balanced")
    assert plan.ok, plan.failed_preconditions
    # mig-manager re-slices every GPU of the node: both of its backends are in the radius
    assert plan.blast_radius.backends == ("sd15-2", "sdxl-1")
    assert [s.key for s in plan.steps][-4:] == [
        f"cordon:{NODE}",
        f"label:{NODE}",
        f"mig-state:{NODE}",
        f"uncordon:{NODE}",
    ]
    controls = controls_for(redis_url, tmp_path, kube)
    states: list[str] = []
    with MigManagerStandIn(kube, NODE, {"all-balanced", "all-disabled"}) as manager:
        outcome = execute(
            reslice_apply.apply_reslice,
            plan,
            controls,
            lambda e: states.append(e.text) if e.step.startswith("mig-state") else None,
        )
    assert outcome.ok, outcome
    assert manager.applied == [("all-balanced", "success")]
    labels, cordoned = node(kube)
    assert labels[CONFIG] == "all-balanced" and labels[STATE] == "success" and not cordoned
    assert any(t.startswith("pending") for t in states)  # followed through pending
    for name in ("sdxl-1", "sd15-2"):  # drained until their pods run on the new slots
        record = controls.registry.backend(name)
        assert record is not None and record.state is BackendState.DRAINED
    assert "undrain each once its pod runs on a new slot" in outcome.message

    # run again: the label is set and mig-manager says success: nothing is written
    first_patches = [r for r in kube.recorded("PATCH") if CONFIG in str(r.body)]
    assert len(first_patches) == 1  # the first run set the label once
    patches_before = len(kube.recorded("PATCH"))
    again = execute(reslice_apply.apply_reslice, plan, controls, lambda e: None)
    assert again.ok, again
    label_patches = [r for r in kube.recorded("PATCH")[patches_before:] if CONFIG in str(r.body)]
    assert label_patches == []


def test_failed_stops_with_the_node_cordoned(
    client: redis.Redis, redis_url: str, tmp_path: Path, kube: KubeStandIn
) -> None:
    plan = plan_for(client, "custom")
    controls = controls_for(redis_url, tmp_path, kube)
    with MigManagerStandIn(kube, NODE, {"all-balanced"}):  # it has no "custom" config
        outcome = execute(reslice_apply.apply_reslice, plan, controls, lambda e: None)
    assert outcome.status is OutcomeStatus.FAILED
    assert "mig-manager reports failed for custom" in outcome.message
    labels, cordoned = node(kube)
    assert labels[STATE] == "failed" and cordoned


def test_pending_too_long_stops_with_the_node_cordoned(
    client: redis.Redis, redis_url: str, tmp_path: Path, kube: KubeStandIn
) -> None:
    plan = plan_for(client, "all-balanced", timeout_s=1.0)
    controls = controls_for(redis_url, tmp_path, kube)
    with MigManagerStandIn(kube, NODE, {"all-balanced"}, stalls=frozenset({"all-balanced"})):
        outcome = execute(reslice_apply.apply_reslice, plan, controls, lambda e: None)
    assert outcome.status is OutcomeStatus.TIMEOUT
    assert f"{STATE} is pending after" in outcome.message
    labels, cordoned = node(kube)
    assert labels[STATE] == "pending" and cordoned


def test_a_layout_string_is_refused_on_kubernetes(client: redis.Redis) -> None:
    registry, _ = read_registry(client)
    gpu = Gpu("GPU-a", NODE, 0, "A100", mig_profiles=table("a100_80gb"))
    with pytest.raises(Exception, match="applies a named mig-parted config"):
        reslice.plan_reslice(
            replace(registry, gpus={gpu.uuid: gpu}),
            {"gpu": f"{NODE}/gpu0", "layout": "7g.80gb", "executor": "kubernetes"},
        )
