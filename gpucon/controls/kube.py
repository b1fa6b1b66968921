"""Kubernetes write side: cordon/uncordon, evictions through the Eviction API, node labels.

Built only when the console is not read-only (``gpucon.session.live_controls``). Pods
are never deleted directly: ``evict`` posts a policy/v1 ``Eviction``, so PodDisruptionBudgets
are respected; a 429 (the budget would be violated, or the API server is throttling) is
retried with exponential backoff (honouring ``Retry-After``) until the timeout. Every error
names the node or pod and carries the API's own message.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from gpucon.config import KubeConfig
from gpucon.sources.kube_objects import (
    BACKEND_LABEL,
    GpuPod,
    api_client_from_config,
    describe_api_error,
    gpu_pod,
    list_json,
)

ProgressFn = Callable[[str], None]

# Kubernetes label syntax: optional DNS-subdomain prefix "/" name; values up to 63 characters
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


class KubeControlError(RuntimeError):
    """A Kubernetes write failed; the message names the node or pod and the API's answer."""


class EvictionTimeout(KubeControlError, TimeoutError):
    """The Eviction API kept refusing (429) until the timeout; the pod is still running."""


def check_label(key: str, value: str | None) -> None:
    """Refuse a label key or value Kubernetes would refuse, naming which one and why."""
    prefix, _, name = key.rpartition("/")
    if not name or not _LABEL_NAME.match(name):
        raise ValueError(
            f"label key {key!r}: the name part must be 1-63 characters of [A-Za-z0-9-_.], "
            "beginning and ending with a letter or digit"
        )
    if prefix and (len(prefix) > 253 or not _LABEL_PREFIX.match(prefix)):
        raise ValueError(f"label key {key!r}: the prefix must be a DNS subdomain")
    if value is not None and (len(value) > 63 or not _LABEL_VALUE.match(value)):
        raise ValueError(
            f"label value {value!r} for {key!r}: at most 63 characters of [A-Za-z0-9-_.], "
            "beginning and ending with a letter or digit"
        )


