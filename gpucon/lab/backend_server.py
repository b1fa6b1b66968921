"""A small KServe v2 HTTP backend for the lab: infer, health, model ready and Triton metrics.

Service time follows :class:`ServiceTimeModel` (requests beyond the model's slots queue, those
computing slow each other down). Every request served is logged (id, entry id, arrival and end
times) so tests can tell exactly which backend got what. A test hook (``POST /lab/ready``, or
SIGUSR1 to toggle) makes the server report not-ready.

Endpoints: ``POST /v2/models/{model}/infer``, ``GET /v2/health/ready``, ``GET /v2/health/live``,
``GET /v2/models/{model}/ready``, ``GET /metrics``, ``GET /lab/served``, ``POST /lab/ready``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from dataclasses import dataclass, field

from gpucon.lab.http_server import HttpServer, Request, Response
from gpucon.lab.service_time import ServiceTimeModel

SUMMARY_WINDOW = 1024
SUMMARY_QUANTILES = (0.5, 0.9, 0.95, 0.99)


@dataclass(slots=True)
class ServedRequest:
    request_id: str
    entry_id: str | None
    arrived_at: float
    finished_at: float
    queue_us: int
    compute_us: int
    # when the scheduler assigned it (unix seconds from Redis TIME), if it said
    assigned_at: float | None = None


@dataclass(slots=True)
class TritonCounters:
    """Triton's per-model counters (names as in Triton's /metrics)."""

    success: int = 0
    failure: dict[str, int] = field(default_factory=dict)
    inference_count: int = 0
    exec_count: int = 0
    request_duration_us: int = 0
    queue_duration_us: int = 0
    compute_infer_duration_us: int = 0
    pending: int = 0
    recent_us: deque[int] = field(default_factory=lambda: deque(maxlen=SUMMARY_WINDOW))

    def fail(self, reason: str) -> None:
        self.failure[reason] = self.failure.get(reason, 0) + 1


def _as_float(value: object) -> float | None:
    try:
        return float(value) if isinstance(value, str | int | float) else None
    except ValueError:
        return None


def _quantile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return float("nan")
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[idx])


def render_metrics(model: str, c: TritonCounters) -> str:
    """The counters in Prometheus text format, with Triton's metric names and labels."""
    lbl = f'model="{model}",version="1"'
    out = [
        "# HELP nv_inference_request_success Number of successful inference requests",
        "# TYPE nv_inference_request_success counter",
        f"nv_inference_request_success{{{lbl}}} {c.success}",
        "# HELP nv_inference_request_failure Number of failed inference requests",
        "# TYPE nv_inference_request_failure counter",
    ]
    for reason in sorted(c.failure or {"REJECTED": 0}):
        out.append(
            f'nv_inference_request_failure{{{lbl},reason="{reason}"}} {c.failure.get(reason, 0)}'
        )
    simple = [
        ("nv_inference_count", "counter", "Number of inferences performed", c.inference_count),
        ("nv_inference_exec_count", "counter", "Number of model executions", c.exec_count),
        (
            "nv_inference_request_duration_us",
            "counter",
            "Cumulative inference request duration in microseconds",
            c.request_duration_us,
        ),
        (
            "nv_inference_queue_duration_us",
            "counter",
            "Cumulative inference queuing duration in microseconds",
            c.queue_duration_us,
        ),
        (
            "nv_inference_compute_infer_duration_us",
            "counter",
            "Cumulative compute inference duration in microseconds",
            c.compute_infer_duration_us,
        ),
        (
            "nv_inference_pending_request_count",
            "gauge",
            "Instantaneous number of pending requests awaiting execution",
            c.pending,
        ),
    ]
    for name, kind, help_text, value in simple:
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{lbl}}} {value}"]
    recent = sorted(c.recent_us)
    out += [
        "# HELP nv_inference_request_summary_us Summary of inference request duration in us",
        "# TYPE nv_inference_request_summary_us summary",
    ]
    for q in SUMMARY_QUANTILES:
        out.append(
            f'nv_inference_request_summary_us{{{lbl},quantile="{q}"}} {_quantile(recent, q)}'
        )
    out.append(f"nv_inference_request_summary_us_count{{{lbl}}} {c.success}")
    out.append(f"nv_inference_request_summary_us_sum{{{lbl}}} {c.request_duration_us}")
    return "\n".join(out) + "\n"


