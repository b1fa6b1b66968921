"""MPS on Kubernetes: the GPU operator runs the control daemon as a pod per node (a DaemonSet).

Restarting it is deleting the node's pod (``stop``: DELETE, then wait until it is gone) and
following the one the DaemonSet creates in its place to Running and Ready (``start``). The
limits are the operator's sharing config, not control commands gpucon sends, so this daemon
``speaks`` none: the restart skips those steps with a note. Servers are pods too: they have
no commands to run here (their Deployment restarts them; readiness is theirs).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucon.config.mps import MpsDaemonConfig
from gpucon.controls.mps import MpsError
from gpucon.controls.mps_transport import Ran
from gpucon.model.fleet import MpsState
from gpucon.sources.kube_objects import api_client_from_config, describe_api_error

POLL_S = 0.1


def _ready(pod: Any) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


@dataclass
class KubeMpsDaemon:
    """The MPS control-daemon pod on ``node``, found by ``selector`` in ``namespace``."""

    node: str
    namespace: str
    selector: str
    kubeconfig: str | None = None
    context: str | None = None
    timeout_s: float = 5.0
    _api: Any = field(default=None, init=False, repr=False)
    _deleted: set[str] = field(default_factory=set, init=False, repr=False)

    @classmethod
    def from_config(cls, config: MpsDaemonConfig, kube: Any = None) -> KubeMpsDaemon:
        assert config.node is not None  # the config check requires it
        return cls(
            node=config.node,
            namespace=config.namespace,
            selector=config.pod_selector,
            kubeconfig=getattr(kube, "kubeconfig", None),
            context=getattr(kube, "context", None),
            timeout_s=config.timeout_s,
        )

    @property
    def where(self) -> str:
        return f"pod {self.selector} on {self.node}"

    def _core(self) -> Any:
        if self._api is None:
            from kubernetes import client

            self._api = client.CoreV1Api(api_client_from_config(self.kubeconfig, self.context))
        return self._api

    def pods(self) -> list[dict[str, Any]]:
        """The node's daemon pods, as the API returns them (plain dicts)."""
        try:
            answer = self._core().list_namespaced_pod(
                self.namespace,
                label_selector=self.selector,
                field_selector=f"spec.nodeName={self.node}",
                _request_timeout=self.timeout_s,
                _preload_content=False,
            )
            import json

            items: list[dict[str, Any]] = json.loads(answer.data).get("items") or []
            return items
        except Exception as exc:
            raise MpsError(f"list {self.where}: {describe_api_error(exc)}") from exc

    def running(self) -> bool:
        return any(_ready(p) for p in self.pods())

    def stop(self, wait_s: float) -> None:
        for pod in self.pods():
            name = pod["metadata"]["name"]
            self._deleted.add(pod["metadata"].get("uid") or name)
            try:
                self._core().delete_namespaced_pod(
                    name, self.namespace, _request_timeout=self.timeout_s
                )
            except Exception as exc:
                if getattr(exc, "status", None) == 404:
                    continue  # gone already
                raise MpsError(f"delete pod {name}: {describe_api_error(exc)}") from exc
        deadline = time.monotonic() + wait_s
        while any(
            (p["metadata"].get("uid") or p["metadata"]["name"]) in self._deleted
            for p in self.pods()
        ):
            if time.monotonic() >= deadline:
                raise MpsError(
                    f"the deleted MPS pod on {self.node} is still there after {wait_s:g}s"
                )
            time.sleep(POLL_S)

    def start(self, wait_s: float) -> None:
        """Follow the DaemonSet's new pod to Ready (it creates it; gpucon does not)."""
        deadline = time.monotonic() + wait_s
        while True:
            pods = [
                p
                for p in self.pods()
                if (p["metadata"].get("uid") or p["metadata"]["name"]) not in self._deleted
            ]
            if any(_ready(p) for p in pods):
                return
            if time.monotonic() >= deadline:
                seen = ", ".join(p["metadata"]["name"] for p in pods) or "no new pod"
                raise MpsError(f"no MPS pod became ready on {self.node} in {wait_s:g}s ({seen})")
            time.sleep(POLL_S)

    def speaks(self, query: str) -> bool:
        return False  # the operator's sharing config sets the limits

    def set_default_thread_pct(self, pct: float) -> None:
        raise MpsError("the GPU operator's MPS pod takes its limits from its config")

    def default_thread_pct(self) -> float | None:
        return None

    def set_default_pinned_mem_limit(self, device: str, limit: str) -> None:
        raise MpsError("the GPU operator's MPS pod takes its limits from its config")

    def default_pinned_mem_limit(self, device: str) -> str | None:
        return None

    def server_pids(self) -> tuple[int, ...]:
        return ()

    def client_env(self) -> dict[str, str]:
        return {}

    def run(self, argv: tuple[str, ...], env: Mapping[str, str], timeout_s: float) -> Ran:
        raise MpsError("servers on Kubernetes are pods: gpucon runs no commands for them")

    def state(self) -> MpsState:
        return MpsState(daemon_running=self.running())

    def close(self) -> None:
        if self._api is not None:
            self._api.api_client.close()
            self._api = None
