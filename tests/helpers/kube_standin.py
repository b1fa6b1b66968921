"""A STAND-IN Kubernetes API server: the real HTTP API that the official client speaks, on loopback.

No Kubernetes API server can run here, so tests talk to this one through the official
``kubernetes`` client, configured from a real kubeconfig file (``write_kubeconfig``). It serves:

- ``GET /api/v1/nodes``, ``/api/v1/pods``, ``/api/v1/namespaces/{ns}/pods`` (+ single objects):
  lists carry ``metadata.resourceVersion``; ``?watch=true`` streams chunked JSON lines of
  ``{"type": "ADDED|MODIFIED|DELETED", "object": ...}`` from the given resourceVersion until
  ``timeoutSeconds``; a resourceVersion older than ``expire_resource_versions()`` gets the real
  server's answer, an ``ERROR`` event carrying a 410 ``Expired`` Status.
  ``fieldSelector=spec.nodeName=X`` and equality ``labelSelector``s are honoured.
- ``PATCH /api/v1/nodes/{name}``: strategic-merge / merge patches (``null`` deletes a key).
- ``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` (policy/v1 Eviction): refused with 429
  ``TooManyRequests`` and a Status body while a PodDisruptionBudget would be violated, or for
  the first ``evictions_refused_first`` calls; otherwise the pod is deleted (at once: the
  stand-in has no kubelet, so no graceful termination).
- ``DELETE /api/v1/namespaces/{ns}/pods/{name}`` and
  ``GET /apis/policy/v1[/namespaces/{ns}]/poddisruptionbudgets`` (status computed live).

Every request is recorded (method, path, query, body) so tests can assert what was sent.
"""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

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
class _Event:
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


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _parse_equality_selector(text: str) -> dict[str, str]:
    pairs = [p.split("=", 1) for p in text.split(",") if p.strip()]
    return {k.strip().rstrip("="): v.strip().lstrip("=") for k, v in pairs}


class KubeStandIn:
    """The stand-in API server; use as a context manager or call start()/stop()."""

    def __init__(self, port: int = 0) -> None:
        self._cond = threading.Condition()
        self._rv = 1000
        self._expired_up_to = 0
        self._events: list[_Event] = []
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.pdbs: dict[tuple[str, str], Obj] = {}
        self.requests: list[RecordedRequest] = []
        self.evictions_refused_first = 0
        self.forbid_watches = False  # answer 403 to watches (RBAC granting list but not watch)
        self._watch_generation = 0
        self._stopping = False
        self._connections: set[socket.socket] = set()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> KubeStandIn:
        handler = type("Handler", (_Handler,), {"standin": self})
        server = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        server.daemon_threads = True
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
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._cond:
            for conn in list(self._connections):
                with contextlib.suppress(OSError):
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
        return f"http://127.0.0.1:{self._port}"

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A real kubeconfig (context ``stand-in``) pointing the official client here."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stand-in", "cluster": {"server": self.url}}],
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
        self._events.append(_Event(self._rv, collection, type_, copy.deepcopy(obj)))
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
            "metadata": {"name": name, "uid": f"uid-node-{name}", "labels": dict(labels or {})},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"allocatable": dict(allocatable or {}), "capacity": dict(allocatable or {})},
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
    ) -> Obj:
        container: Obj = {"name": "server", "image": "nvcr.io/nvidia/tritonserver:24.08-py3"}
        if requests:
            container["resources"] = {"requests": dict(requests), "limits": dict(requests)}
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-pod-{namespace}-{name}",
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            },
            "spec": {"containers": [container], **({"nodeName": node} if node else {})},
            "status": {"phase": phase, **({"podIP": pod_ip} if pod_ip else {})},
        }
        with self._cond:
            self.pods[(namespace, name)] = pod
            self._emit("pods", "ADDED", pod)
        return pod

    def update_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        with self._cond:
            pod = merge_patch(self.pods[(namespace, name)], patch)
            self.pods[(namespace, name)] = pod
            self._emit("pods", "MODIFIED", pod)
            return dict(pod)

    def delete_pod(self, namespace: str, name: str) -> Obj:
        with self._cond:
            pod = self.pods.pop((namespace, name))
            self._emit("pods", "DELETED", pod)
            return pod

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
            self.pdbs[(namespace, name)] = {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": namespace},
                "spec": spec,
            }

    def expire_resource_versions(self) -> None:
        """Forget the event history (as etcd compaction does) and end every open watch."""
        with self._cond:
            self._expired_up_to = self._rv
            self._rv += 1
            self._events.clear()
            self._watch_generation += 1
            self._cond.notify_all()

    def drop_watches(self) -> None:
        """End every open watch stream (as an API server restart or load balancer does)."""
        with self._cond:
            self._watch_generation += 1
            self._cond.notify_all()

    def recorded(self, method: str | None = None, path: str | None = None) -> list[RecordedRequest]:
        with self._cond:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or r.path == path)
            ]

    # -- PodDisruptionBudgets --------------------------------------------------------------

    def _pdb_with_status(self, pdb: Obj) -> Obj:
        namespace = pdb["metadata"]["namespace"]
        selector = pdb["spec"]["selector"].get("matchLabels", {})
        matching = [
            p
            for (ns, _), p in self.pods.items()
            if ns == namespace and _labels_match(selector, p["metadata"].get("labels", {}))
        ]
        healthy = sum(1 for p in matching if p["status"].get("phase") == "Running")
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
        }
        return result

    def _matching_pdbs(self, pod: Obj) -> list[Obj]:
        namespace = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels", {})
        return [
            pdb
            for (ns, _), pdb in sorted(self.pdbs.items())
            if ns == namespace
            and _labels_match(pdb["spec"]["selector"].get("matchLabels", {}), labels)
        ]

    def _matching_pdb(self, pod: Obj) -> Obj | None:
        return next(iter(self._matching_pdbs(pod)), None)

    def _blocking_pdb(self, pod: Obj) -> Obj | None:
        for pdb in self._matching_pdbs(pod):
            if self._pdb_with_status(pdb)["status"]["disruptionsAllowed"] < 1:
                return pdb
        return None

    def evict(self, namespace: str, name: str) -> tuple[int, Obj]:
        with self._cond:
            pod = self.pods.get((namespace, name))
            if pod is None:
                return 404, status_body(404, "NotFound", f'pods "{name}" not found')
            blocking = self._blocking_pdb(pod)
            if blocking is None and self.evictions_refused_first > 0:
                self.evictions_refused_first -= 1
                blocking = self._matching_pdb(pod) or {"metadata": {"name": "stand-in-budget"}}
            if blocking is not None:
                pdb_name = blocking["metadata"]["name"]
                message = (
                    "Cannot evict pod as it would violate the pod's disruption budget. "
                    f"The disruption budget {pdb_name} needs more healthy pods."
                )
                causes = [{"reason": "DisruptionBudget", "message": message}]
                return 429, status_body(429, "TooManyRequests", message, causes=causes)
            self.pods.pop((namespace, name))
            self._emit("pods", "DELETED", pod)
            return 201, status_body(201, "", "")

    # -- serving helpers used by the handler -----------------------------------------------

    def list_body(self, collection: str, items: list[Obj]) -> Obj:
        kind = {"nodes": "NodeList", "pods": "PodList"}.get(collection, "List")
        return {
            "kind": kind,
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": [copy.deepcopy(i) for i in items],
        }


