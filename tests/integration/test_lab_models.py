"""The lab with two models on each backend server: every (server, model) is its own backend,
and through the lab's real Prometheus each one gets its own p95, equal to the p95 of the
requests that server logged for that model (the summary's nearest rank, computed here).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import httpx
import pytest
import redis
import redis.asyncio as aioredis

from gpucon.config import load_config
from gpucon.lab.lab import LabOptions
from gpucon.lab.traffic import TrafficSpec, generate
from gpucon.lab.triton_metrics import quantile
from gpucon.model.fleet import Health
from gpucon.session import open_session
from tests.helpers.lab_stack import served, start_lab
from tests.helpers.prometheus import query
from tests.helpers.servers import wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs prometheus"),
]

MODELS = ("bert-base", "resnet50")
PER_MODEL = 40


async def send(redis_url: str, model: str) -> list[str]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        spec = TrafficSpec(model=model, rate_per_s=20.0, max_count=PER_MODEL, max_duration_s=10)
        return await generate(client, spec)
    finally:
        await client.aclose()


def scraped(prom: str, promql: str) -> float | None:
    values = [s["value"] for s in query(prom, promql)]
    return float(values[0][1]) if values else None  # type: ignore[index]


async def send_all(redis_url: str) -> list[list[str]]:
    return list(await asyncio.gather(*(send(redis_url, m) for m in MODELS)))


def test_two_models_per_server_each_backend_its_own_p95(redis_url: str, tmp_path: Path) -> None:
    with start_lab(
        redis_url,
        tmp_path / "lab",
        backends=2,
        model=MODELS[0],
        more_models=MODELS[1:],
        sm_counts=(42.0, 14.0),
        prometheus=True,
    ) as lab:
        assert lab.prometheus_url is not None and lab.config_path is not None
        names = {b.name: (b.url, b.model) for b in lab.backends}
        assert names == {
            f"lab-b{i}-{m}": (lab.backends[2 * i].url, m) for i in range(2) for m in MODELS
        }
        assert len({url for url, _ in names.values()}) == 2  # two servers, four backends
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        assert client.hget("gpucon:backend:lab-b1-resnet50", "model") == "resnet50"
        client.close()
        prom = lab.prometheus_url
        servers = {url for url, _ in names.values()}
        # Prometheus's first scrape comes seconds after it starts: wait for it, so that the
        # rate window holds a sample from before the traffic
        wait_until(lambda: len(query(prom, "up == 1")) == len(servers), 20.0, "first scrape")
        sent = sum(len(ids) for ids in asyncio.run(send_all(redis_url)))
        logs: dict[str, list[dict[str, object]]] = {}

        def all_answered() -> bool:
            logs.update({url: served(url) for url in servers})
            return sum(len(log) for log in logs.values()) == sent

        wait_until(all_answered, timeout_s=30.0, what="every request answered")
        # the p95 each backend should show: its server's requests for its model
        expected: dict[str, float | None] = {}
        for name, (url, model) in names.items():
            took = sorted(int(str(e["total_us"])) for e in logs[url] if e["model"] == model)
            expected[name] = quantile(took, 0.95) / 1000.0 if took else None
            where = f'model="{model}",instance="{url.removeprefix("http://")}"'
            count = f"nv_inference_request_summary_us_count{{{where}}}"
            n = len(took)
            wait_until(
                lambda promql=count, n=n: scraped(prom, promql) == n,  # type: ignore[misc]
                15.0,
                f"prometheus scraping {name}'s last requests",
            )
        hub = open_session(load_config(lab.config_path, env={}), read_only=True).hub
        try:
            hub.poll_once()
            snap = hub.tick()
        finally:
            hub.stop()
    assert snap.sources["prometheus"].health is Health.OK, snap.sources["prometheus"].error
    shown = {name: snap.latency[name].p95_ms for name in names if name in snap.latency}
    print("per-model p95, shown vs computed (ms):", {n: (shown.get(n), expected[n]) for n in names})
    assert shown == {n: pytest.approx(p95, rel=1e-6) for n, p95 in expected.items()}
    for name, (url, model) in names.items():
        lat = snap.latency[name]
        assert (lat.model, lat.address, lat.rate_window_s) == (
            model,
            url.removeprefix("http://"),
            60.0,
        )
        assert lat.req_per_s is not None and lat.req_per_s > 0
    # the two models on one server do not share a p95
    assert shown["lab-b0-bert-base"] != shown["lab-b0-resnet50"]


def test_backend_server_refuses_a_model_it_does_not_serve() -> None:
    """The two-model server answers both models' readiness, and 404s a third."""
    import subprocess
    import sys

    from tests.helpers.servers import free_port

    port = free_port()
    argv = [sys.executable, "-m", "gpucon.commands.cli", "backend", "--port", str(port),
            "--name", "b", "--model", "sd15,sdxl", "--service-ms", "1"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: httpx.get(f"{base}/v2/health/ready").status_code == 200, 15.0)
        assert httpx.get(f"{base}/v2/models/sd15/ready").status_code == 200
        assert httpx.get(f"{base}/v2/models/sdxl/ready").status_code == 200
        assert httpx.get(f"{base}/v2/models/llm/ready").status_code == 503
        body = {"id": "1", "inputs": []}
        assert httpx.post(f"{base}/v2/models/sdxl/infer", json=body).json()["model_name"] == "sdxl"
        assert httpx.post(f"{base}/v2/models/llm/infer", json=body).status_code == 404
        text = httpx.get(f"{base}/metrics").text
        assert text.count("# TYPE nv_inference_request_success counter") == 1
        assert 'nv_inference_request_success{model="sdxl",version="1"} 1' in text
        assert 'nv_inference_request_success{model="sd15",version="1"} 0' in text
        # no request of sd15 yet: its summary has no quantile, not a 0
        assert (
            'nv_inference_request_summary_us{model="sd15",version="1",quantile="0.95"} NaN' in text
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_lab_options_refuse_a_model_twice_and_unknown_models() -> None:
    assert LabOptions(model="sd15", more_models=("sdxl",)).models == ("sd15", "sdxl")
    with pytest.raises(ValueError, match="each model once"):
        LabOptions(model="sd15", more_models=("sd15",))
    with pytest.raises(ValueError, match="model 'nope' is not in the simulator"):
        LabOptions(backends=1, model="sd15", more_models=("nope",), sm_counts=(42.0,))
