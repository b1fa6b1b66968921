"""Kubernetes source: GPU nodes and the pods that request MIG or GPU resources — list, then watch.

Two background threads (nodes, pods) each LIST once, then WATCH from the list's resourceVersion
(``timeout_seconds`` per watch request; a stream that ends is resumed from the last version seen,
without a new LIST). A 410 Gone (resourceVersion too old) re-lists at once; any other error marks
the source degraded with the error, waits with exponential backoff and re-lists. ``read()`` only
copies the in-memory cache, so it answers at once and makes no round trip in steady state
(``Reading.round_trips`` counts the LIST/WATCH requests started since the previous read).
What a node or pod becomes in the fleet (and the label/annotation convention) is in
``gpucon.sources.kube_objects``.

Put this source after Redis in the hub's priority order: a Backend fragment's ``state``
defaults to ``active`` and must not hide the registry's ``draining``.

The ``kubernetes`` package costs ~0.15–0.6 s to import: it is imported in the watch threads, never
before the first frame. The client is configured from a kubeconfig (or in-cluster config).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gpucon.model.fleet import Backend, Health, NodeInfo, Slot
from gpucon.model.reading import Reading
from gpucon.sources.base import describe_error
from gpucon.sources.kube_objects import (
    GpuPod,
    api_client_from_config,
    describe_api_error,
    gpu_pod,
    list_json,
    node_info,
    pod_fragments,
)


def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class _Watched:
    """One resource kept in memory by LIST then WATCH in a background thread."""

    def __init__(
        self,
        what: str,
        list_fn: Callable[..., Any],
        parse: Callable[[dict[str, Any]], Any],
        key: Callable[[dict[str, Any]], str],
        source: KubeSource,
    ) -> None:
        self.what = what
        self._list_fn = list_fn
        self._parse = parse
        self._key = key
        self._source = source
        self.items: dict[str, Any] = {}
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.first_list_done = threading.Event()  # the first LIST answered, or failed
        self.error: str | None = None
        self.requests = 0  # LIST and WATCH requests started
        self.failures = 0  # in a row; reset once a watch delivers events or ends cleanly
        self.malformed: set[str] = set()  # keys of objects that could not be read
        self._watch: Any = None
        self.thread = threading.Thread(target=self._run, name=f"gpucon-kube-{what}", daemon=True)

    def _parse_one(self, key: str, obj: dict[str, Any]) -> tuple[bool, Any]:
        """(True, parsed) — or (False, None) for a malformed object, which is noted and
        skipped: it never stops the watch."""
        try:
            parsed = self._parse(obj)
        except Exception:
            self.malformed.add(key)
            return False, None
        self.malformed.discard(key)
        return True, parsed

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        key = self._key(obj)
        if kind == "DELETED":
            self.malformed.discard(key)
            ok, parsed = True, None
        else:
            ok, parsed = self._parse_one(key, obj)
        if not ok:
            return  # keep what was last read well of it (shown stale: the source is degraded)
        with self._source._lock:
            if parsed is None:
                self.items.pop(key, None)
            else:
                self.items[key] = parsed
            self._source._version += 1

    def _list(self) -> None:
        src = self._source
        self.requests += 1
        body = list_json(self._list_fn, timeout_s=src.timeout_s)
        items = {}
        self.malformed.clear()
        for obj in body.get("items") or []:
            if not isinstance(obj, dict):
                continue
            key = self._key(obj)
            _, parsed = self._parse_one(key, obj)
            if parsed is not None:
                items[key] = parsed
        with src._lock:
            self.items = items
            self.resource_version = str(_metadata(body).get("resourceVersion") or "")
            self.error = None
            src._version += 1
        self.synced.set()
        self.first_list_done.set()

    def _watch_once(self) -> None:
        from kubernetes import watch

        src = self._source
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        if src._stop.is_set():  # closed while this thread was between requests
            return
        self.requests += 1
        stream = self._watch.stream(
            lambda **kw: self._list_fn(**kw),
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,  # keeps our resourceVersion fresh on quiet clusters
            timeout_seconds=int(src.watch_timeout_s),
            _request_timeout=(src.timeout_s, src.watch_timeout_s + src.timeout_s),
        )
        for event in stream:
            obj = event.get("raw_object")
            if not isinstance(obj, dict):
                continue
            version = _metadata(obj).get("resourceVersion")
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                self._apply(str(event["type"]), obj)
            if version:
                self.resource_version = str(version)
            self.failures = 0
            if self.error is not None:
                self.error = None  # events flow again
        self.failures = 0  # the stream ended cleanly (its timeout): resume from our version

    def _run(self) -> None:
        src = self._source
        need_list = True
        while not src._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch_once()
            except Exception as exc:
                if src._stop.is_set():
                    break
                if getattr(exc, "status", None) == 410:
                    need_list = True  # our resourceVersion is too old: re-list now
                    continue
                # a LIST that works does not reset the backoff: a watch that keeps failing
                # right after it (RBAC, a proxy) must not turn into polling
                self.failures += 1
                delay = min(src.backoff_max_s, src.backoff_s * 2 ** (self.failures - 1))
                self.error = f"{self.what}: {describe_api_error(exc)} (retry in {delay:.0f}s)"
                self.first_list_done.set()
                need_list = True
                src._stop.wait(delay)

    def stop(self) -> None:
        w = self._watch
        if w is not None:
            w.stop()


class KubeSource:
    """GPU nodes and GPU pods of one cluster, kept current by watches."""

    name = "kube"

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        namespace: str | None = None,
        timeout_s: float = 5.0,
        *,
        cadence_s: float = 1.0,
        watch_timeout_s: float = 300.0,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self.namespace = namespace
        self.timeout_s = timeout_s
        self.cadence_s = cadence_s
        self.watch_timeout_s = watch_timeout_s
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._version = 0
        self._watched: tuple[_Watched, ...] = ()
        self._start_error: str | None = None
        self._requests_reported = 0
        self._built: tuple[int, tuple[NodeInfo, ...], tuple[Backend, ...], tuple[Slot, ...]] = (
            -1,
            (),
            (),
            (),
        )

    def _start(self) -> None:
        from kubernetes import client

        api = client.CoreV1Api(api_client_from_config(self.kubeconfig, self.context))
        if self.namespace is None:
            list_pods: Callable[..., Any] = api.list_pod_for_all_namespaces
        else:
            namespace = self.namespace

            def list_pods(**kw: Any) -> Any:
                return api.list_namespaced_pod(namespace, **kw)

        def key(obj: dict[str, Any]) -> str:
            meta = _metadata(obj)
            name = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
            return name.lstrip("/")  # nodes have no namespace

        self._watched = (
            _Watched("nodes", api.list_node, node_info, key, self),
            _Watched("pods", list_pods, gpu_pod, key, self),
        )
        for w in self._watched:
            w.thread.start()

    def read(self) -> Reading:
        started = self._clock()
        perf = time.perf_counter()
        if not self._watched and not self._stop.is_set():
            try:
                self._start()
                self._start_error = None
            except Exception as exc:  # a bad kubeconfig: say so, try again next read
                self._start_error = f"kubeconfig: {describe_error(exc)}"
        if self._start_error is not None:
            return self._reading(started, perf, Health.DOWN, self._start_error)
        # only the first read waits, for the initial LIST, and ends within its own timeout
        # (the client's import already took part of it), so the hub never sees it overrun
        deadline = time.monotonic() + 0.9 * self.timeout_s - (time.perf_counter() - perf)
        for w in self._watched:
            w.first_list_done.wait(max(0.0, deadline - time.monotonic()))
        errors = [w.error for w in self._watched if w.error]
        for w in self._watched:
            if w.malformed:
                shown = ", ".join(sorted(w.malformed)[:3]) + (" …" if len(w.malformed) > 3 else "")
                errors.append(f"{w.what}: skipped {len(w.malformed)} malformed: {shown}")
        if not all(w.synced.is_set() for w in self._watched):
            unsynced = [w.what for w in self._watched if not w.synced.is_set()]
            detail = "; ".join(errors) or f"no answer in {self.timeout_s:.0f}s"
            return self._reading(
                started, perf, Health.DOWN, f"initial list of {', '.join(unsynced)}: {detail}"
            )
        health = Health.DEGRADED if errors else Health.OK
        return self._reading(started, perf, health, "; ".join(errors) or None)

    def _reading(self, started: float, perf: float, health: Health, error: str | None) -> Reading:
        nodes, backends, slots = self._fleet() if health is not Health.DOWN else ((), (), ())
        requests = sum(w.requests for w in self._watched)
        trips, self._requests_reported = requests - self._requests_reported, requests
        return Reading(
            source=self.name,
            health=health,
            taken_at=started,
            duration_s=time.perf_counter() - perf,
            error=error,
            nodes=nodes,
            backends=backends,
            slots=slots,
            round_trips=trips,
        )

    def _fleet(self) -> tuple[tuple[NodeInfo, ...], tuple[Backend, ...], tuple[Slot, ...]]:
        """The cache as fleet fragments, rebuilt only when a watch event changed it."""
        with self._lock:
            if self._built[0] == self._version:
                return self._built[1:]
            version = self._version
            node_items = dict(self._watched[0].items)
            pods: list[GpuPod] = sorted(self._watched[1].items.values(), key=lambda p: p.ref)
        by_node: dict[str, list[str]] = {}
        ips_by_node: dict[str, list[tuple[str, str]]] = {}
        for pod in pods:
            if pod.node:
                by_node.setdefault(pod.node, []).append(pod.ref)
                if pod.ip:
                    ips_by_node.setdefault(pod.node, []).append((pod.ip, pod.ref))
        nodes = tuple(
            NodeInfo(
                n.name,
                n.mig_config,
                n.mig_config_state,
                n.unschedulable,
                n.allocatable,
                tuple(by_node.get(n.name, ())),
                tuple(ips_by_node.get(n.name, ())),
            )
            for _, n in sorted(node_items.items())
        )
        backends, slots = pod_fragments(pods)
        self._built = (version, nodes, backends, slots)
        return nodes, backends, slots

    def close(self) -> None:
        """Stop the watches; a watch request still being opened is stopped once it is open."""
        self._stop.set()
        deadline = time.monotonic() + 1.0
        for w in self._watched:
            while w.thread.is_alive() and time.monotonic() < deadline:
                w.stop()
                w.thread.join(timeout=0.05)
