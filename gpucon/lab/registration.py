"""Registering the lab's backends in the scheduler registry (keys: ``gpucon.registry.keys``).

Only the lab and the test harness register backends; operator actions (drain, rebalance) write
through ``gpucon.controls.registry``. Each write bumps ``gpucon:registry:version`` in the same
MULTI, so schedulers and plans notice it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from gpucon.registry import keys


@dataclass(frozen=True, slots=True)
class BackendRecord:
    name: str
    url: str
    model: str
    slot: str
    weight: float = 1.0
    state: str = "active"


def record_fields(r: BackendRecord) -> dict[str, str]:
    """The backend hash's fields for ``r``."""
    return {
        "slot": r.slot,
        "url": r.url,
        "model": r.model,
        "weight": repr(float(r.weight)),
        "state": r.state,
        "owner": "gpucon-lab",
        "reason": "registered by gpucon lab",
    }


def backend_name(server: str, model: str, models: int) -> str:
    """The registered name of ``model`` on ``server``: the server's own name when it serves
    one model, ``server-model`` when it serves ``models`` > 1 (one backend per model)."""
    return server if models == 1 else f"{server}-{model}"


def register_backends(client: redis.Redis, records: list[BackendRecord]) -> int:
    """Write the backends' hashes and set membership in one transaction; returns the version."""
    with client.pipeline(transaction=True) as pipe:
        for r in records:
            fields: dict[Any, Any] = record_fields(r)  # redis-py's own (invariant) key type
            pipe.hset(keys.backend_key(r.name), mapping=fields)
            pipe.hsetnx(keys.INFLIGHT, r.name, 0)  # a count the scheduler keeps is kept
            pipe.sadd(keys.BACKENDS, r.name)
        pipe.incr(keys.VERSION)
        result = pipe.execute()
    return int(result[-1])


def unregister_backends(client: redis.Redis, names: list[str]) -> None:
    with client.pipeline(transaction=True) as pipe:
        for name in names:
            pipe.delete(keys.backend_key(name), keys.assigned_key(name))
            pipe.hdel(keys.INFLIGHT, name)
            pipe.srem(keys.BACKENDS, name)
        pipe.incr(keys.VERSION)
        pipe.execute()
