"""kubectl — a client nobody here wrote — drives the Kubernetes stand-in as it would a cluster.

Each command gpucon's operators (and gpucon itself, through the official client) rely on is run
through ``kubectl`` over HTTPS with the CA verified, and the outputs and exit codes are those a
real API server gives: listing, cordon, label, and a drain that goes through the Eviction API, is
refused by a PodDisruptionBudget (kubectl retries every 5 s), then succeeds once the budget
allows it, waiting for the Terminating pod to go. CI installs kubectl from Debian's
``kubernetes-client`` (scripts/test); without the binary these tests skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.kube_standin import KubeStandIn

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (Debian: kubernetes-client)"),
]
MIG = "nvidia.com/mig.config"


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    with KubeStandIn() as server:
        server.add_node("gpu-a", {MIG: "all-3g.40gb"}, {"nvidia.com/gpu": "1"})
        server.add_node("gpu-b", {"pool": "spare"}, {})
        server.add_pod("ml", "llm-0", "gpu-a", labels={"app": "llm"}, grace_s=1)
        server.add_pod("ml", "llm-1", "gpu-a", labels={"app": "llm"}, empty_dir=True)
        server.add_pod("ml", "llm-2", "gpu-b", labels={"app": "llm"})
        server.add_daemonset("kube-system", "nvidia-device-plugin")
        server.add_pod(
            "kube-system",
            "nvidia-device-plugin-x1",
            "gpu-a",
            owner=("DaemonSet", "nvidia-device-plugin"),
        )
        yield server


@pytest.fixture
def env(standin: KubeStandIn, tmp_path: Path) -> dict[str, str]:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    # a HOME of its own: kubectl caches discovery there, keyed by host:port, and ports are reused
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": os.environ["PATH"], "HOME": str(home), "KUBECONFIG": str(kubeconfig)}


def kubectl(env: dict[str, str], *args: str, timeout_s: float = 30.0) -> tuple[int, str, str]:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, *args], env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    return done.returncode, done.stdout, done.stderr


def table(stdout: str) -> list[list[str]]:
    """Rows of kubectl's column output, the AGE column dropped (it depends on the clock)."""
    lines = [line.split() for line in stdout.strip().splitlines()]
    age = lines[0].index("AGE")
    return [row[:age] + row[age + 1 :] for row in lines]


def test_get_nodes_with_labels_and_set_based_selectors(env: dict[str, str]) -> None:
    rc, out, err = kubectl(env, "get", "nodes", "--show-labels")
    assert rc == 0, err
    assert table(out) == [
        ["NAME", "LABELS"],
        ["gpu-a", f"{MIG}=all-3g.40gb"],
        ["gpu-b", "pool=spare"],
    ]
    rc, out, err = kubectl(env, "get", "nodes", "-l", f"{MIG} in (all-3g.40gb,all-1g.10gb)")
    assert rc == 0, err
    assert table(out) == [["NAME"], ["gpu-a"]]
    rc, out, err = kubectl(env, "get", "nodes", "-l", f"!{MIG},pool notin (busy)")
    assert rc == 0, err
    assert table(out) == [["NAME"], ["gpu-b"]]


def test_get_pods_in_all_namespaces_in_pages(env: dict[str, str], standin: KubeStandIn) -> None:
    rc, out, err = kubectl(env, "get", "pods", "-A", "-o", "wide", "--chunk-size=2")
    assert rc == 0, err
    assert table(out) == [  # the plain-list columns: the stand-in serves no Table form
        ["NAMESPACE", "NAME"],
        ["kube-system", "nvidia-device-plugin-x1"],
        ["ml", "llm-0"],
        ["ml", "llm-1"],
        ["ml", "llm-2"],
    ]
    pages = standin.recorded("GET", "/api/v1/pods")
    assert [r.query.get("limit") for r in pages] == ["2", "2"]
    assert "continue" not in pages[0].query and pages[1].query["continue"]
    rc, out, err = kubectl(env, "get", "pods", "-A", "--field-selector", "spec.nodeName=gpu-b")
    assert rc == 0, err
    assert table(out) == [["NAMESPACE", "NAME"], ["ml", "llm-2"]]


def test_get_pdb_in_all_namespaces(env: dict[str, str], standin: KubeStandIn) -> None:
    standin.add_pdb("ml", "llm-budget", {"app": "llm"}, min_available=2)
    rc, out, err = kubectl(env, "get", "pdb", "-A")
    assert rc == 0, err
    assert table(out) == [["NAMESPACE", "NAME"], ["ml", "llm-budget"]]
    rc, out, err = kubectl(env, "get", "pdb", "-n", "ml", "llm-budget", "-o", "json")
    assert rc == 0, err
    assert '"disruptionsAllowed": 1' in out and '"currentHealthy": 3' in out


def test_cordon_and_uncordon(env: dict[str, str], standin: KubeStandIn) -> None:
    assert kubectl(env, "cordon", "gpu-a")[:2] == (0, "node/gpu-a cordoned\n")
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True
    assert kubectl(env, "cordon", "gpu-a")[:2] == (0, "node/gpu-a already cordoned\n")
    assert kubectl(env, "uncordon", "gpu-a")[:2] == (0, "node/gpu-a uncordoned\n")
    assert "unschedulable" not in standin.nodes["gpu-a"]["spec"]
    patches = standin.recorded("PATCH", "/api/v1/nodes/gpu-a")
    assert [p.content_type for p in patches] == ["application/strategic-merge-patch+json"] * 2
    rc, _, err = kubectl(env, "cordon", "gpu-z")
    assert rc == 1 and 'nodes "gpu-z" not found' in err


