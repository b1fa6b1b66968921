"""A real ``prometheus`` on loopback, scraping an exporter that the test serves.

``MetricsExporter`` serves Prometheus text from a callable (http.server in a thread), so a
test decides the dcgm-exporter- and Triton-shaped series it scrapes. ``prometheus_server``
starts the real binary with a tmp TSDB, a 1 s scrape interval and the exporters as targets,
and waits until every target has been scraped.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.helpers.servers import free_port, wait_until


class MetricsExporter:
    """Serves ``/metrics`` from ``render()`` on a free loopback port."""

    def __init__(self, render: Callable[[], str]) -> None:
        self.render = render
        self.scrapes = 0
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.render().encode()
                exporter.scrapes += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host!s}:{port}"

    def __enter__(self) -> MetricsExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def query(url: str, promql: str, timeout_s: float = 2.0) -> list[dict[str, object]]:
    """An instant query through the HTTP API (the fixture's own readiness check)."""
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=timeout_s) as resp:
        result: list[dict[str, object]] = json.load(resp)["data"]["result"]
    return result


@contextlib.contextmanager
def prometheus_server(
    tmp_dir: Path,
    targets: Sequence[str],
    scrape_interval_s: float = 1.0,
    settle_s: float = 2.5,
) -> Iterator[str]:
    """A real ``prometheus`` scraping ``targets`` (host:port); yields its URL once all are up.

    ``settle_s``: how long to keep scraping before yielding, so that ``rate()`` windows up to
    about that length are full.
    """
    with prometheus_process(tmp_dir, targets, scrape_interval_s, settle_s) as (url, _):
        yield url


@contextlib.contextmanager
def prometheus_process(
    tmp_dir: Path,
    targets: Sequence[str],
    scrape_interval_s: float = 1.0,
    settle_s: float = 2.5,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``prometheus_server``, yielding its URL and its process (to stop and continue it)."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise RuntimeError("prometheus is not installed (apt-get install -y prometheus)")
    port = free_port()
    config = tmp_dir / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {round(scrape_interval_s * 1000)}ms\n"
        f"  scrape_timeout: {round(scrape_interval_s * 1000)}ms\n"
        "scrape_configs:\n"
        "  - job_name: fleet\n"
        "    static_configs:\n"
        f"      - targets: [{', '.join(repr(t) for t in targets)}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_dir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_dir / "prometheus.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    log = tmp_dir / "prometheus.log"

    def all_targets_up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text()[-500:]}")
        return len(query(url, "up == 1")) == len(targets)

    try:
        wait_until(
            all_targets_up,
            timeout_s=30.0,
            what="prometheus scraping its targets",
        )
        time.sleep(settle_s)
        yield url, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)  # a stopped server cannot act on SIGTERM
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


# -- exposition text shaped like dcgm-exporter and Triton ------------------------------------


def _labels(**labels: object) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def dcgm_series(
    *,
    host: str,
    gpu: int,
    uuid: str,
    model: str = "NVIDIA A100-SXM4-80GB",
    gi_id: int | None = None,
    profile: str | None = None,
    gr_active: float = 0.5,
    sm_active: float = 0.4,
    dram_active: float = 0.3,
    fb_used_mib: float = 1000.0,
    fb_free_mib: float = 9000.0,
    host_label: str = "Hostname",
    bytes_names: bool = False,
) -> list[str]:
    """One GPU's (or MIG slice's) dcgm-exporter lines.

    ``host_label`` "hostname" is DCGM 4.6's exporter; ``bytes_names`` the DCGM 4.7 exporter's
    memory in bytes (``DCGM_FI_DEV_FB_USED_BYTES``, ``DCGM_FI_DEV_FB_CAPACITY_BYTES``).
    """
    labels: dict[str, object] = {"gpu": gpu, "UUID": uuid, "device": f"nvidia{gpu}"}
    labels["modelName"] = model
    if gi_id is not None:
        labels["GPU_I_PROFILE"] = profile or ""
        labels["GPU_I_ID"] = gi_id
    labels[host_label] = host
    text = _labels(**labels)
    lines = [
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{text} {gr_active}",
        f"DCGM_FI_PROF_SM_ACTIVE{text} {sm_active}",
        f"DCGM_FI_PROF_DRAM_ACTIVE{text} {dram_active}",
    ]
    if bytes_names:
        mib = 1024 * 1024
        lines.append(f"DCGM_FI_DEV_FB_USED_BYTES{text} {int(fb_used_mib * mib)}")
        total = int((fb_used_mib + fb_free_mib) * mib)
        lines.append(f"DCGM_FI_DEV_FB_CAPACITY_BYTES{text} {total}")
    else:
        lines.append(f"DCGM_FI_DEV_FB_USED{text} {fb_used_mib}")
        lines.append(f"DCGM_FI_DEV_FB_FREE{text} {fb_free_mib}")
    return lines


