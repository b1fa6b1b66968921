"""A small KServe v2 HTTP backend for the lab: infer, health, model ready and Triton metrics.

Service time follows :class:`ServiceTimeModel` (requests beyond the model's slots queue, those
computing slow each other down). One server may serve several models, as a Triton server
does; its /metrics then carries one series per model (gpucon.lab.triton_metrics). Every
request served is logged (id, entry id, model, arrival and end times) so tests can tell
exactly which backend got what. A test hook (``POST /lab/ready``, or
SIGUSR1 to toggle) makes the server report not-ready.

Endpoints: ``POST /v2/models/{model}/infer``, ``GET /v2/health/ready``, ``GET /v2/health/live``,
``GET /v2/models/{model}/ready``, ``GET /metrics``, ``GET /lab/served``, ``POST /lab/ready``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpucon.lab.http_server import HttpServer, Request, Response
from gpucon.lab.service_time import ServiceTimeModel
from gpucon.lab.triton_metrics import TritonCounters, render_metrics


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
    model: str = ""
    total_us: int = 0


@dataclass(slots=True)
class ServedModel:
    """One model the server serves: its service time, its own instances and its counters."""

    service: ServiceTimeModel
    slots: asyncio.Semaphore
    counters: TritonCounters = field(default_factory=TritonCounters)
    running: int = 0


def _as_float(value: object) -> float | None:
    try:
        return float(value) if isinstance(value, str | int | float) else None
    except ValueError:
        return None


class BackendServer:
    """One KServe v2 model server on loopback, serving ``model`` and any ``more_models``.

    Each model has its own instances (slots) and Triton counters, as in a Triton server with
    one instance group per model; /metrics exports them all, told apart by ``model``.
    """

    def __init__(
        self,
        name: str,
        model: str,
        service: ServiceTimeModel,
        *,
        more_models: Mapping[str, ServiceTimeModel] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.host = host
        self.port = port
        self.ready = True
        services = {model: service, **(more_models or {})}
        self.models = {
            m: ServedModel(svc, asyncio.Semaphore(svc.slots)) for m, svc in services.items()
        }
        self.served: list[ServedRequest] = []
        self._rng = random.Random(seed)
        self._http = HttpServer(self.handle)

    @property
    def counters(self) -> TritonCounters:
        """The first model's counters."""
        return self.models[self.model].counters

    @property
    def service(self) -> ServiceTimeModel:
        """The first model's service time (tests change it to slow the server down)."""
        return self.models[self.model].service

    @service.setter
    def service(self, value: ServiceTimeModel) -> None:
        self.models[self.model].service = value

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
            ok = self.ready and parts[2] in self.models
            return Response.of_json(200 if ok else 503, {"name": parts[2], "ready": ok})
        is_model_path = len(parts) == 4 and parts[:2] == ["v2", "models"]
        if req.method == "POST" and is_model_path and parts[3] == "infer":
            return await self.infer(parts[2], req)
        if req.method == "GET" and parts == ["metrics"]:
            body = render_metrics({m: served.counters for m, served in self.models.items()})
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
                "model": s.model,
                "total_us": s.total_us,
            }
            for s in self.served
        ]

    async def infer(self, model: str, req: Request) -> Response:
        arrived = time.time()
        t0 = time.perf_counter()
        served = self.models.get(model)
        if served is None:
            return Response.of_json(404, {"error": f"unknown model {model!r}"})
        c = served.counters
        if not self.ready:
            c.fail("REJECTED")
            return Response.of_json(503, {"error": "server not ready"})
        try:
            payload = req.json()
        except ValueError:
            c.fail("REJECTED")
            return Response.of_json(400, {"error": "body is not JSON"})
        if not isinstance(payload, dict):
            c.fail("REJECTED")
            return Response.of_json(400, {"error": "body must be a JSON object"})
        request_id = str(payload.get("id", ""))
        params = payload.get("parameters")
        entry_id = params.get("entry_id") if isinstance(params, dict) else None
        assigned_at = _as_float(params.get("assigned_at")) if isinstance(params, dict) else None
        c.pending += 1
        try:
            async with served.slots:
                queued = time.perf_counter()
                served.running += 1
                try:
                    compute_s = served.service.compute_ms(served.running, self._rng) / 1000.0
                    if compute_s > 0:
                        await asyncio.sleep(compute_s)
                finally:
                    served.running -= 1
        finally:
            c.pending -= 1
        done = time.perf_counter()
        queue_us = int((queued - t0) * 1e6)
        compute_us = int((done - queued) * 1e6)
        total_us = int((done - t0) * 1e6)
        c.succeed(total_us, queue_us, compute_us)
        self.served.append(
            ServedRequest(
                request_id,
                str(entry_id) if entry_id else None,
                arrived,
                time.time(),
                queue_us,
                compute_us,
                assigned_at,
                model,
                total_us,
            )
        )
        return Response.of_json(
            200,
            {
                "model_name": model,
                "model_version": "1",
                "id": request_id,
                "parameters": {"backend": self.name},
                "outputs": [{"name": "OUTPUT0", "datatype": "BYTES", "shape": [1], "data": ["ok"]}],
            },
        )
