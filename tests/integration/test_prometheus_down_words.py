"""A Prometheus that cannot be read is said in words an on-call engineer can act on, first:
``read timed out after 1.0s (http://...)``, ``connection refused (http://...)``, not the
requests/urllib3 chain whose first 60 characters are the pool's host and port. And the alerts
panel, with lines to spare, shows a long message whole on the lines under it."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator

import pytest

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.model.alert_base import AlertThresholds
from gpucon.model.fleet import Health
from gpucon.sources.prometheus import PrometheusSource
from gpucon.widgets.panels import AlertsPanel
from tests.helpers.servers import free_port


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server on loopback that accepts and never answers (a SIGSTOPped Prometheus: the
    kernel still completes the handshake into the listen backlog)."""
    sock = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_a_silent_prometheus_reads_as_a_read_timeout_with_its_url(silent_server: str) -> None:
    source = PrometheusSource(silent_server, timeout_s=1.0)
    try:
        reading = source.read()
    finally:
        source.close()
    assert reading.health is Health.DOWN
    assert reading.error is not None
    assert reading.error.startswith("read timed out after "), reading.error
    assert reading.error.endswith(f"s ({silent_server})")
    assert "HTTPConnectionPool" not in reading.error and "Max retries" not in reading.error


def test_a_closed_port_reads_as_connection_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    source = PrometheusSource(url, timeout_s=1.0)
    try:
        reading = source.read()
    finally:
        source.close()
    assert reading.error == f"connection refused ({url})"


async def test_the_stale_alert_says_why_within_150_columns(silent_server: str) -> None:
    prometheus = PrometheusSource(silent_server, cadence_s=0.25, timeout_s=0.5)
    hub = Hub([prometheus], refresh_s=0.25, thresholds=AlertThresholds(stale_after_s=1.0))
    try:
        deadline = time.monotonic() + 20
        while True:  # until its first read is out of time: then the stale alert is raised
            hub.poll_once()
            snapshot = hub.tick()
            if any(a.target == "prometheus" for a in snapshot.alerts):
                break
            assert time.monotonic() < deadline, "no stale_source alert"
            time.sleep(0.1)
        app = GpuconApp(hub, autostart=False, mode="live", read_only=True)
        async with app.run_test(size=(150, 40)) as pilot:
            await pilot.pause()
            panel = app.screen.query_one(AlertsPanel)
            lines = [panel.render_line(y).text.rstrip() for y in range(panel.size.height)]
    finally:
        prometheus.close()
    text = " ".join(" ".join(lines).split())
    # what is stale, since when, and why are all on screen (the cut line ended at the URL)
    # (a read timeout, or a connect timeout once the silent server's backlog is full)
    assert "prometheus source stale, never read: " in text, lines
    assert re.search(r"timed out after 0\.[1-5]s", text), lines
    assert silent_server in text, lines
