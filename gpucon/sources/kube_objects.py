"""Kubernetes objects (raw JSON) as fleet fragments, and what the source and control share.

- nodes → ``NodeInfo`` (only nodes with GPUs): labels ``nvidia.com/mig.config`` and
  ``nvidia.com/mig.config.state``, allocatable ``nvidia.com/gpu`` and ``nvidia.com/mig-*``,
  cordon (``spec.unschedulable``); the source adds the GPU pods on the node.
- pods whose containers request or limit ``nvidia.com/gpu`` or ``nvidia.com/mig-*`` (and are
  not finished) → ``GpuPod``. gpucon's convention maps them into the fleet:
  - label ``gpucon.io/backend: NAME`` → a ``Backend`` fragment (pod, node) for backend NAME;
  - annotation ``gpucon.io/slot: SLOT_ID`` (``host/gpu0/gi3``, ``host/gpu1`` or ``vm:NAME``) →
    a ``Slot`` fragment (pod, node, MIG profile from the request) and the backend's ``slot_id``;
  - otherwise a backend whose url's host is a GPU pod's IP gets that pod when the hub merges
    (``NodeInfo.gpu_pod_ips``, ``gpucon.model.merge.attach_pods_by_ip``).
  Pods are named ``namespace/name`` everywhere (``Backend.pod``, ``Slot.pod``, ``gpu_pods``).

Raw JSON rather than the client's models: faster, and tolerant of fields the models reject.
Nothing here imports ``kubernetes`` at module level.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import msgspec

from gpucon.model.fleet import Backend, NodeInfo, Slot, SlotKind
from gpucon.model.ids import parse_slot_id
from gpucon.sources.base import describe_error

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
BACKEND_LABEL = "gpucon.io/backend"
SLOT_ANNOTATION = "gpucon.io/slot"
_ERRNO_TEXT = re.compile(r"\[Errno -?\d+\] ([^\"')]+)")


def api_client_from_config(kubeconfig: str | None, context: str | None) -> Any:
    """An official ``kubernetes`` ApiClient: from ``kubeconfig`` (or the default one), or the
    in-cluster service account when no kubeconfig is named and one is mounted."""
    from kubernetes import config

    if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        from kubernetes import client

        return client.ApiClient()
    return config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]


def describe_api_error(exc: BaseException) -> str:
    """An API error as ``HTTP 429 TooManyRequests: <the API's message> (<its causes>)``;
    others as usual."""
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    if isinstance(status, int) and status > 0:
        reason = getattr(exc, "reason", None) or ""
        message = ""
        if body:
            try:
                parsed = json.loads(body)
                reason = parsed.get("reason") or reason
                message = parsed.get("message") or ""
                # the eviction's 429 names the budget only in its causes
                causes = (parsed.get("details") or {}).get("causes") or []
                said = [c["message"] for c in causes if isinstance(c, dict) and c.get("message")]
                if said and message:
                    message = f"{message} ({'; '.join(str(m) for m in said)})"
            except (ValueError, AttributeError, TypeError):
                message = str(body)[:200]
        return f"HTTP {status} {reason}: {message}" if message else f"HTTP {status} {reason}"
    if type(exc).__module__.startswith("urllib3"):
        # "Max retries exceeded ... (Caused by NewConnectionError(... [Errno 111] Connection
        # refused))" says less, at length, than "cannot reach 127.0.0.1:6443: Connection refused"
        errno_text = _ERRNO_TEXT.search(str(exc))
        pool = getattr(exc, "pool", None)
        where = f"{pool.host}:{pool.port}" if pool is not None else "the API server"
        what = errno_text.group(1) if errno_text else type(getattr(exc, "reason", exc)).__name__
        return f"cannot reach {where}: {what}"
    return describe_error(exc)


def list_json(list_fn: Any, *args: Any, timeout_s: float, **kwargs: Any) -> dict[str, Any]:
    """Call a client ``list_*`` method and return the raw JSON body (the models are skipped);
    a non-2xx answer raises the client's ApiException carrying the API's Status."""
    resp = list_fn(*args, _preload_content=False, _request_timeout=timeout_s, **kwargs)
    try:
        status, data = int(resp.status), resp.data
    finally:
        resp.release_conn()
    if not 200 <= status < 300:
        from kubernetes.client import ApiException

        raise ApiException(status=status, reason="list failed", body=data)
    body = json.loads(data)
    if not isinstance(body, dict):
        raise ValueError(f"list answer is {type(body).__name__}, not an object")
    return body


def _gpu_requests(pod: dict[str, Any]) -> dict[str, str]:
    """GPU and MIG resources the pod's containers request (or limit), by resource name."""
    found: dict[str, str] = {}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = (container or {}).get("resources") or {}
        for kind in ("limits", "requests"):
            for name, qty in (resources.get(kind) or {}).items():
                if name == GPU_RESOURCE or str(name).startswith(MIG_RESOURCE_PREFIX):
                    found[str(name)] = str(qty)
    return found


