"""Per-model latency and DCGM GPU health through a real ``prometheus``.

One Triton-format exporter serves three models behind one address — ``sd15`` (a summary),
``sdxl`` (a histogram, two versions live) and ``resnet50`` (idle, its summary still holding
old quantiles) — and a dcgm-exporter-format one serves temperature, power, its limit,
utilisation and the last XID. What each backend should show is computed from the exposition
the test serves (counter deltas, bucket counts, Prometheus's interpolation), not typed in.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from gpucon.commands.cli import main
from gpucon.model.fleet import Health
from gpucon.sources.prometheus import PrometheusSource
from gpucon.sources.promql import DEFAULT_QUERIES, GPU_HEALTH_FIELDS
from tests.helpers.prometheus import (
    MetricsExporter,
    TritonCounters,
    dcgm_health_series,
    dcgm_series,
    histogram_quantile,
    parse_exposition,
    prometheus_server,
    query,
    sample_sum,
)

pytestmark = pytest.mark.integration

WINDOW = "4s"  # the fixture scrapes every 1 s and settles 4.5 s: the window is full
H100 = "GPU-cccccccc-0000-0000-0000-000000000001"
A100_MIG = "GPU-cccccccc-0000-0000-0000-000000000002"

SD15 = TritonCounters(
    model="sd15",
    success_per_s=8.0,
    failures_per_s={"BACKEND": 0.5},
    avg_ms=1150.0,
    pending=1.0,
    summary_ms={"0.5": 1100.0, "0.95": 1620.0, "0.99": 1900.0},
)
# two live versions of one model: rates add up, histograms add up bucket by bucket
SDXL_V1 = TritonCounters(
    model="sdxl",
    version="1",
    success_per_s=3.0,
    avg_ms=2100.0,
    pending=2.0,
    histogram=True,
    buckets=((1e6, 0.05), (2e6, 0.4), (3e6, 0.97), (5e6, 1.0), ("+Inf", 1.0)),
)
SDXL_V2 = TritonCounters(
    model="sdxl",
    version="2",
    success_per_s=1.0,
    avg_ms=2400.0,
    pending=0.0,
    histogram=True,
    buckets=((1e6, 0.0), (2e6, 0.2), (3e6, 0.9), (5e6, 1.0), ("+Inf", 1.0)),
)
# no traffic in the window; its summary still says what the last requests took
IDLE = TritonCounters(
    model="resnet50", success_per_s=0.0, pending=0.0, summary_ms={"0.5": 40.0, "0.95": 55.0}
)
MODELS = (SD15, SDXL_V1, SDXL_V2, IDLE)


def triton_text() -> str:
    return "\n".join(line for m in MODELS for line in m.lines()) + "\n"


H100_HEALTH = dcgm_health_series(
    host="node-h", gpu=0, uuid=H100, temp_c=83.0, power_w=612.5, power_limit_w=700.0,
    util_pct=97.0, xid=79,
)  # fmt: skip
MIG_HEALTH: dict[str, Any] = dict(
    host="node-m", gpu=1, uuid=A100_MIG, temp_c=41.0, power_w=88.0, power_limit_w=None,
    util_pct=0.0, xid=0,
)  # fmt: skip


def dcgm_text() -> str:
    lines = [
        *dcgm_series(host="node-h", gpu=0, uuid=H100, model="NVIDIA H100 80GB HBM3"),
        *H100_HEALTH,
        # the enforced limit (all limiters applied) is the one that throttles
        f'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{{gpu="0",UUID="{H100}",Hostname="node-h"}} 650',
        *dcgm_series(host="node-m", gpu=1, uuid=A100_MIG, gi_id=1, profile="3g.40gb"),
        *dcgm_series(host="node-m", gpu=1, uuid=A100_MIG, gi_id=2, profile="3g.40gb"),
    ]
    # a MIG GPU: the exporter repeats the card's fields on each GPU instance
    for gi in (1, 2):
        lines += dcgm_health_series(**MIG_HEALTH, gi_id=gi)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Stack:
    url: str
    triton: str  # host:port of the Triton exporter (= Prometheus's instance label)
    dcgm: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with (
        MetricsExporter(triton_text) as triton,
        MetricsExporter(dcgm_text) as dcgm,
        prometheus_server(
            tmp_path_factory.mktemp("prom"), [triton.address, dcgm.address], settle_s=4.5
        ) as url,
    ):
        yield Stack(url, triton.address, dcgm.address)


@dataclass(frozen=True)
class Expected:
    req_per_s: float
    error_rate: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


def expected_from_exposition() -> dict[str, Expected]:
    """Per model: the rates from two renders' counter deltas; quantiles as Prometheus makes
    them (the summary's own values; histogram_quantile over the bucket deltas)."""
    t0, before = time.time(), parse_exposition(triton_text())
    time.sleep(0.5)
    t1, after = time.time(), parse_exposition(triton_text())

    def rate(name: str, **labels: str) -> float:
        return (sample_sum(after, name, **labels) - sample_sum(before, name, **labels)) / (t1 - t0)

    out: dict[str, Expected] = {}
    for model in sorted({m.model for m in MODELS}):
        ok = rate("nv_inference_request_success", model=model)
        failed = rate("nv_inference_request_failure", model=model)
        summary = {
            lbl["quantile"]: v / 1000.0
            for n, lbl, v in after
            if n == "nv_inference_request_summary_us" and lbl["model"] == model
        }
        les = {lbl["le"] for n, lbl, _ in after if n.endswith("_bucket") and lbl["model"] == model}
        buckets = {
            float(le): rate("nv_inference_request_duration_us_bucket", model=model, le=le)
            for le in les
        }
        quantiles = [_quantile(q, ok, summary, buckets) for q in ("0.5", "0.95", "0.99")]
        error_rate = failed / (ok + failed) if ok + failed > 0 else None
        out[model] = Expected(ok, error_rate, *quantiles)
    return out


def _quantile(
    q: str, ok_per_s: float, summary: dict[str, float], buckets: dict[float, float]
) -> float | None:
    if ok_per_s == 0:
        return None  # nothing served in the window: no quantile is current
    if q in summary:
        return summary[q]
    return histogram_quantile(float(q), buckets) / 1000.0 if buckets else None


def approx(value: float | None, rel: float = 0.02) -> object:
    return None if value is None else pytest.approx(value, rel=rel)


def test_each_model_behind_one_address_has_its_own_latency(stack: Stack) -> None:
    source = PrometheusSource(stack.url, rate_window=WINDOW, timeout_s=5.0)
    try:
        r = source.read()
    finally:
        source.close()
    assert r.health is Health.OK, r.error
    assert r.round_trips == len(DEFAULT_QUERIES)  # one query per family, models or not
    by_model = {s.model: s for s in r.latency if s.address == stack.triton}
    expected = expected_from_exposition()
    assert set(by_model) == set(expected)
    for model, want in expected.items():
        got = by_model[model]
        assert got.key == stack.triton and got.rate_window_s == 4.0
        assert got.req_per_s == pytest.approx(want.req_per_s, rel=0.1, abs=1e-9), model
        assert got.error_rate == approx(want.error_rate, rel=0.1), model
        assert (got.p50_ms, got.p95_ms, got.p99_ms) == (
            approx(want.p50_ms),
            approx(want.p95_ms),
            approx(want.p99_ms),
        ), model
    assert by_model["sdxl"].versions == ("1", "2")
    assert by_model["sdxl"].pending == 2.0  # summed over its versions
    # the p95s differ, and the idle model's stale summary is not shown as its p95
    assert by_model["sd15"].p95_ms != by_model["sdxl"].p95_ms
    assert by_model["resnet50"].req_per_s == 0.0 and by_model["resnet50"].p95_ms is None
    assert by_model["resnet50"].avg_ms is None


def test_dcgm_gpu_health_fields(stack: Stack) -> None:
    source = PrometheusSource(stack.url, rate_window=WINDOW, timeout_s=5.0)
    try:
        r = source.read()
    finally:
        source.close()
    gpus = {g.uuid: g for g in r.gpus}
    h100 = gpus[H100]
    assert (h100.temperature_c, h100.power_w, h100.util_pct) == (83.0, 612.5, 97.0)
    assert h100.power_limit_w == 650.0  # the enforced limit over the configured 700 W
    assert h100.xid_last == 79 and isinstance(h100.xid_last, int)
    mig = gpus[A100_MIG]  # the card's fields, repeated on its GPU instances
    assert (mig.temperature_c, mig.power_w, mig.xid_last, mig.mig_enabled) == (41.0, 88.0, 0, True)
    assert mig.power_limit_w is None  # not exported: n/a, not 0
    # health series make no slot of their own
    assert {s.id for s in r.slots} == {"node-h/gpu0", "node-m/gpu1/gi1", "node-m/gpu1/gi2"}
    # one series per GPU and field, however many instances repeat a MIG GPU's fields
    served = parse_exposition(dcgm_text())
    fields = {(lbl["UUID"], n) for n, lbl, _ in served if n in GPU_HEALTH_FIELDS}
    returned = query(stack.url, DEFAULT_QUERIES["gpu_health"])
    assert len(returned) == len(fields) < sum(n in GPU_HEALTH_FIELDS for n, _, _ in served)


def test_snapshot_gives_each_backend_on_one_server_its_own_latency(
    stack: Stack, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The registry's three backends share one url; ``gpucon snapshot --json`` joins each to
    its model's latency, raises the SLO alert only where that model's p95 breaks its SLO, and
    carries the DCGM health fields."""
    r = redis.Redis.from_url(redis_url)
    url = f"http://{stack.triton}"
    for name, model in (("sd15-a", "sd15"), ("sdxl-a", "sdxl"), ("resnet-a", "resnet50")):
        r.sadd("gpucon:backends", name)
        r.hset(f"gpucon:backend:{name}", mapping={"slot": "node-h/gpu0", "url": url,
               "model": model, "weight": "1", "state": "active"})  # fmt: skip
    r.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    r.close()
    slo = {"sd15": 2000.0, "sdxl": 2500.0, "resnet50": 50.0}
    config = tmp_path / "config.toml"
    config.write_text(
        f'[fleets.lab.redis]\nurl = "{redis_url}"\nstreams = ["gen:queue"]\n'
        f'[fleets.lab.prometheus]\nurl = "{stack.url}"\nrate_window = "{WINDOW}"\n'
        "[slo]\n" + "".join(f"{m} = {v}\n" for m, v in slo.items())
    )
    assert main(["snapshot", "--json", "--config", str(config)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["health"] for s in doc["sources"]} == {"ok"}
    expected = expected_from_exposition()
    latency = {e["key"]: e for e in doc["latency"]}
    assert set(latency) == {"sd15-a", "sdxl-a", "resnet-a"}
    for name, model in (("sd15-a", "sd15"), ("sdxl-a", "sdxl"), ("resnet-a", "resnet50")):
        got, want = latency[name], expected[model]
        assert (got["model"], got["address"], got["rate_window_s"]) == (model, stack.triton, 4.0)
        assert got["p95_ms"] == approx(want.p95_ms), name
        assert got["req_per_s"] == pytest.approx(want.req_per_s, rel=0.1, abs=1e-9), name
    breaching = {
        name
        for name, model in (("sd15-a", "sd15"), ("sdxl-a", "sdxl"), ("resnet-a", "resnet50"))
        if (p95 := expected[model].p95_ms) is not None and p95 > slo[model]
    }
    assert breaching == {"sdxl-a"}  # the case that found it: sd15 under its SLO, sdxl over
    alerted = {a["target"] for a in doc["alerts"] if a["rule"] == "p95_slo"}
    assert alerted == breaching
    gpus = {g["uuid"]: g for g in doc["gpus"]}
    assert gpus[H100]["temperature_c"] == 83.0 and gpus[H100]["xid_last"] == 79
    assert (gpus[H100]["power_w"], gpus[H100]["power_limit_w"]) == (612.5, 650.0)
    assert gpus[H100]["util_pct"] == 97.0
    # DCGM's last XID raises the XID alert on that GPU alone (the MIG GPU's 0 is "none")
    xids = [a for a in doc["alerts"] if a["rule"] == "xid"]
    assert [(a["severity"], H100 in a["message"]) for a in xids] == [("critical", True)]
    assert "XID 79" in xids[0]["message"]
