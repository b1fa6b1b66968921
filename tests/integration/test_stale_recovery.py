"""Stale data and prompt recovery against real servers, through the hub's own thread.

A real redis-server is killed and started again on the same port; a real prometheus is
stopped (SIGSTOP) and continued. Within two of the source's cadences of the failure every
value it fed is stale (with its age) and none looks current; within two cadences of the
server's return the source is ``ok`` and its values fresh. Cadences are scaled down (1.5 s)
so the test is short; the bound checked is the two-cadence one, measured on the snapshots'
own clock. Everything waits on conditions with deadlines (it must pass beside a CPU hog).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from gpucon.hub import Hub
from gpucon.model.alerts import Severity
from gpucon.model.fleet import Health
from gpucon.model.snapshot import Snapshot
from gpucon.model.staleness import stale_after_s
from gpucon.sources.prometheus import PrometheusSource
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.latest_snapshot import Snapshots
from tests.helpers.prometheus import (
    MetricsExporter,
    TritonCounters,
    dcgm_series,
    prometheus_process,
)
from tests.helpers.servers import RedisProcess

pytestmark = pytest.mark.integration

CADENCE_S = 1.5
REFRESH_S = 0.1
# two cadences, plus the wait for the next tick: a snapshot shows a change at its tick
BOUND_S = stale_after_s(CADENCE_S) + REFRESH_S
UUID = "GPU-cccccccc-0000-0000-0000-000000000001"


@pytest.fixture
def running() -> Iterator[Callable[[Hub], Snapshots]]:
    hubs: list[Hub] = []

    def start(hub: Hub) -> Snapshots:
        recorder = Snapshots()
        hubs.append(hub)
        hub.start(recorder)
        return recorder

    yield start
    for hub in hubs:
        hub.stop()


# -- redis: killed and started again -----------------------------------------------------------

REDIS_FIELDS = (("backend:b0", "state"), ("backend:b0", "weight"), ("backend:b0", "inflight"),
                ("queue:gen:queue", "lag"), ("queue:gen:queue", "pending"),
                ("queue:gen:queue", "length"))  # fmt: skip


def redis_all_stale(snap: Snapshot) -> bool:
    return all(snap.value_age(e, f) is not None for e, f in REDIS_FIELDS)


def redis_fresh(snap: Snapshot) -> bool:
    return (
        snap.sources["redis"].health is Health.OK and not snap.staleness and ("b0" in snap.backends)
    )


def test_redis_killed_is_stale_within_two_cadences_and_back_within_two_after_restart(
    tmp_path: Path, running: Callable[[Hub], Snapshots]
) -> None:
    with RedisProcess(tmp_path) as server:
        r = redis.Redis.from_url(server.url)
        r.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
        r.xadd("gen:queue", {"p": "1"})
        r.sadd("gpucon:backends", "b0")
        r.hset("gpucon:backend:b0", mapping={"slot": "h/gpu0", "state": "active",
                                             "weight": "1", "inflight": "2"})  # fmt: skip
        r.close()
        source = RedisQueueSource(
            server.url, streams=("gen:queue",), group="g1", cadence_s=CADENCE_S, timeout_s=1.0
        )
        rec = running(Hub([source], refresh_s=REFRESH_S))
        rec.first(redis_fresh, 15.0, "with redis ok", since=0.0)

        server.kill()
        killed = time.time()
        stale = rec.first(redis_all_stale, 10.0, "with every redis value stale", since=killed)
        to_stale = stale.taken_at - killed
        assert stale.sources["redis"].health is Health.DOWN
        # Redis holds the queue: its outage is critical, and says what is unknown
        [outage] = [a for a in stale.alerts if a.key == "stale_source:redis"]
        assert outage.severity is Severity.CRITICAL, outage
        assert outage.message.startswith("queue depth and wait unknown (gen:queue); "), outage
        assert "refused" in outage.message.lower() or "error" in outage.message.lower()
        assert stale.backends["b0"].weight == 1.0  # the last value is kept, marked stale
        # an outage of several cadences: a growing backoff would have delayed the recovery
        time.sleep(3 * CADENCE_S)
        down = rec.after(stale.taken_at)
        assert down and all(redis_all_stale(s) for s in down)  # never looked current again
        assert down[-1].history.last("queue:gen:queue:waiting") is None  # a gap, not a repeat
        assert down[-1].value_age("backend:b0", "state") >= 3 * CADENCE_S  # type: ignore[operator]

        server.start()
        back = time.time()
        fresh = rec.first(
            redis_fresh, 10.0, "with redis ok and fresh after the restart", since=back
        )
        to_fresh = fresh.taken_at - back
        assert not [a for a in fresh.alerts if a.rule == "stale_source"]
        print(f"redis: stale {to_stale:.2f}s after kill, fresh {to_fresh:.2f}s after restart")
        assert to_stale <= BOUND_S, f"stale only {to_stale:.2f}s after the kill"
        assert to_fresh <= BOUND_S, f"fresh only {to_fresh:.2f}s after the restart"
        assert fresh.backends["b0"].inflight == 2
        assert fresh.history.last("queue:gen:queue:waiting") is not None


# -- prometheus: stopped and continued ----------------------------------------------------------

TRITON = TritonCounters(success_per_s=20.0, summary_ms={"0.5": 900.0, "0.95": 1840.0})


def exposition() -> str:
    lines = dcgm_series(host="node-a", gpu=0, uuid=UUID, gi_id=1, profile="3g.40gb")
    return "\n".join([*lines, *TRITON.lines()]) + "\n"


def prom_values(snap: Snapshot) -> list[tuple[str, str]]:
    """(entity, field) of every value the prometheus source gave in this snapshot."""
    pairs: list[tuple[str, str]] = []
    for kind, entities in (("slot", snap.slots), ("gpu", snap.gpus), ("latency", snap.latency)):
        for key, entity in entities.items():
            if "prometheus" not in snap.origins.get(f"{kind}:{key}", ()):
                continue
            for name in type(entity).__struct_fields__:
                value = getattr(entity, name)
                if name not in ("id", "kind", "uuid", "key") and value not in (None, ()):
                    pairs.append((f"{kind}:{key}", name))
    return pairs


def prom_fresh(snap: Snapshot) -> bool:
    lat = next(iter(snap.latency.values()), None)
    return (
        snap.sources["prometheus"].health is Health.OK
        and not snap.staleness
        and lat is not None
        and lat.req_per_s is not None
        and any(s.activity_pct is not None for s in snap.slots.values())
    )


def prom_all_stale(snap: Snapshot) -> bool:
    values = prom_values(snap)
    return bool(values) and all(snap.value_age(e, f) is not None for e, f in values)


def test_prometheus_stopped_is_stale_within_two_cadences_and_fresh_after_sigcont(
    tmp_path: Path, running: Callable[[Hub], Snapshots]
) -> None:
    with (
        MetricsExporter(exposition) as exporter,
        prometheus_process(tmp_path, [exporter.address], settle_s=3.0) as (url, proc),
    ):
        source = PrometheusSource(url, cadence_s=CADENCE_S, timeout_s=1.0, rate_window="15s")
        rec = running(Hub([source], refresh_s=REFRESH_S))
        before = rec.first(prom_fresh, 20.0, "with fresh prometheus values", since=0.0)
        assert len(prom_values(before)) >= 5  # activity, memory, p95, req/s, ... all fed

        os.kill(proc.pid, signal.SIGSTOP)
        try:
            stopped = time.time()
            stale = rec.first(
                prom_all_stale, 10.0, "with every prometheus value stale", since=stopped
            )
            to_stale = stale.taken_at - stopped
            time.sleep(max(0.0, stopped + 4.0 - time.time()))  # stopped 4 s in all
            during = rec.after(stale.taken_at)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        resumed = time.time()
        assert during and all(prom_all_stale(s) for s in during)  # none looked current again
        # latency and rates only: the queue still says whether requests are served, so WARN
        [outage] = [a for a in during[-1].alerts if a.key == "stale_source:prometheus"]
        assert outage.severity is Severity.WARNING
        assert outage.message.startswith("source stale, last good read ")
        (name,) = during[-1].latency
        assert during[-1].history.last(f"backend:{name}:rps") is None  # the plot stops
        age = during[-1].value_age(f"latency:{name}", "req_per_s")
        assert age is not None and age >= 4.0 - CADENCE_S

        fresh = rec.first(
            prom_fresh, 10.0, "with fresh prometheus values after SIGCONT", since=resumed
        )
        to_fresh = fresh.taken_at - resumed
        print(
            f"prometheus: stale {to_stale:.2f}s after SIGSTOP, fresh {to_fresh:.2f}s after SIGCONT"
        )
        assert to_stale <= BOUND_S, f"stale only {to_stale:.2f}s after SIGSTOP"
        assert to_fresh <= BOUND_S, f"fresh only {to_fresh:.2f}s after SIGCONT"
