"""The scheduler registry in Redis: the write side of the contract in ``gpucon.registry``.

Key names come from ``gpucon.registry.keys``, hashes are read by ``gpucon.registry.parse``
and every state change is computed by ``gpucon.registry.states`` (the transition table and
the fields each move writes), so this module only runs those moves against Redis: each one
WATCHes the backend's hash, reads it, checks the move against the state it read
(compare-and-set: StateMoved, nothing written, when someone changed it since) and writes the
fields plus a bump of ``gpucon:registry:version`` in one MULTI. Rebalance WATCHes the version
too and refuses a stale plan. Locks are ``SET NX PX`` values naming holder, time and action
plus the owner's token, renewed and released only by that token (in Lua).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import redis

from gpucon.controls.base import LockLease, Others, StateMoves, check_weights_unchanged
from gpucon.errors import BadParams, JsonValue, LockHeld, StalePlan, shown
from gpucon.registry import keys, states
from gpucon.registry.heartbeat import Heartbeat, parse_heartbeats
from gpucon.registry.parse import BackendRecord, parse_record
from gpucon.registry.read import decode_hash, read_record
from gpucon.sources.connect import RedisAuth, redis_client

CLIENT_NAME = "gpucon-actions"


# compare-and-delete / compare-and-expire: only the value the owner wrote may release or renew
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


def _lock_value(lease: LockLease) -> str:
    body = {
        "token": lease.token,
        "holder": lease.holder,
        "since": lease.since,
        "action": lease.action,
    }
    return json.dumps(body, sort_keys=True)


def _record(name: str, raw: dict[str, str]) -> BackendRecord | None:
    return parse_record(name, raw)[0] if raw else None


def _float(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


class RedisRegistry(StateMoves):
    """The RegistryControl over a real Redis."""

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        # typed loosely: redis-py's stubs type every reply as bytes | str (decode_responses=True)
        self.client: Any = client
        self.clock = clock
        self._release = client.register_script(_RELEASE_LUA)
        self._renew = client.register_script(_RENEW_LUA)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        timeout_s: float = 2.0,
        client_name: str = CLIENT_NAME,
        auth: RedisAuth | None = None,
    ) -> RedisRegistry:
        client = redis_client(url, auth, timeout_s=timeout_s, client_name=client_name)
        return cls(client)

    # -- reads -----------------------------------------------------------------------------

    def version(self) -> int:
        return int(self.client.get(keys.VERSION) or 0)

    def backend(self, name: str) -> BackendRecord | None:
        found = read_record(self.client, name)
        return None if found is None else found[0]

    def backend_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.client.smembers(keys.BACKENDS)))

    def pending_for(self, name: str) -> int:
        return int(self.client.hlen(keys.assigned_key(name)))

    def why_unread(self, exc: Exception) -> str:
        """``Redis at HOST:PORT did not answer in 2s`` (no Python class name, no password)."""
        options = self.client.connection_pool.connection_kwargs
        where = options.get("path") or f"{options.get('host', '?')}:{options.get('port', '?')}"
        timeout = options.get("socket_timeout")
        if isinstance(exc, (redis.TimeoutError, TimeoutError)):
            within = f" in {timeout:g}s" if isinstance(timeout, (int, float)) else ""
            return f"Redis at {where} did not answer{within}"
        if isinstance(exc, redis.ConnectionError):
            return f"Redis at {where} could not be reached ({exc})"
        return f"Redis at {where}: {exc}" if str(exc) else f"Redis at {where} failed"

    def scheduler_heartbeat(self) -> Heartbeat | None:
        return parse_heartbeats(decode_hash(self.client.hgetall(keys.SCHEDULERS)))[0]

    # -- writes ----------------------------------------------------------------------------

    def _move(
        self, name: str, move: Callable[[BackendRecord], states.Change], others: Others = None
    ) -> states.Change:
        """Read the backend under WATCH, run ``others`` (each backend it reads is WATCHed before
        it is read), compute the move, write it with a version bump: a concurrent write to any
        of them makes the transaction read again."""
        key = keys.backend_key(name)
        done: list[states.Change] = []

        def txn(pipe: Any) -> None:
            done.clear()
            raw = decode_hash(pipe.hgetall(key))
            if not raw:
                raise BadParams("backend", f"no backend named {shown(name)} in the registry")
            if others is not None:

                def read_watched(other: str) -> BackendRecord | None:
                    pipe.watch(keys.backend_key(other))  # added to the transaction's WATCH
                    return _record(other, decode_hash(pipe.hgetall(keys.backend_key(other))))

                others(read_watched)
            change = move(parse_record(name, raw)[0])
            pipe.multi()
            pipe.hset(key, mapping=change.hash_fields())
            if change.deleted_fields():
                pipe.hdel(key, *change.deleted_fields())
            pipe.incr(keys.VERSION)
            done.append(change)

        self.client.transaction(txn, key)
        return done[0]

    def set_weights(
        self,
        weights: Mapping[str, float],
        expected_version: int | None,
        owner: str,
        reason: str,
        *,
        expected_weights: Mapping[str, float | None] | None = None,
    ) -> int:
        new_version: list[int] = []

        def txn(pipe: Any) -> None:
            current = int(pipe.get(keys.VERSION) or 0)
            if expected_version is not None and current != expected_version:
                raise StalePlan(expected_version, current)
            seen: dict[str, float | None] = {}
            for name in weights:
                raw = decode_hash(pipe.hgetall(keys.backend_key(name)))
                if not raw:
                    raise BadParams(
                        f"weights.{name}", f"no backend named {shown(name)} in the registry"
                    )
                seen[name] = parse_record(name, raw)[0].weight
            check_weights_unchanged(seen, expected_weights)
            pipe.multi()
            for name, weight in weights.items():
                fields = {"weight": repr(float(weight)), "owner": owner, "reason": reason}
                pipe.hset(keys.backend_key(name), mapping=fields)
            pipe.incr(keys.VERSION)
            new_version.append(current + 1)

        watched = [keys.VERSION, *(keys.backend_key(n) for n in weights)]
        self.client.transaction(txn, *watched)
        return new_version[-1]

    # -- locks -----------------------------------------------------------------------------

    def acquire_lock(self, target: str, holder: str, action: str, ttl_s: float) -> LockLease:
        lease = LockLease(target, uuid.uuid4().hex, holder, self.clock(), action)
        ttl_ms = max(1, int(ttl_s * 1000))
        for _ in range(3):  # a lock that expires between SET and GET: try again
            if self.client.set(keys.lock_key(target), _lock_value(lease), nx=True, px=ttl_ms):
                return lease
            raw = self.client.get(keys.lock_key(target))
            if raw is None:
                continue
            try:
                info = json.loads(raw)
            except json.JSONDecodeError:
                info = {"holder": raw}
            since = _float(str(info.get("since", "")))
            raise LockHeld(target, str(info.get("holder", "?")), since, info.get("action"))
        raise LockHeld(target, "?", None, None)

    def renew_lock(self, lease: LockLease, ttl_s: float) -> bool:
        ttl_ms = max(1, int(ttl_s * 1000))
        return bool(
            self._renew(keys=[keys.lock_key(lease.target)], args=[_lock_value(lease), ttl_ms])
        )

    def release_lock(self, lease: LockLease) -> bool:
        return bool(self._release(keys=[keys.lock_key(lease.target)], args=[_lock_value(lease)]))

    # -- audit -----------------------------------------------------------------------------

    def append_audit(self, record: Mapping[str, JsonValue]) -> None:
        fields = {k: "" if v is None else str(v) for k, v in record.items()}
        self.client.xadd(keys.AUDIT, fields, maxlen=keys.AUDIT_MAXLEN, approximate=True)

    def read_audit(self, limit: int) -> list[dict[str, str]]:
        """The newest ``limit`` records of the fleet's audit stream, oldest first (a read)."""
        return read_audit_stream(self.client, limit)

    def close(self) -> None:
        self.client.close()


def read_audit_stream(client: Any, limit: int = 100) -> list[dict[str, str]]:
    """The newest ``limit`` audit stream entries, oldest first (XREVRANGE: a read only)."""
    entries = client.xrevrange(keys.AUDIT, count=limit) or []
    rows: list[dict[str, str]] = []
    for _entry_id, fields in reversed(entries):
        rows.append({_text(k): _text(v) for k, v in fields.items()})
    return rows


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value