def _pod_matches(pod: Obj, namespace: str | None, query: dict[str, str]) -> bool:
    if namespace is not None and pod["metadata"].get("namespace") != namespace:
        return False
    fields = _parse_equality_selector(query.get("fieldSelector", ""))
    if "spec.nodeName" in fields and pod["spec"].get("nodeName") != fields["spec.nodeName"]:
        return False
    labels = _parse_equality_selector(query.get("labelSelector", ""))
    return _labels_match(labels, pod["metadata"].get("labels", {}))


class _Handler(BaseHTTPRequestHandler):
    standin: KubeStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.standin._cond:
            self.standin._connections.add(self.connection)

    def finish(self) -> None:
        with self.standin._cond:
            self.standin._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    # -- plumbing --------------------------------------------------------------------------

    def _record(self) -> tuple[str, dict[str, str], Any]:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        request = RecordedRequest(
            self.command, split.path, query, body, self.headers.get("Content-Type")
        )
        with self.standin._cond:
            self.standin.requests.append(request)
        return split.path, query, body

    def _send(self, code: int, body: Obj) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
        return False

    def do_GET(self) -> None:
        path, query, _ = self._record()
        if not self._authorized():
            return
        parts = path.strip("/").split("/")
        st = self.standin
        with st._cond:
            if parts == ["api", "v1", "nodes"]:
                return self._list_or_watch("nodes", None, query)
            if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
                node = st.nodes.get(parts[3])
                return self._object_or_404(node, "nodes", parts[3])
            if parts == ["api", "v1", "pods"]:
                return self._list_or_watch("pods", None, query)
            if parts[:3] == ["api", "v1", "namespaces"] and parts[4:5] == ["pods"]:
                if len(parts) == 5:
                    return self._list_or_watch("pods", parts[3], query)
                if len(parts) == 6:
                    pod = st.pods.get((parts[3], parts[5]))
                    return self._object_or_404(pod, "pods", parts[5])
            if parts[:3] == ["apis", "policy", "v1"] and parts[-1] == "poddisruptionbudgets":
                namespace = parts[4] if len(parts) == 6 else None
                items = [
                    st._pdb_with_status(p)
                    for (ns, _), p in sorted(st.pdbs.items())
                    if namespace is None or ns == namespace
                ]
                body = {
                    "kind": "PodDisruptionBudgetList",
                    "apiVersion": "policy/v1",
                    "metadata": {"resourceVersion": str(st._rv)},
                    "items": items,
                }
                return self._send(200, body)
        self._send(404, status_body(404, "NotFound", f"the server could not find {path}"))

    def _object_or_404(self, obj: Obj | None, collection: str, name: str) -> None:
        if obj is None:
            self._send(404, status_body(404, "NotFound", f'{collection} "{name}" not found'))
        else:
            self._send(200, copy.deepcopy(obj))

    def _list_or_watch(self, collection: str, namespace: str | None, query: dict[str, str]) -> None:
        st = self.standin  # the caller holds st._cond
        if collection == "nodes":
            items = [n for _, n in sorted(st.nodes.items())]
        else:
            items = [p for _, p in sorted(st.pods.items()) if _pod_matches(p, namespace, query)]
        if query.get("watch", "").lower() not in ("true", "1"):
            return self._send(200, st.list_body(collection, items))
        if st.forbid_watches:
            message = (
                f'{collection} is forbidden: User "operator" cannot watch resource "{collection}"'
            )
            return self._send(403, status_body(403, "Forbidden", message))
        since_text = query.get("resourceVersion", "")
        since = int(since_text) if since_text.isdigit() else 0
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if since and since <= st._expired_up_to:
            message = f"too old resource version: {since} ({st._expired_up_to + 1})"
            error = status_body(410, "Expired", message)
            self._chunk({"type": "ERROR", "object": error})
            return self._end_chunks()
        if not since:  # no resourceVersion: the current state first, as synthetic ADDED events
            for item in items:
                self._chunk({"type": "ADDED", "object": item})
            since = st._rv
        timeout_s = float(query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout_s
        generation = st._watch_generation
        while not st._stopping and generation == st._watch_generation:
            for event in st._events:
                if event.rv <= since or event.collection != collection:
                    continue
                since = event.rv
                if collection == "pods" and not _pod_matches(event.obj, namespace, query):
                    continue
                if not self._chunk({"type": event.type, "object": event.obj}):
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                break
            st._cond.wait(min(left, 0.5))
        if not st._stopping:
            self._end_chunks()

    def _chunk(self, event: Obj) -> bool:
        data = json.dumps(event).encode() + b"\n"
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            return True
        except OSError:
            return False

    def _end_chunks(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def do_PATCH(self) -> None:
        path, _, body = self._record()
        if not self._authorized():
            return
        parts = path.strip("/").split("/")
        content_type = (self.headers.get("Content-Type") or "").split(";")[0]
        if content_type not in (
            "application/strategic-merge-patch+json",
            "application/merge-patch+json",
        ):
            message = f"the body of the request was in an unknown format: {content_type}"
            return self._send(415, status_body(415, "UnsupportedMediaType", message))
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            name = parts[3]
            if name not in self.standin.nodes:
                return self._send(404, status_body(404, "NotFound", f'nodes "{name}" not found'))
            if not isinstance(body, dict):
                return self._send(400, status_body(400, "BadRequest", "patch is not an object"))
            return self._send(200, self.standin.update_node(name, body))
        self._send(404, status_body(404, "NotFound", f"the server could not find {path}"))

    def do_POST(self) -> None:
        path, _, body = self._record()
        if not self._authorized():
            return
        parts = path.strip("/").split("/")
        if (
            len(parts) == 7
            and parts[:3] == ["api", "v1", "namespaces"]
            and parts[4] == "pods"
            and parts[6] == "eviction"
        ):
            namespace, name = parts[3], parts[5]
            if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
                return self._send(400, status_body(400, "BadRequest", "body is not an Eviction"))
            if body.get("metadata", {}).get("name") != name:
                message = "name in URL does not match name in Eviction object"
                return self._send(400, status_body(400, "BadRequest", message))
            code, answer = self.standin.evict(namespace, name)
            return self._send(code, answer)
        self._send(404, status_body(404, "NotFound", f"the server could not find {path}"))

    def do_DELETE(self) -> None:
        path, _, _ = self._record()
        if not self._authorized():
            return
        parts = path.strip("/").split("/")
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            if (parts[3], parts[5]) not in self.standin.pods:
                message = f'pods "{parts[5]}" not found'
                return self._send(404, status_body(404, "NotFound", message))
            return self._send(200, self.standin.delete_pod(parts[3], parts[5]))
        self._send(404, status_body(404, "NotFound", f"the server could not find {path}"))
