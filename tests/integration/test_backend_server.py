"""The lab's KServe v2 backend server over real HTTP on loopback (httpx as the client)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from gpucon.lab.backend_server import BackendServer
from gpucon.lab.service_time import ServiceTimeModel

pytestmark = pytest.mark.integration

INFER = {
    "id": "r1",
    "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1], "data": ["x"]}],
}


@pytest.fixture
async def backend() -> AsyncIterator[BackendServer]:
    server = BackendServer("b0", "llm", ServiceTimeModel(base_ms=30, jitter=0, slots=2))
    await server.start()
    yield server
    await server.close()


def metric(text: str, name: str, labels: str = "") -> float:
    pattern = rf"^{re.escape(name)}\{{[^}}]*{re.escape(labels)}[^}}]*\}} (\S+)$"
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"{name} {labels} not in /metrics"
    return float(match.group(1))


async def test_infer_answers_kserve_v2_and_is_logged(backend: BackendServer) -> None:
    async with httpx.AsyncClient(base_url=backend.url) as client:
        body = {**INFER, "parameters": {"entry_id": "1-0", "assigned_at": "12.5"}}
        r = await client.post("/v2/models/llm/infer", json=body)
        assert r.status_code == 200
        answer = r.json()
        assert answer["model_name"] == "llm" and answer["id"] == "r1"
        assert answer["outputs"][0]["name"] == "OUTPUT0"
        log = (await client.get("/lab/served")).json()["served"]
    assert [(e["id"], e["entry_id"], e["assigned_at"]) for e in log] == [("r1", "1-0", 12.5)]
    assert log[0]["compute_us"] >= 30_000


async def test_health_model_ready_and_not_ready_hook(backend: BackendServer) -> None:
    async with httpx.AsyncClient(base_url=backend.url) as client:
        assert (await client.get("/v2/health/live")).status_code == 200
        assert (await client.get("/v2/health/ready")).status_code == 200
        assert (await client.get("/v2/models/llm/ready")).status_code == 200
        assert (await client.get("/v2/models/other/ready")).status_code == 503
        assert (await client.post("/lab/ready", json={"ready": False})).status_code == 200
        assert (await client.get("/v2/health/ready")).status_code == 503
        assert (await client.get("/v2/health/live")).status_code == 200
        assert (await client.post("/v2/models/llm/infer", json=INFER)).status_code == 503
        assert (await client.post("/lab/ready", json={"ready": "no"})).status_code == 400
        assert (await client.post("/lab/ready", json={"ready": True})).status_code == 200
        assert (await client.post("/v2/models/llm/infer", json=INFER)).status_code == 200
        metrics = (await client.get("/metrics")).text
    assert metric(metrics, "nv_inference_request_failure", 'reason="REJECTED"') == 1


async def test_bad_requests_are_refused_not_fatal(backend: BackendServer) -> None:
    async with httpx.AsyncClient(base_url=backend.url) as client:
        r = await client.post("/v2/models/nope/infer", json=INFER)
        assert r.status_code == 404
        r = await client.post("/v2/models/llm/infer", content=b"{not json")
        assert r.status_code == 400
        assert (await client.get("/no/such/path")).status_code == 404
    reader, writer = await asyncio.open_connection(backend.host, backend.port)
    writer.write(b"garbage\r\n\r\n")
    await writer.drain()
    reply = await reader.read(200)
    writer.close()
    assert reply.startswith(b"HTTP/1.1 400")
    async with httpx.AsyncClient(base_url=backend.url) as client:
        assert (await client.post("/v2/models/llm/infer", json=INFER)).status_code == 200


async def test_metrics_use_triton_names_and_count_queueing(backend: BackendServer) -> None:
    # 6 at once on 2 slots: 4 of them must wait in the queue
    async with httpx.AsyncClient(base_url=backend.url) as client:
        rs = await asyncio.gather(
            *(client.post("/v2/models/llm/infer", json={**INFER, "id": f"r{i}"}) for i in range(6))
        )
        assert all(r.status_code == 200 for r in rs)
        text = (await client.get("/metrics")).text
    assert "# TYPE nv_inference_request_success counter" in text
    assert metric(text, "nv_inference_request_success", 'model="llm"') == 6
    assert metric(text, "nv_inference_count") == 6
    assert metric(text, "nv_inference_pending_request_count") == 0
    compute = metric(text, "nv_inference_compute_infer_duration_us")
    queue = metric(text, "nv_inference_queue_duration_us")
    total = metric(text, "nv_inference_request_duration_us")
    # two co-running requests each take 30 ms * (1 + 0.15): six of them ≈ 207 ms of compute
    assert 6 * 30_000 <= compute < 6 * 80_000
    assert queue >= 2 * 30_000  # the third and later waited at least one service time
    assert total >= compute + queue - 6_000
    p99 = metric(text, "nv_inference_request_summary_us", 'quantile="0.99"')
    p50 = metric(text, "nv_inference_request_summary_us", 'quantile="0.5"')
    assert 30_000 <= p50 <= p99
    assert metric(text, "nv_inference_request_summary_us_count") == 6


def test_service_time_model_slows_with_concurrency_and_refuses_bad_values() -> None:
    model = ServiceTimeModel(base_ms=10, slowdown=0.5, slots=4, jitter=0)
    assert model.compute_ms(1) == 10
    assert model.compute_ms(3) == 20
    assert model.compute_ms(99) == model.compute_ms(4) == 25
    with pytest.raises(ValueError, match="slots"):
        ServiceTimeModel(slots=0)
    with pytest.raises(ValueError, match="base_ms"):
        ServiceTimeModel(base_ms=float("nan"))


def test_service_time_from_the_simulator_model() -> None:
    big = ServiceTimeModel.from_sim("bert-base", 42)
    small = ServiceTimeModel.from_sim("bert-base", 14)
    assert small.base_ms > big.base_ms > 0  # fewer SMs: slower
    assert big.slots > small.slots >= 1  # fewer SMs: fewer at once
    with pytest.raises(ValueError, match="model 'nope' is not in the simulator"):
        ServiceTimeModel.from_sim("nope", 42)
    with pytest.raises(ValueError, match="sm_count"):
        ServiceTimeModel.from_sim("bert-base", 0)
