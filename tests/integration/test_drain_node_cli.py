"""A node drain and undrain through the command line: the real Redis registry, the Kubernetes
stand-in (the official client talks HTTP to it), a config file naming both.

``gpucon drain NODE --node`` drains the node's backends, cordons it and evicts its pods; its
undo names ``gpucon undrain NODE --node``, which uncordons the node through
``KubeControl.uncordon`` and restores every drained backend on it. An eviction the budget keeps
refusing until the timeout is a TIMEOUT (exit 6), not a failure (exit 5).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from gpucon.commands.cli import main
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys
from tests.helpers.kube_standin import KubeStandIn

pytestmark = pytest.mark.integration

MIG = "nvidia.com/mig-3g.40gb"


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    with KubeStandIn() as server:
        server.add_node("gpu-a", {}, {MIG: "2"})
        server.add_node("gpu-b", {}, {MIG: "2"})
        server.add_pod("ml", "llm-0", "gpu-a", {MIG: "1"}, {"app": "llm"}, pod_ip="10.1.0.6")
        server.add_pod("ml", "llm-1", "gpu-a", {MIG: "1"}, {"app": "llm"}, pod_ip="10.1.0.7")
        server.add_pod("ml", "llm-2", "gpu-b", {MIG: "1"}, {"app": "llm"}, pod_ip="10.1.0.8")
        # a GPU pod that serves no backend (a batch job): a node drain evicts it too
        server.add_pod("batch", "trainer", "gpu-a", {MIG: "1"}, {"app": "train"})
        yield server


@pytest.fixture
def client(
    redis_url: str, standin: KubeStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[redis.Redis]:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    config = tmp_path / "config.toml"
    config.write_text(
        f'operator = "cli@test"\naudit_path = "{tmp_path / "audit.jsonl"}"\n'
        f'[fleets.lab.redis]\nurl = "{redis_url}"\n'
        f'[fleets.lab.kube]\nkubeconfig = "{kubeconfig}"\ntimeout_s = 5.0\n'
    )
    monkeypatch.setenv("GPUCON_CONFIG", str(config))
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://10.1.0.6:8000", "m", "gpu-a/gpu0/gi1", weight=3.0),
            BackendRecord("b2", "http://10.1.0.7:8000", "m", "gpu-a/gpu0/gi2", weight=2.0),
            BackendRecord("b3", "http://10.1.0.8:8000", "m", "gpu-b/gpu0/gi1", weight=1.0),
        ],
    )
    yield c
    c.close()


def _json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_node_drain_then_undrain_node_uncordons_and_restores_weights(
    client: redis.Redis, standin: KubeStandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["drain", "gpu-a", "--node", "--yes", "--json", "--timeout", "10"]) == 0
    drained = _json_lines(capsys.readouterr().out)
    assert drained[0]["plan"]["undo"].startswith("gpucon undrain gpu-a --node")
    assert "kubectl" not in drained[0]["plan"]["undo"]
    assert drained[1]["outcome"]["status"] == "ok", drained[1]
    assert drained[0]["plan"]["params"]["pods"] == ["batch/trainer", "ml/llm-0", "ml/llm-1"]
    assert ("batch", "trainer") not in standin.pods and ("ml", "llm-0") not in standin.pods
    assert ("ml", "llm-2") in standin.pods  # the other node's
    assert standin.nodes["gpu-a"]["spec"]["unschedulable"] is True
    assert {client.hget(keys.backend_key(n), "state") for n in ("b1", "b2")} == {"drained"}

    # the pods are evicted now: the backends are found by their slot's host
    assert main(["undrain", "gpu-a", "--node", "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert "uncordon node gpu-a" in dry and "set b1 state=active" in dry
    assert standin.nodes["gpu-a"]["spec"].get("unschedulable") is True  # dry run: untouched

    assert main(["undrain", "gpu-a", "--node", "--yes", "--json"]) == 0
    out = _json_lines(capsys.readouterr().out)
    plan, outcome = out[0]["plan"], out[1]["outcome"]
    assert plan["target"] == "gpu-a" and plan["undo"] == "gpucon drain gpu-a --node"
    assert [s["key"] for s in plan["steps"]] == ["uncordon:gpu-a", "active:b1", "active:b2"]
    assert outcome["status"] == "ok", outcome
    assert outcome["details"]["weights"] == {"b1": 3.0, "b2": 2.0}
    # uncordoned through the API (a merge patch removing the field), as kubectl would
    patches = [r.body for r in standin.recorded("PATCH", "/api/v1/nodes/gpu-a")]
    assert patches == [{"spec": {"unschedulable": True}}, {"spec": {"unschedulable": None}}]
    assert not standin.nodes["gpu-a"]["spec"].get("unschedulable")
    for name, weight in (("b1", "3.0"), ("b2", "2.0"), ("b3", "1.0")):
        assert client.hget(keys.backend_key(name), "state") == "active"
        assert client.hget(keys.backend_key(name), "weight") == weight
    assert standin.recorded("PATCH", "/api/v1/nodes/gpu-b") == []


def test_undrain_node_without_kubernetes_is_refused_before_any_change(
    client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "nokube.toml"
    config.write_text(f'[fleets.lab.redis]\nurl = "{redis_url}"\n')
    monkeypatch.setenv("GPUCON_CONFIG", str(config))
    client.hset(keys.backend_key("b1"), mapping={"state": "drained", "weight": "0"})
    version = client.get(keys.VERSION)
    assert main(["undrain", "gpu-a", "--node", "--yes"]) == 3
    assert "Kubernetes is not configured" in capsys.readouterr().err
    assert client.hget(keys.backend_key("b1"), "state") == "drained"
    assert client.get(keys.VERSION) == version


def test_eviction_refused_until_the_timeout_is_exit_6_timeout(
    client: redis.Redis, standin: KubeStandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    standin.add_pdb("ml", "llm-budget", {"app": "llm"}, min_available=3)  # never allows one
    code = main(["drain", "gpu-a", "--node", "--yes", "--json", "--timeout", "1"])
    outcome = _json_lines(capsys.readouterr().out)[1]["outcome"]
    assert code == 6, outcome
    assert outcome["status"] == "timeout"
    failed = [s for s in outcome["steps"] if not s["ok"]]
    assert [s["step"] for s in failed] == ["evict:ml/llm-0"]
    assert "llm-budget" in outcome["message"]
    assert ("ml", "llm-0") in standin.pods and standin.recorded("DELETE") == []