def dcgm_health_series(
    *,
    host: str,
    gpu: int,
    uuid: str,
    temp_c: float = 45.0,
    power_w: float = 250.0,
    power_limit_w: float | None = 400.0,
    util_pct: float = 60.0,
    xid: int = 0,
    gi_id: int | None = None,
    limit_name: str = "DCGM_FI_DEV_POWER_MGMT_LIMIT",
) -> list[str]:
    """A GPU's health lines as dcgm-exporter writes them (temperature, power, util, last XID).

    With ``gi_id`` the lines carry a MIG instance's labels, as the exporter repeats device
    fields on each GPU instance of a MIG GPU.
    """
    labels: dict[str, object] = {"gpu": gpu, "UUID": uuid, "device": f"nvidia{gpu}"}
    labels["modelName"] = "NVIDIA H100 80GB HBM3"
    if gi_id is not None:
        labels["GPU_I_PROFILE"] = "1g.10gb"
        labels["GPU_I_ID"] = gi_id
    labels["Hostname"] = host
    text = _labels(**labels)
    lines = [
        f"DCGM_FI_DEV_GPU_TEMP{text} {temp_c}",
        f"DCGM_FI_DEV_POWER_USAGE{text} {power_w}",
        f"DCGM_FI_DEV_GPU_UTIL{text} {util_pct}",
        f"DCGM_FI_DEV_XID_ERRORS{text} {xid}",
    ]
    if power_limit_w is not None:
        lines.append(f"{limit_name}{text} {power_limit_w}")
    return lines


class TritonCounters:
    """Triton's counters as they grow at fixed rates since ``t0`` (a real clock)."""

    def __init__(
        self,
        *,
        model: str = "sdxl",
        success_per_s: float = 50.0,
        failures_per_s: dict[str, float] | None = None,
        avg_ms: float = 80.0,
        queue_ms: float | None = 5.0,
        compute_ms: float | None = 60.0,
        pending: float | None = 3.0,
        summary_ms: dict[str, float] | None = None,
        histogram: bool = False,
        extra_labels: dict[str, str] | None = None,
        version: str = "1",
        buckets: tuple[tuple[float | str, float], ...] | None = None,
    ) -> None:
        self.t0 = time.time() - 30.0  # counters already running: no reset at start
        self.model = model
        self.success_per_s = success_per_s
        self.failures_per_s = failures_per_s or {}
        self.avg_ms = avg_ms
        self.queue_ms = queue_ms
        self.compute_ms = compute_ms
        self.pending = pending
        self.summary_ms = summary_ms
        self.histogram = histogram
        self.extra = extra_labels or {}
        self.version = version
        if buckets is not None:
            self.buckets = buckets

    # cumulative share of requests at or under each bucket bound (us)
    buckets: tuple[tuple[float | str, float], ...] = (
        (10_000, 0.1), (50_000, 0.5), (100_000, 0.9), (200_000, 1.0), ("+Inf", 1.0),
    )  # fmt: skip

    def lines(self) -> list[str]:
        elapsed = time.time() - self.t0
        n = self.success_per_s * elapsed
        base = {"model": self.model, "version": self.version, **self.extra}
        text = _labels(**base)
        out = [
            f"nv_inference_request_success{text} {n:.3f}",
            f"nv_inference_count{text} {n:.3f}",
            f"nv_inference_request_duration_us{text} {n * self.avg_ms * 1000:.1f}",
        ]
        for reason, per_s in self.failures_per_s.items():
            failed = _labels(**base, reason=reason)
            out.append(f"nv_inference_request_failure{failed} {per_s * elapsed:.3f}")
        if self.queue_ms is not None:
            out.append(f"nv_inference_queue_duration_us{text} {n * self.queue_ms * 1000:.1f}")
        if self.compute_ms is not None:
            out.append(
                f"nv_inference_compute_infer_duration_us{text} {n * self.compute_ms * 1000:.1f}"
            )
        if self.pending is not None:
            out.append(f"nv_inference_pending_request_count{text} {self.pending}")
        for q, ms in (self.summary_ms or {}).items():
            out.append(f"nv_inference_request_summary_us{_labels(**base, quantile=q)} {ms * 1000}")
        if self.histogram:
            for le, share in self.buckets:
                bucket = _labels(**base, le=le)
                out.append(f"nv_inference_request_duration_us_bucket{bucket} {n * share:.3f}")
        return out


# -- reading an exposition back: what a test expects Prometheus to compute ---------------------

_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line in Prometheus text format."""
    samples = []
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None or line.startswith("#"):
            continue
        name, labels, value = match.groups()
        samples.append((name, dict(_LABEL.findall(labels or "")), float(value)))
    return samples


def sample_sum(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (PromQL ``sum``)."""
    return sum(
        v for n, lbl, v in samples if n == name and all(lbl.get(k) == x for k, x in labels.items())
    )


def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus's ``histogram_quantile`` over cumulative bucket counts by upper bound.

    Linear interpolation inside the bucket holding rank q * total; the first bucket starts at
    0; a rank in the +Inf bucket gives the largest finite bound.
    """
    bounds = sorted(buckets)
    total = buckets[math.inf]
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if bound == math.inf:
                return previous_bound
            share = (rank - previous_count) / (count - previous_count)
            return previous_bound + (bound - previous_bound) * share
        previous_bound, previous_count = bound, count
    return previous_bound
