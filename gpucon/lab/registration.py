"""Registering the lab's backends in the scheduler registry (the Redis contract of gpucon.registry).

Only the lab and the test harness register backends; operator actions (drain, rebalance) write
through ``gpucon.controls.registry``. Each write bumps ``gpucon:registry:version`` in the same
MULTI, so schedulers and plans notice it.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from gpucon.lab import registry_scripts as rs


@dataclass(frozen=True, slots=True)
class BackendRecord:
    name: str
    url: str
    model: str
    slot: str
    weight: float = 1.0
    state: str = "active"


def register_backends(client: redis.Redis, records: list[BackendRecord]) -> int:
    """Write the backends' hashes and set membership in one transaction; returns the version."""
    with client.pipeline(transaction=True) as pipe:
        for r in records:
            pipe.hset(
                rs.backend_key(r.name),
                mapping={
                    "slot": r.slot,
                    "url": r.url,
                    "model": r.model,
                    "weight": repr(float(r.weight)),
                    "state": r.state,
                    "inflight": 0,
                    "owner": "gpucon-lab",
                    "reason": "registered by gpucon lab",
                },
            )
            pipe.sadd(rs.BACKENDS_SET, r.name)
        pipe.incr(rs.REGISTRY_VERSION)
        result = pipe.execute()
    return int(result[-1])


def unregister_backends(client: redis.Redis, names: list[str]) -> None:
    with client.pipeline(transaction=True) as pipe:
        for name in names:
            pipe.delete(rs.backend_key(name), rs.assigned_key(name))
            pipe.srem(rs.BACKENDS_SET, name)
        pipe.incr(rs.REGISTRY_VERSION)
        pipe.execute()
