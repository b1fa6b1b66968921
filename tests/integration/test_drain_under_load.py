"""Drain a backend under steady load on the real stack (redis-server, the reference scheduler
and KServe v2 backends as child processes), with the real drain action through the guard.

After the drain's first step (state=draining) no new entry is assigned to the backend; after
the plan has applied no request reaches it at all; and every request sent into the queue is
answered exactly once — nothing lost, nothing twice.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from gpucon.actions.drain import apply_drain, apply_undrain, plan_drain, plan_undrain
from gpucon.actions.guard import execute
from gpucon.actions.plan import ProgressEvent, StepStatus
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.traffic import TrafficSpec, generate
from gpucon.registry import keys
from tests.helpers.lab_stack import served, start_lab

pytestmark = pytest.mark.integration

TARGET = "lab-b1"


def drain_now(redis_url: str, audit: Path, marks: dict[str, float]) -> Any:
    """Plan on the registry as it is and apply through the guard; note when each step ended."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    snapshot, _version = read_registry(client)
    client.close()
    plan = plan_drain(snapshot, {"backend": TARGET, "timeout_s": 15, "poll_s": 0.02})
    controls = Controls(
        registry=RedisRegistry.from_url(redis_url), audit=AuditLog(audit), operator="tester@lab"
    )

    def progress(event: ProgressEvent) -> None:
        if event.status is StepStatus.DONE:
            marks[event.step] = time.time()

    try:
        return execute(apply_drain, plan, controls, progress)
    finally:
        controls.close()


def undrain_now(redis_url: str, audit: Path) -> Any:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    snapshot, _version = read_registry(client)
    client.close()
    controls = Controls(
        registry=RedisRegistry.from_url(redis_url), audit=AuditLog(audit), operator="tester@lab"
    )
    try:
        plan = plan_undrain(snapshot, {"backend": TARGET})
        return execute(apply_undrain, plan, controls, lambda e: None)
    finally:
        controls.close()


async def wait_answered(r: Any, n: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while await r.xlen(keys.RESULTS_STREAM) < n:
        assert time.monotonic() < deadline, f"{await r.xlen(keys.RESULTS_STREAM)} of {n} answered"
        await asyncio.sleep(0.05)


async def test_drain_under_steady_load_loses_nothing_and_stops_new_work(
    redis_url: str, tmp_path: Path
) -> None:
    with start_lab(redis_url, tmp_path / "lab", backends=3, service_ms=30) as lab:
        urls = {b.name: b.url for b in lab.backends}
        r = aioredis.Redis.from_url(redis_url, decode_responses=True)
        try:
            spec = TrafficSpec(rate_per_s=80, max_count=400, max_duration_s=5.0)
            traffic = asyncio.create_task(generate(r, spec))
            await asyncio.sleep(1.5)  # steady load on all three
            assert served(urls[TARGET]), "the target got no work before the drain"
            marks: dict[str, float] = {}
            outcome = await asyncio.to_thread(drain_now, redis_url, tmp_path / "a.jsonl", marks)
            applied_at = time.time()
            assert outcome.ok, outcome.message
            assert not traffic.done(), "the drain must happen while traffic flows"
            ids = await traffic
            await wait_answered(r, len(ids))

            # registry: drained, nothing in flight or assigned
            h = await r.hgetall(keys.backend_key(TARGET))
            inflight = await r.hget(keys.INFLIGHT, TARGET)
            assert (h["state"], float(h["weight"]), inflight) == ("drained", 0.0, "0")
            assert await r.hlen(keys.assigned_key(TARGET)) == 0

            # no new work after the plan applied; nothing assigned after draining was written
            draining_at = marks[f"draining:{TARGET}"]
            log = served(urls[TARGET])
            assert log
            assert max(e["arrived_at"] for e in log) <= applied_at
            assert max(e["assigned_at"] for e in log) <= draining_at
            others = [e for name, u in urls.items() if name != TARGET for e in served(u)]
            assert any(e["arrived_at"] > applied_at for e in others), "traffic went on"

            # every request answered exactly once, served exactly once
            results: Any = await r.xrange(keys.RESULTS_STREAM)
            answered = [fields["entry_id"] for _id, fields in results]
            assert sorted(answered) == sorted(ids)
            assert {fields["status"] for _id, fields in results} == {"ok"}
            all_served = [e["entry_id"] for e in log + others]
            assert sorted(all_served) == sorted(ids)
            async with r.pipeline(transaction=False) as pipe:
                for entry_id in ids:
                    pipe.llen(keys.reply_key(entry_id))
                assert set(await pipe.execute()) == {1}
            assert (await r.xpending(spec.stream, "g1"))["pending"] == 0

            # undrain: it gets work again, with the weight it had
            undone = await asyncio.to_thread(undrain_now, redis_url, tmp_path / "a.jsonl")
            assert undone.ok, undone.message
            before = len(served(urls[TARGET]))
            more = await generate(r, TrafficSpec(rate_per_s=100, max_count=60))
            await wait_answered(r, len(ids) + len(more))
            assert len(served(urls[TARGET])) > before
        finally:
            await r.aclose()
