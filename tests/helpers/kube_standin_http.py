"""The stand-in API server's HTTP side: routing, auth, lists with paging, watches, writes.

The cluster's state and its rules (graceful deletion, budgets) live in ``kube_standin``; this
module turns requests into calls on it and answers as the real API server does (Status bodies,
chunked watch streams, ``continue`` tokens).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import json
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.helpers.kube_discovery import discovery_document
from tests.helpers.kube_selectors import (
    SelectorError,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from tests.helpers.kube_standin_objects import TOKEN, RecordedRequest, status_body

if TYPE_CHECKING:
    from tests.helpers.kube_standin import KubeStandIn

Obj = dict[str, Any]
_LIST_KINDS = {
    "nodes": ("v1", "NodeList", "Node"),
    "pods": ("v1", "PodList", "Pod"),
    "poddisruptionbudgets": ("policy/v1", "PodDisruptionBudgetList", "PodDisruptionBudget"),
}
_EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter."
)


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or ''}/{meta['name']}"


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


class _BadRequest(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    standin: KubeStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        self.request.settimeout(10.0)
        self.request.do_handshake()  # here, in this connection's thread, not in accept()
        self.request.settimeout(None)
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
        self._answered(code)
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answered(self, code: int) -> None:
        with self.standin._cond:
            self.standin.answers.append((self.command, urlsplit(self.path).path, code))

    def _not_found(self, path: str) -> None:
        self._send(404, status_body(404, "NotFound", f"the server could not find {path}"))

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
        return False

    # -- GET -------------------------------------------------------------------------------

    def do_GET(self) -> None:
        path, query, _ = self._record()
        if not self._authorized():
            return
        st = self.standin
        document = discovery_document(path, f"127.0.0.1:{st.port}")
        if document is not None:
            return self._send(200, document)
        parts = path.strip("/").split("/")
        try:
            with st._cond:
                return self._get(path, parts, query)
        except _BadRequest as exc:
            self._send(400, status_body(400, "BadRequest", str(exc)))

    def _get(self, path: str, parts: list[str], query: dict[str, str]) -> None:
        st = self.standin  # the caller holds st._cond
        if parts == ["api", "v1", "nodes"]:
            return self._list_or_watch("nodes", None, query)
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            return self._object_or_404(st.nodes.get(parts[3]), "nodes", parts[3])
        if parts == ["api", "v1", "pods"]:
            return self._list_or_watch("pods", None, query)
        if parts[:3] == ["api", "v1", "namespaces"] and parts[4:5] == ["pods"]:
            if len(parts) == 5:
                return self._list_or_watch("pods", parts[3], query)
            if len(parts) == 6:
                return self._object_or_404(st.pods.get((parts[3], parts[5])), "pods", parts[5])
        pdbs = parts[:3] == ["apis", "policy", "v1"] and parts[-1] == "poddisruptionbudgets"
        if pdbs and len(parts) in (4, 6):
            namespace = parts[4] if len(parts) == 6 else None
            return self._list_or_watch("poddisruptionbudgets", namespace, query)
        if parts[:4] == ["apis", "policy", "v1", "namespaces"] and len(parts) == 7:
            pdb = st.pdbs.get((parts[4], parts[6]))
            pdb = st.pdb_with_status(pdb) if pdb is not None else None
            return self._object_or_404(pdb, "poddisruptionbudgets.policy", parts[6])
        daemonset = parts[:4] == ["apis", "apps", "v1", "namespaces"] and len(parts) == 7
        if daemonset and parts[5] == "daemonsets":
            ds = st.daemonsets.get((parts[4], parts[6]))
            return self._object_or_404(ds, "daemonsets.apps", parts[6])
        self._not_found(path)

    def _object_or_404(self, obj: Obj | None, collection: str, name: str) -> None:
        if obj is None:
            self._send(404, status_body(404, "NotFound", f'{collection} "{name}" not found'))
        else:
            self._send(200, copy.deepcopy(obj))

    def _items(self, collection: str, namespace: str | None, query: dict[str, str]) -> list[Obj]:
        st = self.standin
        if collection == "nodes":
            items = [n for _, n in sorted(st.nodes.items())]
        elif collection == "pods":
            items = [p for _, p in sorted(st.pods.items())]
        else:
            items = [st.pdb_with_status(p) for _, p in sorted(st.pdbs.items())]
        return [i for i in items if self._matches(i, namespace, query)]

    def _matches(self, obj: Obj, namespace: str | None, query: dict[str, str]) -> bool:
        if namespace and obj["metadata"].get("namespace") != namespace:
            return False
        try:
            labels = parse_label_selector(query.get("labelSelector", ""))
            fields = parse_field_selector(query.get("fieldSelector", ""))
        except SelectorError as exc:
            raise _BadRequest(str(exc)) from exc
        return labels_match(labels, obj) and fields_match(fields, obj)

    def _list_or_watch(self, collection: str, namespace: str | None, query: dict[str, str]) -> None:
        st = self.standin  # the caller holds st._cond
        items = self._items(collection, namespace, query)
        if _truthy(query.get("watch")) and collection != "poddisruptionbudgets":
            return self._watch(collection, namespace, query, items)
        api_version, list_kind, _ = _LIST_KINDS[collection]
        rv, after = st._rv, ""
        if query.get("continue"):
            try:
                token = json.loads(base64.b64decode(query["continue"]))
                rv, after = int(token["rv"]), str(token["start"])
            except (ValueError, KeyError, TypeError, binascii.Error):
                raise _BadRequest("continue key is not valid") from None
            if rv <= st._expired_up_to:
                return self._send(410, status_body(410, "Expired", _EXPIRED_CONTINUE))
            items = [i for i in items if _key(i) > after]
        metadata: Obj = {"resourceVersion": str(rv)}
        limit = int(query["limit"]) if query.get("limit", "").isdigit() else 0
        if 0 < limit < len(items):
            start = _key(items[limit - 1])
            token_text = json.dumps({"rv": rv, "start": start}).encode()
            metadata["continue"] = base64.b64encode(token_text).decode()
            metadata["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        body = {
            "kind": list_kind,
            "apiVersion": api_version,
            "metadata": metadata,
            "items": [copy.deepcopy(i) for i in items],
        }
        self._send(200, body)

    def _watch(
        self, collection: str, namespace: str | None, query: dict[str, str], items: list[Obj]
    ) -> None:
        st = self.standin  # the caller holds st._cond
        if st.forbid_watches:
            message = (
                f'{collection} is forbidden: User "operator" cannot watch resource "{collection}"'
            )
            return self._send(403, status_body(403, "Forbidden", message))
        since_text = query.get("resourceVersion", "")
        since = int(since_text) if since_text.isdigit() else 0
        self._answered(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if since and since <= st._expired_up_to:
            message = f"too old resource version: {since} ({st._expired_up_to + 1})"
            self._chunk({"type": "ERROR", "object": status_body(410, "Expired", message)})
            return self._end_chunks()
        if not since:  # no resourceVersion: the current state first, as synthetic ADDED events
            for item in items:
                self._chunk({"type": "ADDED", "object": item})
            since = st._rv
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        kind = _LIST_KINDS[collection][2]
        timeout_s = float(query.get("timeoutSeconds") or 1800)
        now = time.monotonic()
        deadline, next_bookmark = now + timeout_s, now + st.bookmark_interval_s
        generation, bookmark_generation = st._watch_generation, st._bookmark_generation
        st._streams_begun += 1
        while not st._stopping and generation == st._watch_generation:
            for event in st._events:
                if event.rv <= since or event.collection != collection:
                    continue
                since = event.rv
                if not self._matches(event.obj, namespace, query):
                    continue
                if not self._chunk({"type": event.type, "object": event.obj}):
                    return
            now = time.monotonic()
            if bookmarks and (
                now >= next_bookmark or bookmark_generation != st._bookmark_generation
            ):
                bookmark_generation = st._bookmark_generation
                next_bookmark = now + st.bookmark_interval_s
                since = max(since, st._rv)  # every event up to here has been looked at
                meta = {"resourceVersion": str(st._rv)}
                bookmark = {
                    "kind": kind,
                    "apiVersion": _LIST_KINDS[collection][0],
                    "metadata": meta,
                }
                if not self._chunk({"type": "BOOKMARK", "object": bookmark}):
                    return
                st.bookmarks_sent.append((collection, st._rv))
            left = deadline - now
            if left <= 0:
                break
            st._cond.wait(min(left, 0.5, max(0.01, next_bookmark - now)))
        if not st._stopping:
            self._end_chunks()

    def _chunk(self, event: Obj) -> bool:
        data = json.dumps(event).encode() + b"\n"
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            return True
        except (OSError, ValueError):
            return False

    def _end_chunks(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    # -- writes ----------------------------------------------------------------------------

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
        self._not_found(path)

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
        self._not_found(path)

    def do_DELETE(self) -> None:
        path, query, body = self._record()
        if not self._authorized():
            return
        parts = path.strip("/").split("/")
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            if (parts[3], parts[5]) not in self.standin.pods:
                message = f'pods "{parts[5]}" not found'
                return self._send(404, status_body(404, "NotFound", message))
            grace_text = query.get("gracePeriodSeconds")
            if isinstance(body, dict) and body.get("gracePeriodSeconds") is not None:
                grace_text = str(body["gracePeriodSeconds"])
            grace = int(float(grace_text)) if grace_text else None
            return self._send(200, self.standin.delete_pod(parts[3], parts[5], grace))
        self._not_found(path)