class BackendServer:
    """One KServe v2 model server on loopback."""

    def __init__(
        self,
        name: str,
        model: str,
        service: ServiceTimeModel,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.service = service
        self.host = host
        self.port = port
        self.ready = True
        self.counters = TritonCounters()
        self.served: list[ServedRequest] = []
        self._rng = random.Random(seed)
        self._slots = asyncio.Semaphore(service.slots)
        self._running = 0
        self._http = HttpServer(self.handle)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        await self._http.start(self.host, self.port)
        self.port = self._http.port

    async def close(self) -> None:
        await self._http.close()

    async def handle(self, req: Request) -> Response:
        parts = [p for p in req.path.split("/") if p]
        if req.method == "GET" and parts == ["v2", "health", "live"]:
            return Response.of_json(200, {"live": True})
        if req.method == "GET" and parts == ["v2", "health", "ready"]:
            return Response.of_json(200 if self.ready else 503, {"ready": self.ready})
        if len(parts) == 4 and parts[:2] == ["v2", "models"] and parts[3] == "ready":
            ok = self.ready and parts[2] == self.model
            return Response.of_json(200 if ok else 503, {"name": parts[2], "ready": ok})
        is_model_path = len(parts) == 4 and parts[:2] == ["v2", "models"]
        if req.method == "POST" and is_model_path and parts[3] == "infer":
            return await self.infer(parts[2], req)
        if req.method == "GET" and parts == ["metrics"]:
            body = render_metrics(self.model, self.counters)
            return Response.text(200, body, "text/plain; version=0.0.4")
        if req.method == "GET" and parts == ["lab", "served"]:
            return Response.of_json(200, {"name": self.name, "served": self.served_log()})
        if req.method == "POST" and parts == ["lab", "ready"]:
            payload = req.json()
            if not isinstance(payload, dict) or not isinstance(payload.get("ready"), bool):
                return Response.of_json(400, {"error": 'body must be {"ready": true|false}'})
            self.ready = payload["ready"]
            return Response.of_json(200, {"ready": self.ready})
        if req.method == "GET" and parts == ["v2"]:
            return Response.of_json(200, {"name": "gpucon-lab-backend", "version": "1"})
        return Response.of_json(404, {"error": f"no route {req.method} {req.path}"})

    def served_log(self) -> list[dict[str, object]]:
        return [
            {
                "id": s.request_id,
                "entry_id": s.entry_id,
                "arrived_at": s.arrived_at,
                "finished_at": s.finished_at,
                "queue_us": s.queue_us,
                "compute_us": s.compute_us,
                "assigned_at": s.assigned_at,
            }
            for s in self.served
        ]

    async def infer(self, model: str, req: Request) -> Response:
        arrived = time.time()
        t0 = time.perf_counter()
        if model != self.model:
            return Response.of_json(404, {"error": f"unknown model {model!r}"})
        if not self.ready:
            self.counters.fail("REJECTED")
            return Response.of_json(503, {"error": "server not ready"})
        try:
            payload = req.json()
        except ValueError:
            self.counters.fail("REJECTED")
            return Response.of_json(400, {"error": "body is not JSON"})
        if not isinstance(payload, dict):
            self.counters.fail("REJECTED")
            return Response.of_json(400, {"error": "body must be a JSON object"})
        request_id = str(payload.get("id", ""))
        params = payload.get("parameters")
        entry_id = params.get("entry_id") if isinstance(params, dict) else None
        assigned_at = _as_float(params.get("assigned_at")) if isinstance(params, dict) else None
        self.counters.pending += 1
        try:
            async with self._slots:
                queued = time.perf_counter()
                self._running += 1
                try:
                    compute_s = self.service.compute_ms(self._running, self._rng) / 1000.0
                    if compute_s > 0:
                        await asyncio.sleep(compute_s)
                finally:
                    self._running -= 1
        finally:
            self.counters.pending -= 1
        done = time.perf_counter()
        queue_us = int((queued - t0) * 1e6)
        compute_us = int((done - queued) * 1e6)
        total_us = int((done - t0) * 1e6)
        c = self.counters
        c.success += 1
        c.inference_count += 1
        c.exec_count += 1
        c.request_duration_us += total_us
        c.queue_duration_us += queue_us
        c.compute_infer_duration_us += compute_us
        c.recent_us.append(total_us)
        self.served.append(
            ServedRequest(
                request_id,
                str(entry_id) if entry_id else None,
                arrived,
                time.time(),
                queue_us,
                compute_us,
                assigned_at,
            )
        )
        return Response.of_json(
            200,
            {
                "model_name": self.model,
                "model_version": "1",
                "id": request_id,
                "parameters": {"backend": self.name},
                "outputs": [{"name": "OUTPUT0", "datatype": "BYTES", "shape": [1], "data": ["ok"]}],
            },
        )
