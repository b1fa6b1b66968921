"""The objects the Kubernetes stand-in keeps and answers with, as the API shapes them.

Pods, Status bodies, merge patches, timestamps, Ready, and a PodDisruptionBudget's status
computed from the pods it selects; plus what the stand-in records of each request.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tests.helpers.kube_selectors import from_label_selector_object, labels_match

Obj = dict[str, Any]
TOKEN = "stand-in-token"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any = None
    content_type: str | None = None

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch", "").lower() in ("true", "1")


@dataclass
class Event:
    rv: int
    collection: str  # "nodes" or "pods"
    type: str
    obj: Obj


def status_body(code: int, reason: str, message: str, **details: Any) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch (what strategic merge does for maps such as labels and spec)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def timestamp(at: float | None = None) -> str:
    moment = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def is_ready(pod: Obj) -> bool:
    """Counted healthy by a PodDisruptionBudget: Ready, and not being deleted."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_object(
    namespace: str,
    name: str,
    node: str | None,
    requests: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    pod_ip: str | None = None,
    phase: str = "Running",
    *,
    ready: bool | None = None,
    grace_s: int = 0,
    owner: tuple[str, str] | None = ("ReplicaSet", ""),
    empty_dir: bool = False,
) -> Obj:
    """A pod object; ``ready`` defaults to ``phase == "Running"``; ``owner`` is its controller
    (kind, name; an empty name is derived from the pod's), None for a bare pod."""
    container: Obj = {"name": "server", "image": "nvcr.io/nvidia/tritonserver:24.08-py3"}
    if requests:
        container["resources"] = {"requests": dict(requests), "limits": dict(requests)}
    ready = phase == "Running" if ready is None else ready
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-pod-{namespace}-{name}",
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
        "creationTimestamp": timestamp(),
    }
    if owner is not None:
        kind, owner_name = owner
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "name": owner_name or name.rsplit("-", 1)[0],
                "uid": f"uid-{kind.lower()}-{namespace}-{owner_name or name}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    spec: Obj = {"containers": [container], "terminationGracePeriodSeconds": grace_s}
    if node:
        spec["nodeName"] = node
    if empty_dir:
        container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    status: Obj = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if pod_ip:
        status["podIP"] = pod_ip
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }
    return pod


def pdb_with_status(pdb: Obj, pods: Iterable[Obj]) -> Obj:
    namespace = pdb["metadata"]["namespace"]
    selector = from_label_selector_object(pdb["spec"]["selector"])
    matching = [
        p for p in pods if p["metadata"]["namespace"] == namespace and labels_match(selector, p)
    ]
    healthy = sum(1 for p in matching if is_ready(p))
    expected = len(matching)
    if "minAvailable" in pdb["spec"]:
        desired = int(pdb["spec"]["minAvailable"])
    else:
        desired = expected - int(pdb["spec"].get("maxUnavailable", 0))
    result = copy.deepcopy(pdb)
    result["status"] = {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": max(0, healthy - desired),
        "observedGeneration": 1,
    }
    return result
