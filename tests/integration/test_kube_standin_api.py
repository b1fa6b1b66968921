"""The Kubernetes stand-in answers as a real API server does, checked through the official
client over HTTPS with the CA verified: set-based selectors, ``limit``/``continue`` paging and a
410 for an expired token, BOOKMARK events only when asked for, graceful deletion (Terminating,
then DELETED after the grace period) and PodDisruptionBudget health counted by Ready."""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.helpers.kube_standin import TOKEN, KubeStandIn

pytestmark = pytest.mark.integration
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    with KubeStandIn() as server:
        server.add_node("gpu-a")
        server.add_pod("ml", "llm-0", "gpu-a", labels={"app": "llm", "tier": "gpu"}, grace_s=1)
        server.add_pod("ml", "llm-1", "gpu-a", labels={"app": "llm", "tier": "gpu"})
        server.add_pod("ml", "emb-0", "gpu-a", labels={"app": "emb", "canary": "yes"})
        server.add_pod("web", "front-0", None, labels={"app": "web"})
        server.add_pod("web", "front-1", None, labels={"app": "web", "tier": "cpu"})
        yield server


@pytest.fixture
def api_client(standin: KubeStandIn, tmp_path: Path) -> Iterator[Any]:
    kubeconfig = str(standin.write_kubeconfig(tmp_path / "kubeconfig"))
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    yield api
    api.close()


@pytest.fixture
def core(api_client: Any) -> Any:
    return client.CoreV1Api(api_client)


class Watcher:
    """One raw watch stream read in a thread: its events land in a queue, in order."""

    def __init__(self, standin: KubeStandIn, path: str, query: str) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._conn = http.client.HTTPSConnection(
            "127.0.0.1", standin.port, context=standin.client_context(), timeout=10
        )
        self._conn.request("GET", f"{path}?watch=true&{query}", headers=AUTH)
        self._sock = self._conn.sock
        self._answer = self._conn.getresponse()
        assert self._answer.status == 200
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError, http.client.HTTPException):
            for line in self._answer:
                self.events.put(json.loads(line))

    def next(self, timeout_s: float = 5.0) -> dict[str, Any]:
        return self.events.get(timeout=timeout_s)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the reader, which close() does not
        self._thread.join(timeout=2)
        self._conn.close()


def evict(core: Any, namespace: str, name: str) -> int:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    try:
        core.create_namespaced_pod_eviction(name, namespace, body)
    except client.ApiException as exc:
        return int(exc.status)
    return 201


def names(body: Any) -> list[str]:
    return [p.metadata.name for p in body.items]


def test_the_kubeconfig_is_https_with_the_ca_verified(standin: KubeStandIn) -> None:
    assert standin.url.startswith("https://127.0.0.1:")
    request = urllib.request.Request(
        standin.url + "/api/v1/nodes", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, context=standin.client_context(), timeout=5) as answer:
        assert [n["metadata"]["name"] for n in json.load(answer)["items"]] == ["gpu-a"]
    # a client that does not trust the throwaway CA is refused at the handshake
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(request, context=ssl.create_default_context(), timeout=5)
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)


def test_set_based_label_selectors(core: Any) -> None:
    ask = core.list_pod_for_all_namespaces
    assert names(ask(label_selector="app in (llm,web)")) == ["llm-0", "llm-1", "front-0", "front-1"]
    assert names(ask(label_selector="app notin (llm, web)")) == ["emb-0"]
    assert names(ask(label_selector="!tier")) == ["emb-0", "front-0"]
    assert names(ask(label_selector="tier,tier!=gpu")) == ["front-1"]
    assert names(ask(label_selector="app=llm,!canary", field_selector="metadata.name!=llm-0")) == [
        "llm-1"
    ]
    with pytest.raises(client.ApiException) as bad:
        ask(label_selector="app in llm")
    assert bad.value.status == 400


