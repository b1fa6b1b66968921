"""Two drains planned at once, each of another backend of one model, against a real
redis-server: they cannot both go ahead and leave the model with nothing serving.

In ``gpucon lab --backends 2`` two ``gpucon drain --yes`` started together, one for each
backend, both planned "1 other backend serving model bert-base", took different locks and both
finished ``ok``: bert-base had no backend left. Each drain's first write now checks, in its own
transaction (WATCH on the backends its plan counted on), that one of them still serves.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import redis

from gpucon.actions import drain
from gpucon.actions.guard import execute
from gpucon.actions.plan import Outcome, OutcomeStatus, Plan
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys

pytestmark = pytest.mark.integration


def two_plans(url: str) -> tuple[redis.Redis, Plan, Plan]:
    """b1 and b2 serve model m; a drain of each, planned from the same registry read."""
    client = redis.Redis.from_url(url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=1.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    snapshot, _ = read_registry(client)
    plans = [drain.plan_drain(snapshot, {"backend": n, "poll_s": 0.02}) for n in ("b1", "b2")]
    assert all(p.ok for p in plans)  # each saw the other serving
    return client, plans[0], plans[1]


def run(url: str, plan: Plan, operator: str, audit: Path) -> Outcome:
    registry = RedisRegistry.from_url(url)
    controls = Controls(registry, AuditLog(audit, registry.append_audit), operator)
    try:
        return execute(drain.apply_drain, plan, controls, lambda _event: None)
    finally:
        registry.close()


def states(client: redis.Redis) -> dict[str, str]:
    return {n: str(client.hget(keys.backend_key(n), "state")) for n in ("b1", "b2")}


def test_the_second_drain_on_a_plan_counting_on_a_drained_backend_writes_nothing(
    redis_url: str, tmp_path: Path
) -> None:
    client, first, second = two_plans(redis_url)
    assert run(redis_url, first, "ann@h1", tmp_path / "a.jsonl").ok
    outcome = run(redis_url, second, "bob@h2", tmp_path / "b.jsonl")
    assert outcome.status is OutcomeStatus.REFUSED and outcome.exit_code == 3, outcome
    assert outcome.message == (
        "b2 was not set to draining (nothing was written for it): the backends its plan counted "
        "on to keep serving its model are out of service now (b1 is drained with weight 0 (set "
        "by ann@h1)), so draining it would leave nothing serving; plan again (force to go "
        "ahead anyway)"
    )
    # the step that was refused says it in the same words, not under an exception's name
    assert [(s.step, s.ok, s.text) for s in outcome.steps] == [
        ("draining:b2", False, outcome.message)
    ]
    assert states(client) == {"b1": "drained", "b2": "active"}
    assert client.hget(keys.backend_key("b2"), "weight") == "1.0"
    client.close()


@pytest.mark.parametrize("trial", range(5))
def test_two_drains_at_once_leave_one_backend_serving(
    redis_url: str, tmp_path: Path, trial: int
) -> None:
    client, first, second = two_plans(redis_url)
    start = threading.Barrier(2)
    outcomes: dict[str, Outcome] = {}

    def race(plan: Plan, operator: str) -> None:
        start.wait()
        outcomes[plan.target] = run(redis_url, plan, operator, tmp_path / f"{operator}.jsonl")

    threads = [
        threading.Thread(target=race, args=(first, "ann@h1")),
        threading.Thread(target=race, args=(second, "bob@h2")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(o.status for o in outcomes.values()) == sorted(
        [OutcomeStatus.OK, OutcomeStatus.REFUSED]
    ), outcomes
    assert sorted(states(client).values()) == ["active", "drained"]
    client.close()


def test_a_forced_drain_does_not_check(redis_url: str, tmp_path: Path) -> None:
    client, first, _ = two_plans(redis_url)
    snapshot, _ = read_registry(client)
    forced = drain.plan_drain(snapshot, {"backend": "b2", "force": True, "poll_s": 0.02})
    assert forced.params["keep_serving"] == {}
    assert run(redis_url, first, "ann@h1", tmp_path / "a.jsonl").ok
    assert run(redis_url, forced, "bob@h2", tmp_path / "b.jsonl").ok
    assert states(client) == {"b1": "drained", "b2": "drained"}
    assert os.path.exists(tmp_path / "b.jsonl")
    client.close()


def test_a_drain_counting_on_many_backends_checks_every_one(redis_url: str, tmp_path: Path) -> None:
    """12 other backends serve m when b00 is planned; 11 of them (the first ones read) are
    drained meanwhile: the drain goes ahead on the 12th, which still serves. With all 12
    drained it is refused, naming 8 and counting the rest."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    names = [f"b{i:02d}" for i in range(13)]
    register_backends(
        client,
        [
            BackendRecord(n, f"http://127.0.0.1:{i + 1}", "m", f"h/gpu{i}/gi1", weight=1.0)
            for i, n in enumerate(names)
        ],
    )
    snapshot, _ = read_registry(client)
    plan = drain.plan_drain(snapshot, {"backend": "b00", "poll_s": 0.02})
    assert plan.params["keep_serving"] == {"b00": names[1:]}
    for n in names[1:12]:
        client.hset(keys.backend_key(n), mapping={"state": "drained", "weight": "0"})
    assert run(redis_url, plan, "ann@h1", tmp_path / "a.jsonl").ok
    assert client.hget(keys.backend_key("b00"), "state") == "drained"

    for n in names:
        client.hset(keys.backend_key(n), mapping={"state": "active", "weight": "1.0"})
    snapshot, _ = read_registry(client)
    plan = drain.plan_drain(snapshot, {"backend": "b00", "poll_s": 0.02})
    for n in names[1:]:
        client.hset(
            keys.backend_key(n), mapping={"state": "drained", "weight": "0", "owner": "carl@h3"}
        )
    outcome = run(redis_url, plan, "bob@h2", tmp_path / "b.jsonl")
    assert outcome.status is OutcomeStatus.REFUSED, outcome
    named = "; ".join(f"{n} is drained with weight 0 (set by carl@h3)" for n in names[1:9])
    assert f"({named}; and 4 more out of service)" in outcome.message
    assert client.hget(keys.backend_key("b00"), "state") == "active"
    client.close()
