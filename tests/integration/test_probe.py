"""The load probe: bounds refused before anything is sent (naming the field), and its numbers
checked against a real KServe v2 backend on loopback with a known service time; through the
queue with the real scheduler; and as an action under the guard (audit has the result).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from gpucon.actions import probe as probe_action
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import ProgressEvent, StepStatus, Tier
from gpucon.actions.probe_verdict import verdict
from gpucon.config import ProbeTarget
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.probe import (
    STOP_AFTER_CONNECT_ERRORS,
    ProbeBounds,
    ProbeProgress,
    check_bounds,
    is_stable,
    quantile,
    run_probe,
    window_rates,
)
from gpucon.controls.probe_live import DirectSender, LiveProber
from gpucon.controls.registry import RedisRegistry
from gpucon.errors import BadParams
from gpucon.lab.backend_server import BackendServer
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.lab.service_time import ServiceTimeModel
from gpucon.model.snapshot import Snapshot

pytestmark = pytest.mark.integration

TARGET = ProbeTarget("t1", "http://127.0.0.1:9", "llm", max_requests=100, max_rate_per_s=50,
                     max_concurrency=4, max_duration_s=10)  # fmt: skip


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"count": 101}, "count"),
        ({"count": 0}, "count"),
        ({"count": 2.5}, "count"),
        ({"count": "many"}, "count"),
        ({"rate": 51}, "rate"),
        ({"rate": 0}, "rate"),
        ({"rate": float("nan")}, "rate"),
        ({"concurrency": 5}, "concurrency"),
        ({"concurrency": -1}, "concurrency"),
        ({"duration": 11}, "duration"),
        ({"duration": float("inf")}, "duration"),
        ({"duration": 0}, "duration"),
        ({"timeout": -1}, "timeout"),
    ],
)
def test_bad_bounds_are_refused_naming_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(BadParams) as info:
        check_bounds(TARGET, params)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")


def test_plan_takes_targets_only_from_the_config() -> None:
    snap = Snapshot(taken_at=0.0)
    with pytest.raises(BadParams, match="target: 'elsewhere' is not a configured probe target"):
        probe_action.plan(snap, {"target": "elsewhere", "probe_targets": (TARGET,)})
    with pytest.raises(BadParams) as info:
        probe_action.plan(snap, {"target": "t1", "probe_targets": (TARGET,), "rate": 1000})
    assert info.value.field == "rate" and "max_rate_per_s" in str(info.value)
    plan = probe_action.plan(snap, {"target": "t1", "probe_targets": (TARGET,), "count": 10})
    assert plan.tier is Tier.REVERSIBLE and plan.ok
    assert plan.params["count"] == 10 and plan.params["target"]["url"] == TARGET.url
    queued = probe_action.plan(
        snap, {"target": "t1", "probe_targets": (TARGET,), "via_queue": True}
    )
    assert not queued.ok  # no redis configured, no active backend
    assert {p.name for p in queued.failed_preconditions} == {"queue", "serving"}


def test_stability_and_quantiles() -> None:
    assert is_stable((10.0, 10.5, 9.8)) is True
    assert is_stable((1.0, 10.0, 10.5, 9.6)) is True  # only the last three count
    assert is_stable((10.0, 12.0, 9.0)) is False
    assert is_stable((10.0, 10.0)) is None
    assert quantile([], 0.5) is None
    values = [float(v) for v in range(1, 101)]
    assert (quantile(values, 0.5), quantile(values, 0.95), quantile(values, 0.99)) == (
        50.0, 95.0, 99.0,
    )  # fmt: skip
    assert window_rates([0.1, 0.2, 1.5, 2.5, 3.9], 0.0, 3.0, 1.0) == (2.0, 1.0, 1.0)


@contextlib.asynccontextmanager
async def backend(service_ms: float, slots: int = 64) -> AsyncIterator[BackendServer]:
    server = BackendServer("b0", "llm", ServiceTimeModel(service_ms, 0.0, slots, 0.0))
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def test_probe_stats_match_a_backend_with_known_service_time() -> None:
    async with backend(40.0) as server:
        seen: list[ProbeProgress] = []
        bounds = ProbeBounds(count=140, rate_per_s=40.0, concurrency=8, duration_s=10.0)
        result = await run_probe(
            DirectSender(server.url, "llm", 5.0, 8), bounds, target="b0", mode="direct",
            on_progress=seen.append, window_s=1.0,
        )  # fmt: skip
    assert (result.sent, result.succeeded, result.errors) == (140, 140, {})
    assert len(server.served) == 140
    p50, p99 = result.latency_ms["p50"], result.latency_ms["p99"]
    assert p50 is not None and p99 is not None
    assert 40.0 <= p50 <= 100.0 and p50 <= p99 <= 250.0  # never below the service time
    assert result.offered_rate is not None and result.achieved_rate is not None
    assert 36.0 <= result.offered_rate <= 41.0
    assert 30.0 <= result.achieved_rate <= 41.0  # 140 answers over ~3.5 s + one service time
    # full 1 s windows while sending (3.5 s): ~40 answers in each, stable by the 10 % rule
    assert len(result.window_rates) == 3
    assert all(34.0 <= w <= 44.0 for w in result.window_rates)
    assert result.stable is True
    assert seen[-1].completed == 140 and [p.completed for p in seen] == sorted(
        p.completed for p in seen
    )


async def test_concurrency_bound_caps_the_achieved_rate() -> None:
    # one at a time against 50 ms: at most ~20/s whatever rate was asked for
    async with backend(50.0) as server:
        bounds = ProbeBounds(count=30, rate_per_s=50.0, concurrency=1, duration_s=10.0)
        result = await run_probe(
            DirectSender(server.url, "llm", 5.0, 1), bounds, target="b0", mode="direct"
        )
    assert result.succeeded == 30
    assert result.offered_rate is not None and result.achieved_rate is not None
    assert result.offered_rate < 21.0 and result.achieved_rate < 21.0


async def test_a_backend_slowing_down_mid_probe_is_reported_unstable() -> None:
    async with backend(20.0) as server:

        async def slow_down() -> None:
            await asyncio.sleep(1.5)
            server.service = ServiceTimeModel(150.0, 0.0, 64, 0.0)

        changer = asyncio.create_task(slow_down())
        bounds = ProbeBounds(count=45, rate_per_s=20.0, concurrency=1, duration_s=10.0)
        result = await run_probe(
            DirectSender(server.url, "llm", 5.0, 1), bounds, target="b0", mode="direct",
            window_s=1.0,
        )  # fmt: skip
        await changer
    assert result.succeeded == 45
    assert len(result.window_rates) >= 3
    assert result.window_rates[0] > 15.0 and result.window_rates[-1] < 8.0
    assert result.stable is False


async def test_duration_bound_stops_sending_and_errors_are_counted_by_reason() -> None:
    async with backend(1.0) as server:
        server.ready = False
        bounds = ProbeBounds(count=1000, rate_per_s=40.0, concurrency=4, duration_s=0.5)
        started = time.perf_counter()
        result = await run_probe(
            DirectSender(server.url, "llm", 5.0, 4), bounds, target="b0", mode="direct"
        )
    assert time.perf_counter() - started < 2.0
    assert 10 <= result.sent <= 21  # 20 due before the deadline; fewer if the loop lags
    assert result.succeeded == 0 and result.errors == {"http 503": result.sent}
    assert result.latency_ms["p50"] is None and result.achieved_rate == 0.0
    bounds = ProbeBounds(count=3, rate_per_s=10.0, concurrency=1, duration_s=5.0, timeout_s=1.0)
    unreachable = await run_probe(
        DirectSender("http://127.0.0.1:9", "llm", 1.0, 1), bounds, target="x", mode="direct"
    )
    assert unreachable.errors == {"connect: ConnectError": 3}
    assert unreachable.stopped_early is None  # under the streak that stops a probe


async def test_a_probe_stops_after_the_first_connection_failures_with_no_answer() -> None:
    bounds = ProbeBounds(count=200, rate_per_s=50.0, concurrency=1, duration_s=10.0)
    started = time.perf_counter()
    result = await run_probe(
        DirectSender("http://127.0.0.1:9", "llm", 1.0, 1), bounds, target="x", mode="direct"
    )
    assert time.perf_counter() - started < 2.0  # not the 4 s 200 requests at 50/s take
    assert result.sent == STOP_AFTER_CONNECT_ERRORS
    assert result.errors == {"connect: ConnectError": STOP_AFTER_CONNECT_ERRORS}
    assert result.stopped_early is not None and "stopped early" in result.stopped_early
    judged = verdict(result.to_dict(), slo_p95_ms=None)
    assert judged.kind == "failing" and judged.text.endswith(
        f"stopped early ({STOP_AFTER_CONNECT_ERRORS} of 200 requests sent)"
    )


@pytest.fixture
def registry_client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    yield c
    c.close()


async def test_probe_action_through_the_queue_under_the_guard(
    redis_url: str, registry_client: redis.Redis, tmp_path: Path
) -> None:
    from gpucon.actions.registry_snapshot import read_registry
    from gpucon.lab.scheduler import Scheduler, SchedulerConfig

    async with backend(10.0) as server:
        register_backends(registry_client, [BackendRecord("b0", server.url, "llm", "h/gpu0", 1.0)])
        stop = asyncio.Event()
        sched = asyncio.create_task(Scheduler(SchedulerConfig(redis_url)).run(stop))
        target = ProbeTarget("b0", server.url, "llm")
        snapshot, _v = read_registry(registry_client)
        plan = probe_action.plan(
            snapshot,
            {"target": "b0", "probe_targets": (target,), "via_queue": True,
             "redis_url": redis_url, "count": 30, "rate": 20, "concurrency": 4},
        )  # fmt: skip
        assert plan.ok
        registry = RedisRegistry.from_url(redis_url)
        controls = Controls(
            registry=registry,
            audit=AuditLog(tmp_path / "audit.jsonl", stream=registry.append_audit),
            operator="tester@lab",
            prober=LiveProber(),
        )
        events: list[ProgressEvent] = []
        try:
            outcome = await asyncio.to_thread(
                execute, probe_action.apply, plan, controls, events.append
            )
        finally:
            controls.close()
            stop.set()
            await sched
    assert outcome.ok, outcome.message
    assert outcome.details["mode"] == "queue" and outcome.details["succeeded"] == 30
    assert len(server.served) == 30  # every probe request went through the scheduler
    assert any(e.status is StepStatus.RUNNING and e.fraction for e in events)
    records = read_audit(tmp_path / "audit.jsonl")
    assert [r.event for r in records] == ["intent", "step", "step", "outcome"]
    assert "30/30 ok" in records[2].text and "p95" in records[2].text
    stream: Any = registry_client.xrange("gpucon:audit")
    assert any("30/30 ok" in json.dumps(fields) for _id, fields in stream)


async def test_progress_from_the_first_send_and_no_offered_rate_from_one_send() -> None:
    # one request to a backend that takes 0.8 s: progress at once, and ticks while it waits
    async with backend(800.0) as server:
        seen: list[ProbeProgress] = []
        bounds = ProbeBounds(count=1, rate_per_s=20.0, concurrency=1, duration_s=5.0)
        result = await run_probe(
            DirectSender(server.url, "llm", 5.0, 1), bounds, target="b0", mode="direct",
            on_progress=seen.append,
        )  # fmt: skip
    first = seen[0]
    assert (first.sent, first.completed, first.errors, first.p50_ms) == (1, 0, 0, None)
    assert any(p.completed == 0 and p.elapsed_s >= 0.4 for p in seen)  # the wait is reported
    assert seen[-1].completed == 1 and (seen[-1].p50_ms or 0.0) >= 800.0
    # one send has no rate: not 1 / (a few microseconds)
    assert result.sent == 1 and result.offered_rate is None and result.succeeded == 1
    assert result.to_dict()["offered_rate"] is None