def test_label_node_needs_overwrite_to_change_a_value(
    env: dict[str, str], standin: KubeStandIn
) -> None:
    rc, _, err = kubectl(env, "label", "node", "gpu-a", f"{MIG}=all-1g.10gb")
    assert rc == 1
    assert f"'{MIG}' already has a value (all-3g.40gb), and --overwrite is false" in err
    rc, out, err = kubectl(env, "label", "node", "gpu-a", f"{MIG}=all-1g.10gb", "--overwrite")
    assert (rc, out) == (0, "node/gpu-a labeled\n"), err
    assert standin.nodes["gpu-a"]["metadata"]["labels"][MIG] == "all-1g.10gb"
    rc, out, err = kubectl(env, "label", "node", "gpu-a", f"{MIG}-")
    assert rc == 0, err
    assert out in ("node/gpu-a unlabeled\n", "node/gpu-a labeled\n")  # kubectl < 1.2x: labeled
    assert MIG not in standin.nodes["gpu-a"]["metadata"]["labels"]


def test_drain_refuses_daemonset_and_local_storage_pods_without_the_flags(
    env: dict[str, str], standin: KubeStandIn
) -> None:
    rc, out, err = kubectl(env, "drain", "gpu-a", "--timeout=10s")
    assert rc == 1
    assert out == "node/gpu-a cordoned\n"
    assert (
        "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): "
        "kube-system/nvidia-device-plugin-x1" in err
    )
    assert "cannot delete Pods with local storage" in err and "ml/llm-1" in err
    assert standin.recorded("POST") == []  # nothing evicted


def _wait_for(predicate: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_drain_blocked_by_a_budget_retries_then_succeeds(
    env: dict[str, str], standin: KubeStandIn
) -> None:
    standin.add_pdb("ml", "llm-budget", {"app": "llm"}, min_available=2)
    assert KUBECTL is not None
    args = ["drain", "gpu-a", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"]
    proc = subprocess.Popen(
        [KUBECTL, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        # one of the two GPU pods goes; the budget (2 of 3 healthy) then refuses the other
        _wait_for(lambda: ("POST", 429) in [(m, code) for m, _, code in standin.answers], 20.0)
        standin.update_pdb("ml", "llm-budget", {"minAvailable": 1})
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.splitlines()[0] == "node/gpu-a cordoned"
    # kubectl 1.20 (Debian 12's) ends with "evicted", later ones with "drained"
    assert out.splitlines()[-1] in ("node/gpu-a drained", "node/gpu-a evicted")
    assert {"pod/llm-0 evicted", "pod/llm-1 evicted"} <= set(out.splitlines())
    assert re.search(
        r'error when evicting pods/"llm-[01]" -n "ml" \(will retry after 5s\): Cannot evict pod '
        r"as it would violate the pod's disruption budget",
        err,
    )
    assert "ignoring DaemonSet-managed Pods: kube-system/nvidia-device-plugin-x1" in err
    assert sorted(standin.pods) == [("kube-system", "nvidia-device-plugin-x1"), ("ml", "llm-2")]
    assert standin.recorded("DELETE") == []  # evicted, never deleted directly
    # llm-0 has a 1 s grace period: kubectl saw it Terminating and waited until it was gone
    polls = [code for _, path, code in standin.answers if path.endswith("/pods/llm-0")]
    assert polls[-1] == 404 and 200 in polls


def test_drain_still_blocked_at_its_timeout_fails(
    env: dict[str, str], standin: KubeStandIn
) -> None:
    standin.add_pdb("ml", "llm-budget", {"app": "llm"}, min_available=3)
    rc, out, err = kubectl(
        env, "drain", "gpu-a", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=2s"
    )
    assert rc == 1
    assert out.splitlines()[0] == "node/gpu-a cordoned"
    assert re.search(
        r'error when evicting pods/"llm-[01]" -n "ml": global timeout reached: 2s', err
    )
    assert ("ml", "llm-0") in standin.pods and ("ml", "llm-1") in standin.pods
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True  # left cordoned, as kubectl does


def test_delete_waits_out_the_grace_period(env: dict[str, str], standin: KubeStandIn) -> None:
    started = time.monotonic()
    rc, out, err = kubectl(env, "delete", "pod", "-n", "ml", "llm-0", "--grace-period=1")
    assert (rc, out) == (0, 'pod "llm-0" deleted\n'), err
    assert time.monotonic() - started >= 0.9  # kubectl waited (a watch) for the DELETED event
    assert ("ml", "llm-0") not in standin.pods
    history = [
        (kind, bool(obj["metadata"].get("deletionTimestamp")))
        for kind, obj in standin.event_log("pods")
        if obj["metadata"]["name"] == "llm-0"
    ]
    assert history[-2:] == [("MODIFIED", True), ("DELETED", True)]
    rc, _, err = kubectl(env, "delete", "pod", "-n", "ml", "llm-0")
    assert rc == 1 and 'Error from server (NotFound): pods "llm-0" not found' in err
