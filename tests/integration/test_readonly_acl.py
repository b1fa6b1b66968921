"""A read-only console as a Redis ACL user: the server itself refuses every write.

The README's rules (``gpucon.registry.read.READ_ONLY_ACL_RULES``) are given to a user on a
real redis-server; the console's Redis source reads the registry and the queue through that
user, the audit screen's stream read works, and every write — a plain HSET, the controls'
drain, a script — comes back NOPERM from Redis, with the data unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError, ResponseError

from gpucon.controls.registry import RedisRegistry, read_audit_stream
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.fleet import BackendState, Health
from gpucon.registry import keys
from gpucon.registry.parse import ready_text
from gpucon.registry.read import READ_ONLY_ACL_RULES
from gpucon.sources.redisq import RedisQueueSource

pytestmark = pytest.mark.integration

USER, PASSWORD = "gpucon-ro", "ro-test-secret"
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def admin(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    client.set(keys.READY, ready_text({"b1": (True, 1764600000.0), "b2": (False, 1764600000.0)}))
    client.xgroup_create("gen:queue", "g1", id="0", mkstream=True)
    for i in range(3):
        client.xadd("gen:queue", {"prompt": f"p{i}"})
    client.xadd(keys.AUDIT, {"event": "intent", "operator": "ann@h1"})
    client.acl_setuser(USER, enabled=True, reset=True, passwords=[f"+{PASSWORD}"])
    untyped: Any = client  # redis-py leaves execute_command untyped
    untyped.execute_command("ACL", "SETUSER", USER, *READ_ONLY_ACL_RULES.split())
    try:
        yield client
    finally:  # users outlive FLUSHALL: leave the session's server as it was
        client.acl_deluser(USER)
        client.close()


def ro_url(redis_url: str) -> str:
    return redis_url.replace("redis://", f"redis://{USER}:{PASSWORD}@", 1)


def dump(client: Any) -> dict[str, Any]:
    return {
        key: client.hgetall(key) if client.type(key) == "hash" else client.type(key)
        for key in sorted(client.keys("*"))
    }


def test_the_readme_gives_these_rules() -> None:
    assert READ_ONLY_ACL_RULES in " ".join(README.read_text().split())


def test_the_console_reads_through_the_read_only_user(admin: redis.Redis, redis_url: str) -> None:
    source = RedisQueueSource(ro_url(redis_url), streams=("gen:queue",), client_name="gpucon-ro")
    first, steady = source.read(), source.read()
    (client,) = [c for c in admin.client_list() if c["name"] == "gpucon-ro"]
    assert client["user"] == USER  # the source really connected as the read-only user
    source.close()
    for reading in (first, steady):
        assert reading.health is Health.OK, reading.error
        backends = {b.name: b for b in reading.backends}
        assert {n: (b.state, b.weight, b.ready) for n, b in backends.items()} == {
            "b1": (BackendState.ACTIVE, 2.0, True),
            "b2": (BackendState.ACTIVE, 1.0, False),
        }
        (queue,) = reading.queues
        assert (queue.length, queue.group, queue.lag) == (3, "g1", 3)
    reader = redis.Redis.from_url(ro_url(redis_url), decode_responses=True)
    assert [r["operator"] for r in read_audit_stream(reader)] == ["ann@h1"]  # the audit screen
    reader.close()


def test_every_write_through_the_read_only_user_is_refused_by_redis(
    admin: redis.Redis, redis_url: str
) -> None:
    before = dump(admin)
    version = admin.get(keys.VERSION)
    ro: Any = redis.Redis.from_url(ro_url(redis_url), decode_responses=True)
    with pytest.raises(NoPermissionError, match="no permissions"):
        ro.hset(keys.backend_key("b1"), "state", "drained")
    with pytest.raises(NoPermissionError, match="no permissions"):
        ro.incr(keys.VERSION)
    with pytest.raises(NoPermissionError, match="no permissions"):
        ro.xadd(keys.AUDIT, {"event": "forged"})
    with pytest.raises(NoPermissionError, match="no permissions"):
        ro.eval("return redis.call('SET', KEYS[1], 'x')", 1, keys.VERSION)
    with pytest.raises(ResponseError):  # a read-only script may not write, whoever runs it
        ro.eval_ro("return redis.call('SET', KEYS[1], 'x')", 1, keys.VERSION)
    with pytest.raises(NoPermissionError, match="no permissions"):  # nor read outside the contract
        ro.get("other:key")
    with pytest.raises(NoPermissionError, match="no permissions"):  # nor cut others off
        ro.execute_command("CLIENT", "KILL", "ID", "1")
    # the controls' own write path, handed this connection, is refused the same way
    controls = RedisRegistry(ro)
    with pytest.raises(NoPermissionError, match="no permissions"):
        controls.begin_drain("b1", "mallory@h9", "through the read-only user")
    with pytest.raises(NoPermissionError, match="no permissions"):
        controls.set_weights({"b1": 9.0}, None, "mallory@h9", "no")
    ro.close()
    assert dump(admin) == before and admin.get(keys.VERSION) == version
    refused = {entry["object"] for entry in admin.acl_log(count=100) if entry["username"] == USER}
    assert {"hset", "incrby", "xadd", "eval", "watch"} <= refused
