"""A STAND-IN Kubernetes API server: the real HTTPS API that the official client and kubectl
speak, on loopback.

No Kubernetes API server can run here, so tests talk to this one through the official
``kubernetes`` client, or ``kubectl``, configured from a real kubeconfig (``write_kubeconfig``:
``https://`` server, ``certificate-authority-data`` of a throwaway CA, a bearer token). The HTTP
side is in ``kube_standin_http``, discovery and TLS in ``kube_discovery``, selectors in
``kube_selectors``, object shapes in ``kube_standin_objects``. It serves:

- discovery: ``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/policy/v1``,
  ``/apis/apps/v1`` (``pods/eviction`` names group ``policy``, version ``v1``).
- ``GET /api/v1/nodes``, ``/api/v1/pods``, ``/api/v1/namespaces/{ns}/pods`` (+ single objects),
  ``/apis/policy/v1[/namespaces/{ns}]/poddisruptionbudgets[/{name}]`` (status computed live),
  ``/apis/apps/v1/namespaces/{ns}/daemonsets/{name}``. Lists honour ``labelSelector`` (full
  set-based grammar), ``fieldSelector`` (``metadata.name``, ``metadata.namespace``,
  ``spec.nodeName``, ``status.phase``; ``=``/``!=``) and ``limit``/``continue`` paging (a
  ``continue`` token older than ``expire_resource_versions()`` gets 410 ``Expired``).
- ``?watch=true``: chunked JSON lines of ``ADDED|MODIFIED|DELETED`` events from the given
  resourceVersion until ``timeoutSeconds``; ``BOOKMARK`` events (the current resourceVersion)
  when ``allowWatchBookmarks=true``, every ``bookmark_interval_s`` and on ``send_bookmarks()``;
  a resourceVersion older than ``expire_resource_versions()`` gets an ``ERROR`` event carrying a
  410 ``Expired`` Status.
- ``PATCH /api/v1/nodes/{name}``: strategic-merge / merge patches (``null`` deletes a key).
- ``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` (policy/v1 Eviction): 429
  ``TooManyRequests`` with the real Status (the budget named in ``details.causes``) while a
  PodDisruptionBudget would be violated (health counted by the pods' ``Ready`` condition; a pod
  being deleted is not healthy; a pod not Running spends no budget), or for the first
  ``evictions_refused_first`` calls. A pod already Terminating is accepted again. Otherwise
  the pod is deleted gracefully: it turns Terminating (``deletionTimestamp``, a MODIFIED event)
  and is DELETED after its ``terminationGracePeriodSeconds`` (``add_pod(grace_s=...)``; 0
  deletes it at once).
- ``DELETE /api/v1/namespaces/{ns}/pods/{name}`` (graceful too; ``gracePeriodSeconds`` honoured).

Every request is recorded (``requests``: method, path, query, body), with its answer's status
code (``answers``), the bookmarks sent (``bookmarks_sent``) and the watch events still in the
history (``event_log()``), so tests can assert what was sent and in what order.

Where it still differs from a real API server:

- Only nodes, pods, PodDisruptionBudgets (read-only) and DaemonSets (read-only) exist; no
  namespaces, ReplicaSets or other kinds, and nothing recreates an evicted pod.
- No Table form (``as=Table``): kubectl prints its plain-list fallback columns (NAME, AGE, no
  STATUS); no protobuf, no aggregated discovery (kubectl falls back to the legacy documents), no
  OpenAPI documents, no ``kubectl explain``/``apply``/``edit``.
- Nodes are only patched (no PUT, no status subresource writes); pods are only read, evicted and
  deleted (no create, no PATCH); ``kubectl delete --grace-period`` is read, ``--force`` not.
- One bearer token, a throwaway CA for ``127.0.0.1``/``localhost`` (no client certificates,
  no exec/OIDC auth), no RBAC (``forbid_watches`` only imitates a watch forbidden by RBAC), no
  admission, no server-side apply, no ``dryRun``, no ``resourceVersion`` preconditions on writes.
- Pages after the first are read from the current state, not from a consistent snapshot at the
  first page's resourceVersion; ``resourceVersionMatch`` is ignored.
- A PodDisruptionBudget's expected pod count is the number of pods its selector matches (the
  real disruption controller asks the pods' controller for its scale); percentages are not read;
  ``unhealthyPodEvictionPolicy`` is not read.
- Graceful deletion has no kubelet: the pod's phase and containers do not change while it is
  Terminating, and nothing but the grace period ends it (no finalizers).
- Bookmarks carry the server's current resourceVersion; ``sendInitialEvents`` is not served;
  watches of PodDisruptionBudgets are not served (lists are), nor events or pod logs.
- Field selectors know only the fields named above; a real server knows a few more per kind.
- Grace periods are whole seconds (as the API's type is); the stand-in's default is 0, where a
  real pod's is 30.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import socket
import ssl
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.helpers.kube_discovery import ca_pem, server_context
from tests.helpers.kube_selectors import from_label_selector_object, labels_match
from tests.helpers.kube_standin_objects import (
    TOKEN,
    Event,
    Obj,
    RecordedRequest,
    merge_patch,
    pdb_with_status,
    pod_object,
    status_body,
    timestamp,
)

__all__ = ["TOKEN", "KubeStandIn", "RecordedRequest", "status_body"]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-handshake or mid-watch is normal here


class KubeStandIn:
    """The stand-in API server; use as a context manager or call start()/stop()."""

    def __init__(self, port: int = 0) -> None:
        self._cond = threading.Condition()
        self._rv = 1000
        self._expired_up_to = 0
        self._events: list[Event] = []
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.pdbs: dict[tuple[str, str], Obj] = {}
        self.daemonsets: dict[tuple[str, str], Obj] = {}
        self.requests: list[RecordedRequest] = []
        self.answers: list[tuple[str, str, int]] = []  # (method, path, status code) in order
        self.bookmarks_sent: list[tuple[str, int]] = []  # (collection, resourceVersion)
        self.evictions_refused_first = 0
        self.forbid_watches = False  # answer 403 to watches (RBAC granting list but not watch)
        self.bookmark_interval_s = 60.0  # a real server sends one about every minute
        self._bookmark_generation = 0
        self._watch_generation = 0
        # watch streams that have begun sending events (``drop_watches`` ends those only: a
        # watch whose request came but whose stream has not begun yet is not ended by it)
        self._streams_begun = 0
        self._timers: list[threading.Timer] = []
        self._stopping = False
        self._connections: set[socket.socket] = set()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> KubeStandIn:
        from tests.helpers.kube_standin_http import Handler

        handler = type("Handler", (Handler,), {"standin": self})
        server = _Server(("127.0.0.1", self._port), handler)
        # the handshake happens in the handler's thread, so a silent client blocks nobody
        server.socket = server_context().wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
        self._server = server
        self._port = server.server_address[1]
        self._stopping = False
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering: close the listener, open watch streams and keep-alive connections."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            for timer in self._timers:
                timer.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._cond:
            for conn in list(self._connections):
                with contextlib.suppress(OSError, ValueError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._connections.clear()

    def __enter__(self) -> KubeStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._port}"

    @property
    def ca_pem(self) -> bytes:
        """The CA that signed the serving certificate (PEM)."""
        return ca_pem()

    def client_context(self) -> ssl.SSLContext:
        """An SSL context that trusts this server (for tests that speak HTTPS to it directly)."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A real kubeconfig (context ``stand-in``): the CA inline, as a cluster's own is."""
        ca_data = base64.b64encode(self.ca_pem).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "stand-in",
                    "cluster": {"server": self.url, "certificate-authority-data": ca_data},
                }
            ],
            "users": [{"name": "stand-in-operator", "user": {"token": TOKEN}}],
            "contexts": [
                {
                    "name": "stand-in",
                    "context": {
                        "cluster": "stand-in",
                        "user": "stand-in-operator",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "stand-in",
        }
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML
        return path

    # -- the cluster's state (tests change it through these) -------------------------------

    def _emit(self, collection: str, type_: str, obj: Obj) -> None:
        # callers hold self._cond
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._events.append(Event(self._rv, collection, type_, copy.deepcopy(obj)))
        self._cond.notify_all()

    def add_node(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        allocatable: dict[str, str] | None = None,
        unschedulable: bool = False,
    ) -> Obj:
        node: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": f"uid-node-{name}",
                "labels": dict(labels or {}),
                "creationTimestamp": timestamp(),
            },
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {
                "allocatable": dict(allocatable or {}),
                "capacity": dict(allocatable or {}),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        }
        with self._cond:
            self.nodes[name] = node
            self._emit("nodes", "ADDED", node)
        return node

    def update_node(self, name: str, patch: Obj) -> Obj:
        with self._cond:
            node = merge_patch(self.nodes[name], patch)
            self.nodes[name] = node
            self._emit("nodes", "MODIFIED", node)
            return dict(node)

    def add_pod(
        self,
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
        """A pod; ``ready`` defaults to ``phase == "Running"``; ``owner`` is its controller
        (kind, name; an empty name is derived from the pod's), None for a bare pod."""
        pod = pod_object(
            namespace,
            name,
            node,
            requests,
            labels,
            annotations,
            pod_ip,
            phase,
            ready=ready,
            grace_s=grace_s,
            owner=owner,
            empty_dir=empty_dir,
        )
        with self._cond:
            self.pods[(namespace, name)] = pod
            self._emit("pods", "ADDED", pod)
        return pod

    def set_pod_ready(self, namespace: str, name: str, ready: bool) -> Obj:
        status = "True" if ready else "False"
        return self.update_pod(
            namespace, name, {"status": {"conditions": [{"type": "Ready", "status": status}]}}
        )

    def update_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        with self._cond:
            pod = merge_patch(self.pods[(namespace, name)], patch)
            self.pods[(namespace, name)] = pod
            self._emit("pods", "MODIFIED", pod)
            return dict(pod)

    def delete_pod(self, namespace: str, name: str, grace_s: int | None = None) -> Obj:
        """Delete gracefully: Terminating for the grace period (the pod's own unless given),
        then DELETED. Returns the pod as the DELETE answer shows it."""
        with self._cond:
            pod = self.pods[(namespace, name)]
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(pod)  # already terminating: a second delete changes nothing
            grace = int(pod["spec"].get("terminationGracePeriodSeconds") or 0)
            grace = grace if grace_s is None else grace_s
            if grace <= 0:
                del self.pods[(namespace, name)]
                self._emit("pods", "DELETED", pod)
                return copy.deepcopy(pod)
            meta["deletionTimestamp"] = timestamp(time.time() + grace)
            meta["deletionGracePeriodSeconds"] = grace
            self._emit("pods", "MODIFIED", pod)
            timer = threading.Timer(grace, self._finish_deletion, (namespace, name, meta["uid"]))
            timer.daemon = True
            self._timers.append(timer)
            timer.start()
            return copy.deepcopy(pod)

    def _finish_deletion(self, namespace: str, name: str, uid: str) -> None:
        with self._cond:
            pod = self.pods.get((namespace, name))
            if self._stopping or pod is None or pod["metadata"].get("uid") != uid:
                return
            del self.pods[(namespace, name)]
            self._emit("pods", "DELETED", pod)

    def add_pdb(
        self,
        namespace: str,
        name: str,
        match_labels: dict[str, str],
        min_available: int | None = None,
        max_unavailable: int | None = None,
    ) -> None:
        spec: Obj = {"selector": {"matchLabels": dict(match_labels)}}
        if min_available is not None:
            spec["minAvailable"] = min_available
        if max_unavailable is not None:
            spec["maxUnavailable"] = max_unavailable
        with self._cond:
            self._rv += 1
            self.pdbs[(namespace, name)] = {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": f"uid-pdb-{namespace}-{name}",
                    "resourceVersion": str(self._rv),
                    "creationTimestamp": timestamp(),
                },
                "spec": spec,
            }

    def update_pdb(self, namespace: str, name: str, spec_patch: Obj) -> None:
        """Change a budget (``{"minAvailable": 1}``); evictions read it at once."""
        with self._cond:
            pdb = self.pdbs[(namespace, name)]
            pdb["spec"] = merge_patch(pdb["spec"], spec_patch)
            self._rv += 1
            pdb["metadata"]["resourceVersion"] = str(self._rv)

    def add_daemonset(self, namespace: str, name: str) -> None:
        with self._cond:
            self.daemonsets[(namespace, name)] = {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": name, "namespace": namespace, "uid": f"uid-ds-{name}"},
                "spec": {"selector": {"matchLabels": {"app": name}}},
            }

    def expire_resource_versions(self, up_to: int | None = None) -> None:
        """Forget the event history up to ``up_to`` (default: all of it, as etcd compaction
        does) and end every open watch."""
        with self._cond:
            self._expired_up_to = self._rv if up_to is None else up_to
            self._rv += 1
            self._events = [e for e in self._events if e.rv > self._expired_up_to]
            self._watch_generation += 1
            self._cond.notify_all()

    @property
    def resource_version(self) -> int:
        with self._cond:
            return self._rv

    @property
    def watch_streams_begun(self) -> int:
        with self._cond:
            return self._streams_begun

    def drop_watches(self) -> None:
        """End every open watch stream (as an API server restart or load balancer does)."""
        with self._cond:
            self._watch_generation += 1
            self._cond.notify_all()

    def send_bookmarks(self) -> None:
        """Every open watch that asked for bookmarks gets one now."""
        with self._cond:
            self._bookmark_generation += 1
            self._cond.notify_all()

    def event_log(self, collection: str) -> list[tuple[str, Obj]]:
        """(type, object) of every watch event still in the history, oldest first."""
        with self._cond:
            return [
                (e.type, copy.deepcopy(e.obj)) for e in self._events if e.collection == collection
            ]

    def recorded(self, method: str | None = None, path: str | None = None) -> list[RecordedRequest]:
        with self._cond:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or r.path == path)
            ]

    # -- PodDisruptionBudgets --------------------------------------------------------------

    def pdb_with_status(self, pdb: Obj) -> Obj:
        return pdb_with_status(pdb, self.pods.values())

    def _matching_pdbs(self, pod: Obj) -> list[Obj]:
        namespace = pod["metadata"]["namespace"]
        return [
            pdb
            for (ns, _), pdb in sorted(self.pdbs.items())
            if ns == namespace
            and labels_match(from_label_selector_object(pdb["spec"]["selector"]), pod)
        ]

    def _blocking_pdb(self, pod: Obj) -> Obj | None:
        for pdb in self._matching_pdbs(pod):
            if self.pdb_with_status(pdb)["status"]["disruptionsAllowed"] < 1:
                return pdb
        return None

    def evict(self, namespace: str, name: str) -> tuple[int, Obj]:
        with self._cond:
            pod = self.pods.get((namespace, name))
            if pod is None:
                return 404, status_body(404, "NotFound", f'pods "{name}" not found')
            if pod["metadata"].get("deletionTimestamp"):
                return 201, status_body(201, "", "")  # already going: no budget is spent again
            # as the real server: a pod that is not running (Pending, finished) spends no budget
            running = pod["status"].get("phase") == "Running"
            blocking = self._blocking_pdb(pod) if running else None
            if blocking is None and self.evictions_refused_first > 0:
                self.evictions_refused_first -= 1
                matching = self._matching_pdbs(pod)
                blocking = matching[0] if matching else {"metadata": {"name": "stand-in-budget"}}
            if blocking is not None:
                # the real server's words: the budget is named only in the cause
                status = self.pdb_with_status(blocking)["status"] if "spec" in blocking else {}
                cause = (
                    f"The disruption budget {blocking['metadata']['name']} needs "
                    f"{status.get('desiredHealthy', 1)} healthy pods and has "
                    f"{status.get('currentHealthy', 0)} currently"
                )
                message = "Cannot evict pod as it would violate the pod's disruption budget."
                causes = [{"reason": "DisruptionBudget", "message": cause}]
                return 429, status_body(429, "TooManyRequests", message, causes=causes)
            self.delete_pod(namespace, name)
            return 201, status_body(201, "", "")
