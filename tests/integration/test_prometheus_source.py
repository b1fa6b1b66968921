"""PrometheusSource against a real ``prometheus`` scraping exporters that the test serves.

Three targets: ``dcgm_triton`` (dcgm-exporter series for a MIG GPU and a whole GPU with the
classic names and ``Hostname``, a DCGM 4.6/4.7-style GPU with ``hostname`` and memory in
bytes, and a Triton server exporting summary quantiles), ``triton_hist`` (a Triton server
with a latency histogram) and ``triton_plain`` (counters only). Garbage series live under
names the default queries do not match; tests point a template at them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from gpucon.model.fleet import Health, Slot, SlotKind
from gpucon.model.ids import mig_slot_id
from gpucon.model.merge import merge_readings
from gpucon.model.reading import Reading
from gpucon.registry import keys
from gpucon.sources.prometheus import PrometheusSource
from tests.helpers.prometheus import (
    MetricsExporter,
    TritonCounters,
    dcgm_series,
    prometheus_server,
)
from tests.helpers.servers import free_port

pytestmark = pytest.mark.integration

MIG_UUID = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
WHOLE_UUID = "GPU-aaaaaaaa-0000-0000-0000-000000000002"
NEW_UUID = "GPU-bbbbbbbb-0000-0000-0000-000000000003"
WINDOW = "4s"  # the fixture scrapes every 1 s and settles 4.5 s: the window is full


def dcgm_triton_text() -> str:
    lines = [
        *dcgm_series(
            host="node-a",
            gpu=0,
            uuid=MIG_UUID,
            gi_id=1,
            profile="3g.40gb",
            gr_active=0.42,
            sm_active=0.33,
            dram_active=0.2,
            fb_used_mib=12000,
            fb_free_mib=28000,
        ),
        *dcgm_series(
            host="node-a",
            gpu=0,
            uuid=MIG_UUID,
            gi_id=2,
            profile="1g.10gb",
            gr_active=0.1,
            fb_used_mib=9500,
            fb_free_mib=500,
        ),
        *dcgm_series(
            host="node-a",
            gpu=1,
            uuid=WHOLE_UUID,
            gr_active=0.87,
            fb_used_mib=20000,
            fb_free_mib=60000,
        ),
        *dcgm_series(
            host="node-b",
            gpu=0,
            uuid=NEW_UUID,
            model="NVIDIA H200",
            gr_active=0.5,
            fb_used_mib=1024,
            fb_free_mib=3072,
            host_label="hostname",
            bytes_names=True,
        ),
        # the MIG GPU's own memory series (no GPU_I_ID): the card, not a slot
        f'DCGM_FI_DEV_FB_USED{{gpu="0",UUID="{MIG_UUID}",Hostname="node-a"}} 21500',
        f'DCGM_FI_DEV_FB_FREE{{gpu="0",UUID="{MIG_UUID}",Hostname="node-a"}} 58500',
        # garbage, matched only by the tests that ask for it
        'garbage_activity{gpu="0",UUID="GPU-x",Hostname="node-z"} NaN',
        'garbage_activity{gpu="0",UUID="GPU-y",Hostname="node-z"} +Inf',
        'garbage_activity{gpu="0",UUID="GPU-w"} 0.5',
        'garbage_activity{gpu="zero",UUID="GPU-v",Hostname="node-z"} 0.5',
        'garbage_activity{gpu="1",UUID="GPU-u",Hostname="node-z"} 0.25',
    ]
    return "\n".join(lines + SUMMARY.lines()) + "\n"


SUMMARY = TritonCounters(
    success_per_s=50.0,
    failures_per_s={"REJECTED": 2.0, "BACKEND": 1.0},
    avg_ms=80.0,
    queue_ms=5.0,
    compute_ms=60.0,
    pending=3.0,
    summary_ms={"0.5": 70.0, "0.95": 120.0, "0.99": 180.0},
)
HISTOGRAM = TritonCounters(success_per_s=10.0, pending=0.0, histogram=True, queue_ms=25.0)
PLAIN = TritonCounters(
    success_per_s=5.0, avg_ms=200.0, queue_ms=None, compute_ms=None, pending=None
)


@dataclass(frozen=True)
class Stack:
    url: str
    dcgm_triton: str  # host:port of each exporter (= Prometheus's instance label)
    triton_hist: str
    triton_plain: str


@pytest.fixture(scope="session")
def prom_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with (
        MetricsExporter(dcgm_triton_text) as a,
        MetricsExporter(lambda: "\n".join(HISTOGRAM.lines()) + "\n") as b,
        MetricsExporter(lambda: "\n".join(PLAIN.lines()) + "\n") as c,
        prometheus_server(
            tmp_path_factory.mktemp("prom"), [a.address, b.address, c.address], settle_s=4.5
        ) as url,
    ):
        yield Stack(url, a.address, b.address, c.address)


def read(stack: Stack, **kwargs: object) -> Reading:
    source = PrometheusSource(stack.url, rate_window=WINDOW, timeout_s=5.0, **kwargs)  # type: ignore[arg-type]
    try:
        return source.read()
    finally:
        source.close()


def test_dcgm_slots_and_gpus_per_mig_slice_and_whole_gpu(prom_stack: Stack) -> None:
    r = read(prom_stack)
    assert r.health is Health.OK, r.error
    slots = {s.id: s for s in r.slots}
    assert set(slots) == {"node-a/gpu0/gi1", "node-a/gpu0/gi2", "node-a/gpu1", "node-b/gpu0"}
    gi1 = slots["node-a/gpu0/gi1"]
    assert gi1.kind is SlotKind.MIG
    assert (gi1.gpu_uuid, gi1.gi_id, gi1.profile) == (MIG_UUID, 1, "3g.40gb")
    assert gi1.activity_pct == pytest.approx(42.0)
    assert gi1.activity_metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert gi1.sm_active_pct == pytest.approx(33.0)
    assert gi1.dram_active_pct == pytest.approx(20.0)
    assert (gi1.mem_used_mib, gi1.mem_total_mib) == (12000, 40000)
    assert slots["node-a/gpu0/gi2"].mem_free_mib == pytest.approx(500)
    whole = slots["node-a/gpu1"]
    assert (whole.kind, whole.gi_id, whole.gpu_uuid) == (SlotKind.GPU, None, WHOLE_UUID)
    assert whole.activity_pct == pytest.approx(87.0)
    assert whole.profile == "NVIDIA A100-SXM4-80GB"
    # DCGM 4.6+ spelling: lower-case hostname label, memory in bytes
    new = slots["node-b/gpu0"]
    assert (new.host, new.gpu_name) == ("node-b", "NVIDIA H200")
    assert new.mem_used_mib == pytest.approx(1024)
    assert new.mem_total_mib == pytest.approx(4096)
    gpus = {g.uuid: g for g in r.gpus}
    assert gpus[MIG_UUID].mig_enabled is True
    assert (gpus[MIG_UUID].mem_used_mib, gpus[MIG_UUID].mem_total_mib) == (21500, 80000)
    assert gpus[WHOLE_UUID].mig_enabled is None
    assert (gpus[WHOLE_UUID].mem_used_mib, gpus[WHOLE_UUID].mem_total_mib) == (20000, 80000)


def test_slices_join_nvml_on_parent_uuid_and_gpu_instance_id(prom_stack: Stack) -> None:
    # what the NVML source tells of the same slice, under the host name NVML knows
    nvml_slot = Slot(
        id=mig_slot_id("a.example", 0, 1),
        kind=SlotKind.MIG,
        host="a.example",
        gpu_uuid=MIG_UUID,
        gi_id=1,
        mem_used_mib=12345.0,
        mem_total_mib=40960.0,
    )
    nvml = Reading("nvml", Health.OK, time.time(), slots=(nvml_slot,))
    merged = merge_readings([nvml, read(prom_stack)])
    slot = merged.slots["a.example/gpu0/gi1"]
    assert slot.mem_used_mib == 12345.0  # NVML first
    assert slot.activity_pct == pytest.approx(42.0)  # DCGM fills what NVML cannot say
    assert slot.activity_metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert "node-a/gpu0/gi1" not in merged.slots


def test_triton_latency_by_instance(prom_stack: Stack) -> None:
    r = read(prom_stack)
    lat = {s.key: s for s in r.latency}
    assert set(lat) == {prom_stack.dcgm_triton, prom_stack.triton_hist, prom_stack.triton_plain}
    summary = lat[prom_stack.dcgm_triton]
    assert summary.req_per_s == pytest.approx(50.0, rel=0.1)
    assert (summary.p50_ms, summary.p95_ms, summary.p99_ms) == (70.0, 120.0, 180.0)
    assert summary.error_rate == pytest.approx(3.0 / 53.0, rel=0.1)
    reasons = dict(summary.errors_by_reason)
    assert set(reasons) == {"BACKEND", "REJECTED"}
    assert reasons["REJECTED"] == pytest.approx(2.0, rel=0.1)
    assert summary.queue_ms == pytest.approx(5.0, rel=0.05)
    assert summary.compute_ms == pytest.approx(60.0, rel=0.05)
    assert summary.avg_ms == pytest.approx(80.0, rel=0.05)
    assert summary.pending == 3.0
    hist = lat[prom_stack.triton_hist]
    assert hist.p50_ms == pytest.approx(50.0, rel=0.02)
    assert hist.p95_ms == pytest.approx(150.0, rel=0.02)
    assert hist.p99_ms == pytest.approx(190.0, rel=0.02)
    assert hist.queue_ms == pytest.approx(25.0, rel=0.05)
    assert hist.error_rate == 0.0
    plain = lat[prom_stack.triton_plain]
    assert (plain.p50_ms, plain.p95_ms, plain.queue_ms, plain.pending) == (None, None, None, None)
    assert plain.avg_ms == pytest.approx(200.0, rel=0.05)


def test_one_query_per_family(prom_stack: Stack) -> None:
    r = read(prom_stack)
    from gpucon.sources.promql import DEFAULT_QUERIES

    assert r.round_trips == len(DEFAULT_QUERIES)


def test_garbage_is_skipped_and_named_never_raised(prom_stack: Stack) -> None:
    r = read(prom_stack, queries={"gr_engine_active": "garbage_activity"})
    assert r.health is Health.DEGRADED
    assert r.error is not None
    assert "NaN" in r.error or "nan" in r.error
    assert "+5 more" not in r.error
    assert "(+" in r.error  # four bad series, three shown
    # the one good garbage_activity series still counts, and other families still read
    assert {s.id: s.activity_pct for s in r.slots}["node-z/gpu1"] == pytest.approx(25.0)
    assert {s.id for s in r.slots} >= {"node-a/gpu0/gi1", "node-a/gpu1"}
    assert len(r.latency) == 3


def test_a_broken_template_degrades_only_its_family(prom_stack: Stack) -> None:
    r = read(prom_stack, queries={"pending": "sum by (instance (broken"})
    assert r.health is Health.DEGRADED
    assert r.error is not None and r.error.startswith("pending:")
    assert {s.key: s.pending for s in r.latency}[prom_stack.dcgm_triton] is None
    assert len(r.slots) == 4


def test_server_down_is_a_fast_down_reading() -> None:
    source = PrometheusSource(f"http://127.0.0.1:{free_port()}", timeout_s=2.0)
    started = time.perf_counter()
    r = source.read()
    assert time.perf_counter() - started < 2.0
    assert r.health is Health.DOWN
    assert r.error is not None and "127.0.0.1" in r.error
    assert r.round_trips == 1  # gave up at the first refused connection


def test_a_server_that_never_answers_times_out(tmp_path: object) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts connections, never answers
    try:
        port = listener.getsockname()[1]
        source = PrometheusSource(f"http://127.0.0.1:{port}", timeout_s=0.5)
        started = time.perf_counter()
        r = source.read()
        assert time.perf_counter() - started < 1.5
        assert r.health is Health.DOWN
        # what happened, in words, with the time it waited (the read's budget less the connect)
        assert r.error is not None and re.match(r"read timed out after 0\.[1-5]s \(", r.error)
    finally:
        listener.close()


def test_hub_joins_registry_backend_dcgm_slice_and_triton_latency(
    prom_stack: Stack, redis_url: str
) -> None:
    """Config → factory → hub: a slice's activity (DCGM), its backend (Redis registry) and
    that backend's latency (Triton, scraped from the backend's host:port) in one snapshot."""
    import redis

    from gpucon.config import FleetConfig, GpuconConfig, PrometheusConfig, RedisConfig
    from gpucon.session import open_session

    r = redis.Redis.from_url(redis_url)
    r.sadd(keys.BACKENDS, "sdxl-a")
    r.hset("gpucon:backend:sdxl-a", mapping={
        "slot": "node-a/gpu0/gi1", "url": f"http://{prom_stack.dcgm_triton}", "model": "sdxl",
        "weight": "1", "state": "active", "inflight": "2"})  # fmt: skip
    r.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    r.close()
    fleet = FleetConfig(
        name="lab",
        redis=RedisConfig(url=redis_url),
        prometheus=PrometheusConfig(url=prom_stack.url, rate_window=WINDOW),
    )
    config = GpuconConfig(fleets={"lab": fleet}, default_fleet="lab", slo_p95_ms={"sdxl": 100.0})
    hub = open_session(config, read_only=True).hub
    try:
        hub.poll_once()
        snap = hub.tick()
    finally:
        hub.stop()
    assert {s.health for s in snap.sources.values()} == {Health.OK}
    slot = snap.slots["node-a/gpu0/gi1"]
    assert slot.activity_pct == pytest.approx(42.0)
    (backend,) = snap.backends_on(slot.id)
    assert backend.name == "sdxl-a"
    latency = snap.latency["sdxl-a"]  # resolved from the scrape instance by the backend's url
    assert latency.p95_ms == 120.0
    assert snap.slo_p95_ms == {"sdxl-a": 100.0}
    assert any(a.rule == "p95_slo" and a.target == "sdxl-a" for a in snap.alerts)


def test_host_label_is_configurable(prom_stack: Stack) -> None:
    # e.g. Kubernetes, where Hostname holds the exporter pod's name: name another label first
    r = read(prom_stack, host_labels=("device", "Hostname"))
    assert "nvidia1/gpu1" in {s.id for s in r.slots}