class KubeControl:
    """Writes to one cluster through the official client (imported on first use)."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        timeout_s: float = 10.0,
        *,
        backoff_s: float = 1.0,
        backoff_max_s: float = 16.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._sleep = sleep
        self._clock = clock
        self._api: Any = None
        self._lock = threading.Lock()

    def _core(self) -> Any:
        with self._lock:
            if self._api is None:
                from kubernetes import client

                self._api = client.CoreV1Api(api_client_from_config(self.kubeconfig, self.context))
            return self._api

    def _patch_node(self, node: str, body: dict[str, object], what: str) -> None:
        try:
            self._core().patch_node(node, body, _request_timeout=self.timeout_s)
        except Exception as exc:
            raise KubeControlError(f"{what} node {node}: {describe_api_error(exc)}") from exc

    def cordon(self, node: str) -> None:
        """Mark ``node`` unschedulable (``spec.unschedulable: true``)."""
        self._patch_node(node, {"spec": {"unschedulable": True}}, "cordon")

    def uncordon(self, node: str) -> None:
        # null removes the field, as ``kubectl uncordon`` leaves it
        self._patch_node(node, {"spec": {"unschedulable": None}}, "uncordon")

    def set_node_label(self, node: str, key: str, value: str | None) -> None:
        """Set (or with ``None`` remove) one label, e.g. ``nvidia.com/mig.config``."""
        check_label(key, value)
        self._patch_node(node, {"metadata": {"labels": {key: value}}}, f"label {key} on")

    def disruptions_allowed(self, namespace: str) -> dict[str, int]:
        """PodDisruptionBudget name -> evictions it allows now (what a drain plan can show)."""
        try:
            from kubernetes import client

            policy = client.PolicyV1Api(self._core().api_client)
            body = list_json(
                policy.list_namespaced_pod_disruption_budget, namespace, timeout_s=self.timeout_s
            )
            return {
                str(b["metadata"]["name"]): int(
                    (b.get("status") or {}).get("disruptionsAllowed", 0)
                )
                for b in body.get("items") or []
            }
        except Exception as exc:
            error = describe_api_error(exc)
            raise KubeControlError(f"list disruption budgets in {namespace}: {error}") from exc

    def gpu_pods_on(self, node: str) -> list[GpuPod]:
        """The pods on ``node`` that request GPU or MIG resources."""
        try:
            body = list_json(
                self._core().list_pod_for_all_namespaces,
                field_selector=f"spec.nodeName={node}",
                timeout_s=self.timeout_s,
            )
            return [p for obj in body.get("items") or [] if (p := gpu_pod(obj)) is not None]
        except Exception as exc:
            raise KubeControlError(f"list pods on node {node}: {describe_api_error(exc)}") from exc

    def node_unschedulable(self, node: str) -> bool | None:
        """Whether ``node`` is cordoned now (a fresh read); None when there is no such node."""
        body = self._read_node(node)
        return None if body is None else bool((body.get("spec") or {}).get("unschedulable"))

    def node_labels(self, node: str) -> dict[str, str] | None:
        """The node's labels now (a fresh read: mig-manager's state); None: no such node."""
        body = self._read_node(node)
        if body is None:
            return None
        labels = (body.get("metadata") or {}).get("labels") or {}
        return {str(k): str(v) for k, v in labels.items()}

    def _read_node(self, node: str) -> dict[str, Any] | None:
        from kubernetes import client

        try:
            resp = self._core().read_node(
                node, _preload_content=False, _request_timeout=self.timeout_s
            )
            body = json.loads(resp.data)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeControlError(f"read node {node}: {describe_api_error(exc)}") from exc
        except Exception as exc:
            raise KubeControlError(f"read node {node}: {describe_api_error(exc)}") from exc
        return body if isinstance(body, dict) else None

    def backend_pods(self, backend: str) -> dict[str, str | None]:
        """The running pods labelled for ``backend`` now: "namespace/name" -> their node."""
        try:
            body = list_json(
                self._core().list_pod_for_all_namespaces,
                label_selector=f"{BACKEND_LABEL}={backend}",
                timeout_s=self.timeout_s,
            )
        except Exception as exc:
            error = describe_api_error(exc)
            raise KubeControlError(f"list pods of backend {backend}: {error}") from exc
        pods: dict[str, str | None] = {}
        for obj in body.get("items") or []:
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp") or (obj.get("status") or {}).get("phase") in (
                "Succeeded",
                "Failed",
            ):
                continue  # going or gone: it serves nothing
            ref = f"{meta.get('namespace') or 'default'}/{meta.get('name') or '?'}"
            pods[ref] = (obj.get("spec") or {}).get("nodeName")
        return pods

    def evict(
        self,
        pod: str,
        namespace: str,
        timeout_s: float,
        on_progress: ProgressFn | None = None,
    ) -> None:
        """Evict ``namespace/pod``; 429 is retried with backoff until ``timeout_s``."""
        from kubernetes import client

        ref = f"{namespace}/{pod}"
        report = on_progress or (lambda _text: None)
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=pod, namespace=namespace),
        )
        deadline = self._clock() + timeout_s
        attempt = 0
        while True:
            attempt += 1
            left = deadline - self._clock()
            try:
                self._core().create_namespaced_pod_eviction(
                    pod, namespace, body, _request_timeout=max(0.5, min(self.timeout_s, left))
                )
            except client.ApiException as exc:
                if exc.status == 404:
                    report(f"pod {ref} is already gone")
                    return
                if exc.status != 429:
                    raise KubeControlError(f"evict pod {ref}: {describe_api_error(exc)}") from exc
                delay = self._retry_delay(attempt, exc)
                left = deadline - self._clock()
                if delay > left:
                    raise EvictionTimeout(
                        f"evict pod {ref}: still refused after {attempt} attempts in "
                        f"{timeout_s:g}s ({describe_api_error(exc)}); the pod was not evicted"
                    ) from exc
                report(
                    f"eviction of {ref} refused (attempt {attempt}): {describe_api_error(exc)}; "
                    f"retrying in {delay:.1f}s"
                )
                self._sleep(delay)
                continue
            except Exception as exc:
                raise KubeControlError(f"evict pod {ref}: {describe_api_error(exc)}") from exc
            report(f"pod {ref} evicted (attempt {attempt})")
            return

    def _retry_delay(self, attempt: int, exc: Exception) -> float:
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
        headers = getattr(exc, "headers", None) or {}
        try:
            retry_after = float(headers.get("Retry-After", 0))
        except (TypeError, ValueError):
            retry_after = 0.0
        return float(max(delay, min(retry_after, self.backoff_max_s)))

    def close(self) -> None:
        with self._lock:
            api, self._api = self._api, None
        if api is not None:
            api.api_client.close()


def build_kube_control(config: KubeConfig) -> KubeControl:
    """The factory ``gpucon.session.live_controls`` calls (never in read-only mode)."""
    return KubeControl(config.kubeconfig, config.context, timeout_s=config.timeout_s)
