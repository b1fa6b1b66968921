"""RedisQueueSource against a real redis-server: streams, consumer groups, the registry."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from gpucon.model.fleet import BackendState, Health
from gpucon.registry import keys
from gpucon.registry.parse import ready_text
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.servers import free_port

pytestmark = pytest.mark.integration


def command_flags(r: redis.Redis, name: str) -> set[str]:
    reply = r.execute_command("COMMAND", "INFO", name)  # type: ignore[no-untyped-call]
    return set(reply[name]["flags"])


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def source(url: str, **kwargs: object) -> RedisQueueSource:
    return RedisQueueSource(url, client_name="gpucon-test", **kwargs)  # type: ignore[arg-type]


def server_ms(r: redis.Redis) -> int:
    secs, usecs = r.time()
    return int(secs * 1000 + usecs // 1000)


def fill_queue(r: redis.Redis, stream: str = "gen:queue") -> int:
    """Five entries 60..20 s old; g1 got three, acked the first: 2 pending, 2 undelivered."""
    now = server_ms(r)
    ids = [f"{now - age * 1000}-0" for age in (60, 50, 40, 30, 20)]
    for i, entry_id in enumerate(ids):
        r.xadd(stream, {"prompt": f"p{i}"}, id=entry_id)
    r.xgroup_create(stream, "g1", id="0")
    r.xreadgroup("g1", "sched-1", {stream: ">"}, count=3)
    r.xack(stream, "g1", ids[0])
    return now


def test_queue_depth_lag_pending_and_oldest_waiting_entry(r: redis.Redis, redis_url: str) -> None:
    fill_queue(r)
    reading = source(redis_url).read()
    assert reading.health is Health.OK, reading.error
    (q,) = reading.queues
    assert (q.stream, q.length, q.group, q.pending, q.lag, q.consumers) == (
        "gen:queue", 5, "g1", 2, 2, 1,
    )  # fmt: skip
    # the oldest entry still waiting is the pending one 50 s old, not the acked 60 s one
    assert q.oldest_age_s == pytest.approx(50.0, abs=2.0)
    assert q.last_delivered_id is not None and q.last_delivered_id.endswith("-0")


def test_undelivered_entry_older_than_any_pending_sets_the_age(
    r: redis.Redis, redis_url: str
) -> None:
    now = server_ms(r)
    r.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    r.xadd("gen:queue", {"p": "1"}, id=f"{now - 30_000}-0")
    reading = source(redis_url).read()
    (q,) = reading.queues
    assert (q.pending, q.lag) == (0, 1)
    assert q.oldest_age_s == pytest.approx(30.0, abs=2.0)


def test_empty_queue_has_nothing_waiting(r: redis.Redis, redis_url: str) -> None:
    r.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    (q,) = source(redis_url).read().queues
    assert (q.length, q.pending, q.lag, q.oldest_age_s) == (0, 0, 0, 0.0)


def test_missing_stream_or_group_degrades_and_says_which(r: redis.Redis, redis_url: str) -> None:
    fill_queue(r)
    r.xadd("gen:other", {"p": "1"})
    reading = source(redis_url, streams=("gen:queue", "gen:other", "gen:nothing")).read()
    assert reading.health is Health.DEGRADED
    assert reading.error is not None
    assert "stream gen:other: no consumer group 'g1'" in reading.error
    assert "stream gen:nothing: does not exist" in reading.error
    queues = {q.stream: q for q in reading.queues}
    assert queues["gen:queue"].pending == 2
    assert (queues["gen:other"].length, queues["gen:other"].group) == (1, None)


def register(r: redis.Redis, name: str, **fields: object) -> None:
    r.sadd(keys.BACKENDS, name)
    if fields:
        r.hset(keys.backend_key(name), mapping={k: str(v) for k, v in fields.items()})


def test_registry_backends(r: redis.Redis, redis_url: str) -> None:
    register(r, "sdxl-a", slot="node-a/gpu0/gi1", url="http://10.0.0.5:8000", model="sdxl",
             weight=1.5, state="active", inflight=3, ready=1)  # fmt: skip
    register(r, "sdxl-b", slot="vm:vm-b-1", url="http://10.0.0.6:8000", model="sdxl",
             weight=0, state="draining", inflight=0, owner="alice", reason="re-slice")  # fmt: skip
    reading = source(redis_url, streams=()).read()
    assert reading.health is Health.OK, reading.error
    backends = {b.name: b for b in reading.backends}
    a = backends["sdxl-a"]
    assert (a.slot_id, a.url, a.model, a.weight, a.state, a.inflight, a.ready) == (
        "node-a/gpu0/gi1", "http://10.0.0.5:8000", "sdxl", 1.5, BackendState.ACTIVE, 3, True,
    )  # fmt: skip
    b = backends["sdxl-b"]
    assert (b.state, b.weight, b.owner, b.reason, b.ready) == (
        BackendState.DRAINING, 0.0, "alice", "re-slice", None,
    )  # fmt: skip


def test_registry_garbage_is_named_never_raised(r: redis.Redis, redis_url: str) -> None:
    register(r, "good", slot="h/gpu0", url="http://h:1", weight=1, state="active", inflight=0)
    register(r, "bad", slot="not a slot", weight="abc", state="exploded", inflight="x", ready="?")
    register(r, "ghost")  # in the set, no hash
    r.hset(keys.backend_key("nan"), mapping={"weight": "nan", "state": "active"})
    r.sadd(keys.BACKENDS, "nan")
    src = source(redis_url, streams=())
    reading = src.read()
    again = src.read()  # unchanged entries come from the parse cache: same problems, same data
    assert (again.health, again.error, again.backends) == (
        reading.health, reading.error, reading.backends,
    )  # fmt: skip
    r.hset(keys.backend_key("bad"), "weight", "2")
    r.incr(keys.VERSION)  # every registry writer bumps the version: the hashes are read again
    assert {b.name: b.weight for b in src.read().backends}["bad"] == 2.0
    assert reading.health is Health.DEGRADED
    assert reading.error is not None
    assert "gpucon:backend:bad field" in reading.error
    assert "(+" in reading.error  # more problems than shown
    backends = {b.name: b for b in reading.backends}
    bad = backends["bad"]
    assert (bad.weight, bad.state, bad.inflight, bad.slot_id, bad.ready) == (
        None, BackendState.DOWN, None, None, None,
    )  # fmt: skip
    assert backends["ghost"].state is BackendState.DOWN
    assert backends["nan"].weight is None
    assert backends["good"].weight == 1.0


def test_one_round_trip_and_only_read_commands(
    r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill_queue(r)
    fill_queue(r, "gen:queue2")
    for i in range(200):
        register(r, f"b{i}", slot=f"h{i}/gpu0", weight=1, state="active", inflight=0)
    src = source(redis_url, streams=("gen:queue", "gen:queue2"))
    src.read()  # opens the connection
    r.config_resetstat()
    sends: list[int] = []
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self: redis.connection.AbstractConnection, *args: object, **kw: object) -> None:
        sends.append(1)
        original(self, *args, **kw)  # type: ignore[arg-type, no-untyped-call]

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
    reading = src.read()
    monkeypatch.undo()
    assert len(sends) == 1
    assert reading.round_trips == 1
    assert len(reading.backends) == 200
    # unchanged registry: the shared in-flight hash and the schedulers' heartbeats, not one
    # HGETALL per backend
    assert r.info("commandstats")["cmdstat_hgetall"]["calls"] == 2
    # every command the server ran since the reset (scripts' inner calls included)
    used = {k.removeprefix("cmdstat_").split("|")[0] for k in r.info("commandstats")}
    assert {"eval_ro", "hgetall", "xpending"} <= used
    writes = {name for name in used if "write" in command_flags(r, name)}
    assert not writes
    names = [c["name"] for c in r.client_list()]
    assert "gpucon-test" in names


def test_live_values_every_tick_hashes_only_when_the_version_moves(
    r: redis.Redis, redis_url: str
) -> None:
    register(r, "b1", slot="h/gpu0", weight=2, state="active")
    register(r, "b2", slot="h/gpu1", weight=1, state="active")
    r.incr(keys.VERSION)
    src = RedisQueueSource(redis_url, streams=(), client_name="gpucon-test", registry_refresh_s=0.5)
    first = src.read()
    assert first.round_trips == 3  # the tick, then SMEMBERS, then the hashes of new names
    assert {b.name: b.inflight for b in first.backends} == {"b1": None, "b2": None}
    # the scheduler's counts and health verdicts: seen on the next tick, no version bump
    r.hset(keys.INFLIGHT, mapping={"b1": 4, "b2": 0})
    r.set(keys.READY, ready_text({"b1": (True, 1764600000.25), "b2": (False, 1764600001)}))
    tick = src.read()
    assert tick.round_trips == 1
    got = {b.name: (b.inflight, b.ready, b.ready_at) for b in tick.backends}
    assert got == {"b1": (4, True, 1764600000.25), "b2": (0, False, 1764600001.0)}
    # a registry write bumps the version: the hashes are read again, in one more round trip
    r.hset(keys.backend_key("b1"), "state", "draining")
    r.incr(keys.VERSION)
    moved = src.read()
    assert moved.round_trips == 2
    assert {b.name: b.state for b in moved.backends}["b1"] is BackendState.DRAINING
    # a writer that forgets the bump is caught by the periodic full read
    r.hset(keys.backend_key("b2"), "weight", "5")
    assert {b.name: b.weight for b in src.read().backends}["b2"] == 1.0
    deadline = time.monotonic() + 5
    while {b.name: b.weight for b in src.read().backends}["b2"] != 5.0:
        assert time.monotonic() < deadline, "the periodic full read never came"
        time.sleep(0.05)


def test_server_down_is_a_fast_down_reading() -> None:
    src = source(f"redis://127.0.0.1:{free_port()}/0", timeout_s=2.0)
    started = time.perf_counter()
    reading = src.read()
    assert time.perf_counter() - started < 1.0
    assert reading.health is Health.DOWN
    assert reading.error is not None and "ConnectionError" in reading.error


def test_slow_server_times_out_then_recovers(r: redis.Redis, redis_url: str) -> None:
    fill_queue(r)
    src = source(redis_url, timeout_s=0.3)
    assert src.read().health is Health.OK
    # another client keeps the server busy in a script for 1.5 s (a real slow server)
    busy = """
    local s = redis.call('TIME')
    while true do
      local n = redis.call('TIME')
      if (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > tonumber(ARGV[1]) then return 1 end
    end
    """
    blocker = redis.Redis.from_url(redis_url, socket_timeout=10)
    thread = threading.Thread(target=lambda: blocker.eval(busy, 0, 1_500_000))
    thread.start()
    try:
        time.sleep(0.1)
        started = time.perf_counter()
        reading = src.read()
        elapsed = time.perf_counter() - started
    finally:
        thread.join()
        blocker.close()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "Timeout" in reading.error
    assert elapsed < 1.0
    after = src.read()
    assert after.health is Health.OK, after.error
    assert after.queues[0].pending == 2
