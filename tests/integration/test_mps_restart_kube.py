"""The MPS restart on Kubernetes, against the stand-in API server: the GPU operator's MPS
control-daemon pod on the node is deleted and the one its DaemonSet makes in its place is
followed to Ready. The stand-in recreates nothing by itself, so the test runs a DaemonSet
STAND-IN (a thread that, once the node's pod is gone, adds a new one and marks it Ready a
moment later). The limits come from the operator's config: those steps are skipped with a note."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gpucon.actions import mps_restart
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.config import KubeConfig
from gpucon.config.mps import MpsDaemonConfig
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.mps_daemons import daemons_from_config
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys
from tests.helpers.kube_standin import KubeStandIn

pytestmark = pytest.mark.integration
NS = "gpu-operator"
LABELS = {"app": "nvidia-device-plugin-mps-control-daemon"}


class DaemonSetStandIn:
    """Keeps one MPS pod on ``node``: a deleted one is replaced, Ready after ``ready_after_s``."""

    def __init__(self, server: KubeStandIn, node: str, ready_after_s: float = 0.3) -> None:
        self.server, self.node, self.ready_after_s = server, node, ready_after_s
        self.names = (f"mps-control-daemon-{i}" for i in itertools.count())
        self.created: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._add()
        self.server.set_pod_ready(NS, self.created[-1], True)

    def _add(self) -> None:
        name = next(self.names)
        self.server.add_pod(
            NS, name, self.node, labels=LABELS, ready=False, owner=("DaemonSet", "mps")
        )
        self.created.append(name)

    def _run(self) -> None:
        while not self.stop.is_set():
            if not any(
                ns == NS and pod["spec"].get("nodeName") == self.node
                for (ns, _), pod in list(self.server.pods.items())
            ):
                time.sleep(0.1)
                self._add()
                time.sleep(self.ready_after_s)
                self.server.set_pod_ready(NS, self.created[-1], True)
            time.sleep(0.02)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KubeStandIn, DaemonSetStandIn, Path]]:
    with KubeStandIn() as server:
        server.add_node("gpu-node-1", {}, {"nvidia.com/gpu": "8"})
        daemonset = DaemonSetStandIn(server, "gpu-node-1")
        daemonset.thread.start()
        try:
            yield server, daemonset, server.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            daemonset.stop.set()
            daemonset.thread.join(timeout=5)


def test_restart_deletes_the_pod_and_follows_the_new_one_to_ready(
    cluster: tuple[KubeStandIn, DaemonSetStandIn, Path], redis_url: str, tmp_path: Path
) -> None:
    server, daemonset, kubeconfig = cluster
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("llm-a", "http://127.0.0.1:1", "llm", "gpu-node-1/gpu0", weight=1.0),
            BackendRecord("llm-b", "http://127.0.0.1:2", "llm", "gpu-node-2/gpu0", weight=1.0),
        ],
    )
    config = MpsDaemonConfig(
        target="gpu-node-1",
        transport="kube",
        node="gpu-node-1",
        default_thread_pct=50.0,
    )
    snapshot, _ = read_registry(client)
    params = {"target": "gpu-node-1", "daemon": mps_restart.daemon_params(config), "timeout_s": 5}
    plan = mps_restart.plan_mps_restart(snapshot, params)
    assert plan.ok and plan.blast_radius.backends == ("llm-a",)
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(
        registry,
        AuditLog(tmp_path / "audit.jsonl", registry.append_audit),
        "ann@h1",
        mps=daemons_from_config((config,), KubeConfig(kubeconfig=str(kubeconfig))),
    )
    outcome = execute(mps_restart.apply, plan, controls, lambda e: None)
    assert outcome.status is OutcomeStatus.OK, f"{outcome.message} — {outcome.state_left}"
    assert len(daemonset.created) == 2, "the first pod was deleted and a second one made"
    deletes = server.recorded("DELETE")
    assert [d.path for d in deletes] == [f"/api/v1/namespaces/{NS}/pods/mps-control-daemon-0"]
    said = {r.step: r.text for r in outcome.steps}
    assert "does not speak" in said["thread-pct"]
    assert (NS, "mps-control-daemon-1") in server.pods
    assert client.hget(keys.backend_key("llm-a"), "state") == "active"
    client.close()


def test_no_new_pod_is_a_failed_start_that_names_the_node(
    cluster: tuple[KubeStandIn, DaemonSetStandIn, Path], tmp_path: Path
) -> None:
    from gpucon.controls.mps import MpsError
    from gpucon.controls.mps_daemons import daemon_for

    _server, daemonset, kubeconfig = cluster
    daemonset.stop.set()  # the DaemonSet is gone: nothing replaces the pod
    daemonset.thread.join(timeout=5)
    config = MpsDaemonConfig(target="gpu-node-1", transport="kube", node="gpu-node-1")
    daemon = daemon_for(config, KubeConfig(kubeconfig=str(kubeconfig)))
    assert daemon.running()
    daemon.stop(5)
    assert not daemon.running()
    with pytest.raises(MpsError, match="no MPS pod became ready on gpu-node-1"):
        daemon.start(0.5)
    daemon.close()
