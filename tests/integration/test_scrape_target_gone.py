"""Prometheus up, but one backend's target gone from its config: the backend's P95 and REQ/S
went ``n/a`` and nothing said why; worse, with one target left on its host it took that
target's ``up=1`` (its neighbour's) and read as serving on its word. Now it has no ``up``, and
``not_scraped`` (WARN, on the backend) says Prometheus no longer scrapes it, while the other
backend, still scraped, raises nothing.

Real components: the ``prometheus`` binary scraping two exporters the test serves, its config
rewritten and reloaded (SIGHUP) as an operator's edit would be; ``PrometheusSource`` read by a
``Hub`` beside a source that lists the two backends, as the registry would.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpucon.hub import Hub
from gpucon.model.alert_base import Severity
from gpucon.model.fleet import Backend, Health
from gpucon.model.reading import Reading
from gpucon.model.snapshot import Snapshot
from gpucon.sources.prometheus import PrometheusSource
from tests.helpers.prometheus import MetricsExporter, prometheus_process
from tests.helpers.servers import poll_until

pytestmark = pytest.mark.integration


class Registry:
    """The two backends, at the exporters' addresses (what the scheduler registry lists)."""

    name = "registry"
    cadence_s = 0.5
    timeout_s = 1.0

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls

    def read(self) -> Reading:
        backends = tuple(Backend(name, url=url) for name, url in self.urls.items())
        return Reading(self.name, Health.OK, time.time(), backends=backends)

    def close(self) -> None:
        pass


def tick_until(hub: Hub, check: Callable[[Snapshot], bool], timeout_s: float) -> Snapshot:
    def tick() -> Snapshot:
        hub.poll_once()
        return hub.tick()

    return poll_until(tick, check, timeout_s, every_s=0.5)


def test_a_backend_whose_target_was_removed_is_named_not_scraped(tmp_path: Path) -> None:
    metrics = '# TYPE nv_inference_count counter\nnv_inference_count{model="m"} 1\n'
    with MetricsExporter(lambda: metrics) as kept, MetricsExporter(lambda: metrics) as dropped:
        urls = {"b0": f"http://{kept.address}", "b1": f"http://{dropped.address}"}
        with prometheus_process(tmp_path, [kept.address, dropped.address], settle_s=0.5) as (
            url,
            proc,
        ):
            prometheus = PrometheusSource(url, cadence_s=0.5, timeout_s=2.0)
            hub = Hub([Registry(urls), prometheus], refresh_s=0.5)
            try:
                both = tick_until(
                    hub, lambda s: len([lv for lv in s.liveness.values() if lv.prom_up]) == 2, 15.0
                )
                assert {n for n, lv in both.liveness.items() if lv.prom_up} == {"b0", "b1"}
                assert not [a for a in both.alerts if a.rule == "not_scraped"]

                config = tmp_path / "prometheus.yml"
                text = config.read_text()
                config.write_text(text.replace(f", '{dropped.address}'", ""))
                proc.send_signal(signal.SIGHUP)  # as `systemctl reload prometheus` does
                gone = tick_until(
                    hub, lambda s: any(a.rule == "not_scraped" for a in s.alerts), 20.0
                )
                (alert,) = [a for a in gone.alerts if a.rule == "not_scraped"]
                assert (alert.target, alert.severity) == ("b1", Severity.WARNING)
                assert alert.message.startswith(
                    f"Prometheus no longer scrapes it (http://{dropped.address}): no up series"
                )
                assert gone.liveness["b0"].prom_up is True  # still scraped: nothing said
                # the one target left on the host is b0's own: b1 is not vouched for by it
                # (it took b0's up=1 and read "serving" on its neighbour's word)
                assert gone.liveness["b1"].prom_up is None
            finally:
                prometheus.close()
