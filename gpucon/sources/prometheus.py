"""PrometheusSource: per-slice activity and memory from DCGM, latency from Triton, via PromQL.

One instant query per metric family (gpucon.sources.promql), whatever the fleet size, through
prometheus-api-client's ``custom_query`` with a timeout; the client (0.24 s to import) is
imported inside ``read``, which the hub calls in a worker thread. The whole read shares one
deadline of ``timeout_s``; an unreachable server ends the read at once (``down``); a family
whose query fails or returns garbage is skipped and named in the error (``degraded``).
Retries are off: the hub's backoff decides when to try again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpucon.model.fleet import Health
from gpucon.model.liveness import TargetUp
from gpucon.model.reading import Reading, failed_reading
from gpucon.redact import redact
from gpucon.sources.base import describe_error
from gpucon.sources.connect import HttpAuth, prometheus_client
from gpucon.sources.net_errors import network_cause
from gpucon.sources.problems import Problems
from gpucon.sources.prom_parse import HOST_LABELS, parse_dcgm
from gpucon.sources.prom_triton import parse_triton
from gpucon.sources.prom_up import (
    UP_FAMILY,
    DownDates,
    down_since_query,
    parse_down_since,
    parse_up,
)
from gpucon.sources.promql import DCGM_FAMILIES, render_queries, window_seconds

Results = dict[str, Sequence[Mapping[str, Any]]]
QUERY_THREADS = 4


class PrometheusSource:
    """Reads dcgm-exporter and Triton series from one Prometheus server."""

    name = "prometheus"

    def __init__(
        self,
        url: str = "http://127.0.0.1:9090",
        queries: Mapping[str, str] | None = None,
        cadence_s: float = 5.0,
        timeout_s: float = 4.0,
        rate_window: str = "1m",
        host_labels: Sequence[str] = HOST_LABELS,
        auth: HttpAuth | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.auth = auth
        self.cadence_s = cadence_s
        self.timeout_s = timeout_s
        self.queries = render_queries(queries or {}, rate_window)
        # shown beside the rates ("REQ/S 1m"): LatencyStats.rate_window_s
        self.rate_window_s = window_seconds(rate_window)
        self.host_labels = tuple(host_labels)
        self._client: Any = None
        self._lock = threading.Lock()
        self._down_dates = DownDates()

    def _connect(self) -> Any:
        if self._client is None:
            from urllib3.util.retry import Retry

            self._client = prometheus_client(
                self.url, self.auth, retry=Retry(total=0, raise_on_status=False)
            )
        return self._client

    def read(self) -> Reading:
        started = time.time()
        perf = time.perf_counter()
        deadline = perf + self.timeout_s
        with self._lock:
            try:
                client = self._connect()
            except Exception as exc:  # the client library itself is broken or missing
                return failed_reading(
                    self.name, started, time.perf_counter() - perf, describe_error(exc)
                )
            results, failures, round_trips, fatal = self._query_all(client, deadline)
        duration = time.perf_counter() - perf
        if fatal is not None:
            return Reading(
                self.name, Health.DOWN, started, duration, fatal, round_trips=round_trips
            )
        problems = Problems()
        for text in failures:
            problems.add(text)
        target_up = parse_up(results.pop(UP_FAMILY, ()), problems)
        if target_up:
            round_trips += self._date_outages(target_up, deadline, problems)
            target_up = self._down_dates.dated(target_up)
        dcgm = {f: r for f, r in results.items() if f in DCGM_FAMILIES}
        triton = {f: r for f, r in results.items() if f not in DCGM_FAMILIES}
        gpus, slots = parse_dcgm(dcgm, problems, self.host_labels)
        latency = parse_triton(triton, problems, self.rate_window_s)
        error = problems.summary()
        return Reading(
            source=self.name,
            health=Health.DEGRADED if error else Health.OK,
            taken_at=started,
            duration_s=duration,
            error=error,
            gpus=tuple(gpus),
            slots=tuple(slots),
            latency=tuple(latency),
            target_up=tuple(target_up),
            round_trips=round_trips,
        )

    def _date_outages(self, targets: list[TargetUp], deadline: float, problems: Problems) -> int:
        """Ask when each newly down target was last up (once per outage); the queries sent."""
        asked = self._down_dates.undated(targets)
        remaining = deadline - time.perf_counter()
        if not asked or remaining <= 0 or self._client is None:
            return 0
        try:
            data = self._client.custom_query(down_since_query(asked), timeout=remaining)
        except Exception as exc:  # undated this read; asked again next read
            problems.add(f"up (down since): {describe_error(exc)[:200]}")
            return 1
        series = [s for s in data if type(s) is dict] if isinstance(data, list) else []
        self._down_dates.learn(asked, parse_down_since(series, problems))
        return 1

    def _query_all(
        self, client: Any, deadline: float
    ) -> tuple[Results, list[str], int, str | None]:
        """(results by family, per-family failures, queries sent, fatal error or None).

        The first query goes alone, so an unreachable server costs one attempt; the rest go
        out together on a few threads, so the read takes about as long as the slowest one.
        """
        import requests

        results: Results = {}
        failures: list[str] = []
        families = list(self.queries.items())

        def one(family: str, promql: str) -> str | None:
            """Query one family; the fatal error text if the server cannot be reached."""
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return f"read timed out ({self.timeout_s:.1f}s)"
            try:
                data = client.custom_query(promql, timeout=remaining)
            except (requests.ConnectionError, requests.Timeout) as exc:
                # what happened first (an alert line is cut at the panel's edge), then where
                return f"{network_cause(exc)} ({redact(self.url)})"
            except Exception as exc:  # a bad template or a server error: skip this family
                failures.append(f"{family}: {describe_error(exc)[:200]}")
                return None
            if isinstance(data, list):
                results[family] = [s for s in data if type(s) is dict]
            else:
                failures.append(f"{family}: expected a vector, got {type(data).__name__}")
            return None

        if not families:
            return results, failures, 0, None
        fatal = one(*families[0])
        if fatal is not None or len(families) == 1:
            return results, failures, 1, fatal
        pool = ThreadPoolExecutor(max_workers=QUERY_THREADS, thread_name_prefix="gpucon-promql")
        try:
            outcomes = list(pool.map(lambda item: one(*item), families[1:]))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        fatal = next((f for f in outcomes if f is not None), None)
        # keep the families' order, whichever thread finished first
        ordered = {f: results[f] for f, _ in families if f in results}
        return ordered, sorted(failures), len(families), fatal

    def close(self) -> None:
        # no lock: a read in flight keeps its own reference and ends by its deadline
        client, self._client = self._client, None
        session = getattr(client, "_session", None)
        if session is not None:
            session.close()