class GpuPod(msgspec.Struct, frozen=True, gc=False):
    """What the source keeps of one pod that requests GPU or MIG resources."""

    namespace: str
    name: str
    node: str | None
    ip: str | None
    phase: str | None
    requests: tuple[tuple[str, str], ...]
    backend: str | None
    slot_id: str | None
    # (Backend, Slot) fragments, built by gpu_pod() so that a read only collects them
    fragments: tuple[Backend | None, Slot | None] = (None, None)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def mig_profile(self) -> str | None:
        for name, _ in self.requests:
            if name.startswith(MIG_RESOURCE_PREFIX):
                return name[len(MIG_RESOURCE_PREFIX) :]
        return None


def gpu_pod(obj: dict[str, Any]) -> GpuPod | None:
    """The GpuPod of a raw pod object, or None when it requests no GPU or MIG resource."""
    requests = _gpu_requests(obj)
    status = obj.get("status") or {}
    if not requests or status.get("phase") in ("Succeeded", "Failed"):
        return None  # a finished pod holds no GPU
    meta = obj.get("metadata") or {}
    slot_id = (meta.get("annotations") or {}).get(SLOT_ANNOTATION)
    if slot_id is not None:
        try:
            parse_slot_id(str(slot_id))
        except ValueError:
            slot_id = None  # a malformed annotation maps the pod to no slot
    backend = (meta.get("labels") or {}).get(BACKEND_LABEL)
    pod = GpuPod(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or "?"),
        node=(obj.get("spec") or {}).get("nodeName"),
        ip=status.get("podIP"),
        phase=status.get("phase"),
        requests=tuple(sorted(requests.items())),
        backend=str(backend) if backend else None,
        slot_id=str(slot_id) if slot_id else None,
    )
    return msgspec.structs.replace(pod, fragments=_fragments(pod))


def node_info(obj: dict[str, Any]) -> NodeInfo | None:
    """The NodeInfo of a raw node object, or None for a node without GPUs."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    has_gpus = MIG_CONFIG_LABEL in labels or any(
        k == GPU_RESOURCE or str(k).startswith(MIG_RESOURCE_PREFIX) for k in allocatable
    )
    if not has_gpus:
        return None
    return NodeInfo(
        name=str(meta.get("name") or "?"),
        mig_config=labels.get(MIG_CONFIG_LABEL),
        mig_config_state=labels.get(MIG_CONFIG_STATE_LABEL),
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        allocatable=tuple(
            (str(k), str(v))
            for k, v in sorted(allocatable.items())
            if k == GPU_RESOURCE or str(k).startswith(MIG_RESOURCE_PREFIX)
        ),
    )


def _fragments(pod: GpuPod) -> tuple[Backend | None, Slot | None]:
    """The Backend and Slot fragments of a pod that follows the gpucon label/annotation rule."""
    backend = (
        Backend(pod.backend, slot_id=pod.slot_id, pod=pod.ref, node=pod.node)
        if pod.backend
        else None
    )
    slot = None
    if pod.slot_id:
        parsed = parse_slot_id(pod.slot_id)
        slot = Slot(
            id=pod.slot_id,
            kind=SlotKind(parsed.kind),
            host=parsed.host,
            gpu_index=parsed.gpu_index,
            gi_id=parsed.gi_id,
            profile=pod.mig_profile,
            pod=pod.ref,
            node=pod.node,
        )
    return backend, slot


def pod_fragments(pods: list[GpuPod]) -> tuple[tuple[Backend, ...], tuple[Slot, ...]]:
    """Backend and Slot fragments of ``pods`` (built once per pod, when its event arrives)."""
    backends = tuple(p.fragments[0] for p in pods if p.fragments[0] is not None)
    slots = tuple(p.fragments[1] for p in pods if p.fragments[1] is not None)
    return backends, slots