def test_paging_with_continue_tokens_and_410_once_expired(core: Any, standin: KubeStandIn) -> None:
    first = core.list_pod_for_all_namespaces(limit=2)  # in namespace/name order
    assert names(first) == ["emb-0", "llm-0"]
    assert first.metadata.remaining_item_count == 3
    second = core.list_pod_for_all_namespaces(limit=2, _continue=first.metadata._continue)
    assert names(second) == ["llm-1", "front-0"]
    last = core.list_pod_for_all_namespaces(limit=2, _continue=second.metadata._continue)
    assert names(last) == ["front-1"]
    assert not last.metadata._continue and last.metadata.remaining_item_count is None
    standin.expire_resource_versions()  # compaction: the token's resourceVersion is gone
    with pytest.raises(client.ApiException) as gone:
        core.list_pod_for_all_namespaces(limit=2, _continue=first.metadata._continue)
    assert gone.value.status == 410
    assert json.loads(gone.value.body or "{}")["reason"] == "Expired"


def test_bookmarks_only_when_asked_for(standin: KubeStandIn) -> None:
    since = standin.resource_version
    asked = Watcher(
        standin, "/api/v1/namespaces/ml/pods", f"resourceVersion={since}&allowWatchBookmarks=true"
    )
    plain = Watcher(standin, "/api/v1/namespaces/ml/pods", f"resourceVersion={since}")
    try:
        standin.add_node("gpu-b")  # the resourceVersion moves on, with nothing for these watches
        standin.send_bookmarks()
        bookmark = asked.next()
        assert bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["kind"] == "Pod"
        assert bookmark["object"]["metadata"] == {"resourceVersion": str(standin.resource_version)}
        standin.set_pod_ready("ml", "llm-1", False)
        assert asked.next()["type"] == "MODIFIED"
        first = plain.next()  # no bookmark was queued ahead of the event
        assert first["type"] == "MODIFIED" and first["object"]["metadata"]["name"] == "llm-1"
    finally:
        asked.close()
        plain.close()


def test_eviction_is_a_graceful_deletion(core: Any, standin: KubeStandIn) -> None:
    watcher = Watcher(
        standin, "/api/v1/namespaces/ml/pods", f"resourceVersion={standin.resource_version}"
    )
    try:
        evicted_at = time.monotonic()
        assert evict(core, "ml", "llm-0") == 201
        terminating = watcher.next()
        assert terminating["type"] == "MODIFIED"
        meta = terminating["object"]["metadata"]
        assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 1
        # still there, Terminating, for its grace period; a second eviction changes nothing
        assert core.read_namespaced_pod("llm-0", "ml").metadata.deletion_timestamp is not None
        assert evict(core, "ml", "llm-0") == 201
        deleted = watcher.next()
        assert deleted["type"] == "DELETED" and deleted["object"]["metadata"]["name"] == "llm-0"
        assert time.monotonic() - evicted_at >= 0.9
        with pytest.raises(client.ApiException) as gone:
            core.read_namespaced_pod("llm-0", "ml")
        assert gone.value.status == 404
        # a pod with no grace period goes at once: DELETED is the only event
        assert evict(core, "ml", "llm-1") == 201
        assert watcher.next()["type"] == "DELETED"
    finally:
        watcher.close()


def test_budget_health_is_counted_by_ready_and_terminating_pods_are_not_healthy(
    api_client: Any, core: Any, standin: KubeStandIn
) -> None:
    standin.add_pdb("ml", "llm-budget", {"app": "llm"}, min_available=1)
    policy = client.PolicyV1Api(api_client)

    def budget() -> tuple[int, int]:
        status = policy.read_namespaced_pod_disruption_budget("llm-budget", "ml").status
        assert status is not None
        return status.current_healthy or 0, status.disruptions_allowed or 0

    assert budget() == (2, 1)
    standin.set_pod_ready("ml", "llm-1", False)  # Running, but not Ready
    assert standin.pods[("ml", "llm-1")]["status"]["phase"] == "Running"
    assert budget() == (1, 0)
    assert evict(core, "ml", "llm-0") == 429
    standin.set_pod_ready("ml", "llm-1", True)
    assert budget() == (2, 1)
    assert evict(core, "ml", "llm-0") == 201  # Terminating for 1 s: no longer healthy
    assert budget() == (1, 0)
    assert evict(core, "ml", "llm-1") == 429
