"""The hub running the Kubernetes and libvirt sources in its worker threads: the snapshot joins
pods, nodes and VMs; the Kubernetes source lists once and then only watches."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gpucon.hub import Hub
from gpucon.model.fleet import Health
from gpucon.model.snapshot import Snapshot
from gpucon.sources.kube import KubeSource
from gpucon.sources.libvirt_source import LibvirtSource
from tests.helpers.kube_standin import KubeStandIn
from tests.helpers.servers import wait_until

pytest.importorskip("libvirt")

pytestmark = pytest.mark.integration

LIBVIRT_XML = Path(__file__).resolve().parents[1] / "fixtures" / "libvirt" / "gpu_host.xml"


def test_hub_merges_kube_and_libvirt_and_kube_never_polls(tmp_path: Path) -> None:
    with KubeStandIn() as standin:
        standin.add_node(
            "gpu-a", {"nvidia.com/mig.config": "all-3g.40gb"}, {"nvidia.com/mig-3g.40gb": "2"}
        )
        standin.add_pod(
            "ml",
            "llm-a-0",
            "gpu-a",
            {"nvidia.com/mig-3g.40gb": "1"},
            {"gpucon.io/backend": "llm-a"},
            {"gpucon.io/slot": "gpu-a/gpu0/gi1"},
        )
        kubeconfig = str(standin.write_kubeconfig(tmp_path / "kubeconfig"))
        hub = Hub(
            [
                LibvirtSource(f"test://{LIBVIRT_XML}", cadence_s=0.05, host="kvm-a"),
                KubeSource(kubeconfig=kubeconfig, cadence_s=0.05, timeout_s=5.0),
            ],
            refresh_s=0.05,
        )
        latest: list[Snapshot] = []
        seen = threading.Event()

        def on_snapshot(snapshot: Snapshot) -> None:
            latest.append(snapshot)
            if "llm-b" in snapshot.backends:
                seen.set()

        hub.start(on_snapshot)
        try:
            wait_until(
                lambda: bool(latest) and "gpu-a" in latest[-1].nodes, what="the first kube read"
            )
            standin.add_pod(
                "ml",
                "llm-b-0",
                "gpu-a",
                {"nvidia.com/mig-3g.40gb": "1"},
                {"gpucon.io/backend": "llm-b"},
            )
            assert seen.wait(5.0)
            for _ in range(10):  # many more reads, all from the watch cache
                count = len(latest)
                wait_until(lambda: len(latest) > count, what="another snapshot")  # noqa: B023
        finally:
            hub.stop()
        snap = latest[-1]
        assert snap.sources["kube"].health is Health.OK
        assert snap.sources["libvirt"].health is Health.OK
        assert snap.backends["llm-a"].pod == "ml/llm-a-0"
        assert snap.slots["gpu-a/gpu0/gi1"].pod == "ml/llm-a-0"
        assert snap.slots["vm:vm-a-1"].vm is not None
        assert snap.nodes["gpu-a"].gpu_pods == ("ml/llm-a-0", "ml/llm-b-0")
        gets = standin.recorded("GET")
        assert sorted(r.path for r in gets if not r.is_watch) == ["/api/v1/nodes", "/api/v1/pods"]
        assert len([r for r in gets if r.is_watch]) == 2
