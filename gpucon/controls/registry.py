"""The scheduler registry in Redis, written per DESIGN.md's contract (redis-py).

Keys: ``gpucon:backend:{name}`` (hash), ``gpucon:backends`` (set), ``gpucon:registry:version``
(counter bumped by every write, inside the same MULTI), ``gpucon:audit`` (stream, capped),
``gpucon:lock:{target}`` (``SET NX PX``; the value names the holder, the time it was taken and
the action, plus the owner's token; renewed and released only by that token, in Lua).
``gpucon:assigned:{name}`` (hash of stream entry id -> stream, kept by the scheduler) tells
which queue entries a backend holds and has not acknowledged yet.
Writes that depend on what they read (drain remembering the weight, rebalance checking the
version) WATCH the keys they read, so a concurrent write makes them retry or refuse. Every
state change is a compare-and-set: the state read under WATCH must be one the transition may
start from (``check_transition``: drained only from draining, active only from draining or
drained), else StateMoved and nothing is written.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import redis

from gpucon.actions.plan import check_transition
from gpucon.controls.base import BackendRecord, LockLease, check_weights_unchanged
from gpucon.errors import BadParams, JsonValue, LockHeld, StalePlan

BACKENDS_KEY = "gpucon:backends"
VERSION_KEY = "gpucon:registry:version"
AUDIT_STREAM = "gpucon:audit"
AUDIT_MAXLEN = 10_000
CLIENT_NAME = "gpucon-actions"


def backend_key(name: str) -> str:
    return f"gpucon:backend:{name}"


def lock_key(target: str) -> str:
    return f"gpucon:lock:{target}"


def assigned_key(name: str) -> str:
    return f"gpucon:assigned:{name}"


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


def _float(value: str | None) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    number = _float(value)
    return None if number is None else int(number)


class RedisRegistry:
    """The RegistryControl over a real Redis."""

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        # typed loosely: redis-py's stubs type every reply as bytes | str (decode_responses=True)
        self.client: Any = client
        self.clock = clock
        self._release = client.register_script(_RELEASE_LUA)
        self._renew = client.register_script(_RENEW_LUA)

    @classmethod
    def from_url(
        cls, url: str, *, timeout_s: float = 2.0, client_name: str = CLIENT_NAME
    ) -> RedisRegistry:
        client = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            client_name=client_name,
        )
        return cls(client)

    # -- reads -----------------------------------------------------------------------------

    def version(self) -> int:
        return int(self.client.get(VERSION_KEY) or 0)

    def backend(self, name: str) -> BackendRecord | None:
        return self._record(name, self.client.hgetall(backend_key(name)))

    @staticmethod
    def _record(name: str, raw: Mapping[str, str]) -> BackendRecord | None:
        if not raw:
            return None
        return BackendRecord(
            name=name,
            state=raw.get("state", "active"),
            weight=_float(raw.get("weight")),
            inflight=_int(raw.get("inflight")),
            owner=raw.get("owner") or None,
            reason=raw.get("reason") or None,
            weight_before_drain=_float(raw.get("weight_before_drain")),
        )

    def backend_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.client.smembers(BACKENDS_KEY)))

    def pending_for(self, name: str) -> int:
        return int(self.client.hlen(assigned_key(name)))

    # -- writes ----------------------------------------------------------------------------

    def _require(self, pipe: Any, name: str) -> dict[str, str]:
        raw: dict[str, str] = pipe.hgetall(backend_key(name))
        if not raw:
            raise BadParams("backend", f"no backend named {name!r} in the registry")
        return raw

    def _require_transition(self, pipe: Any, name: str, new: str) -> dict[str, str]:
        """The backend's hash, read under WATCH, if its state may move to ``new``."""
        raw = self._require(pipe, name)
        check_transition(name, raw.get("state") or "active", new)
        return raw

    def begin_drain(self, name: str, owner: str, reason: str) -> float | None:
        remembered: list[float | None] = []

        def txn(pipe: Any) -> None:
            remembered.clear()
            raw = self._require_transition(pipe, name, "draining")
            before = _float(raw.get("weight_before_drain"))
            if raw.get("state") not in ("draining", "drained") or before is None:
                before = _float(raw.get("weight"))
            remembered.append(before)
            fields = {"state": "draining", "weight": "0", "owner": owner, "reason": reason}
            fields["changed_at"] = repr(self.clock())
            if before is not None:
                fields["weight_before_drain"] = repr(before)
            pipe.multi()
            pipe.hset(backend_key(name), mapping=fields)
            pipe.incr(VERSION_KEY)

        self.client.transaction(txn, backend_key(name), VERSION_KEY)
        return remembered[0] if remembered else None

    def mark_state(self, name: str, state: str, owner: str, reason: str) -> None:
        def txn(pipe: Any) -> None:
            self._require_transition(pipe, name, state)
            pipe.multi()
            fields = {"state": state, "owner": owner, "reason": reason}
            fields["changed_at"] = repr(self.clock())
            pipe.hset(backend_key(name), mapping=fields)
            pipe.incr(VERSION_KEY)

        self.client.transaction(txn, backend_key(name))

    def undrain(self, name: str, owner: str, reason: str, default_weight: float) -> float:
        restored: list[float] = []

        def txn(pipe: Any) -> None:
            restored.clear()
            raw = self._require_transition(pipe, name, "active")
            weight = _float(raw.get("weight_before_drain"))
            restored.append(default_weight if weight is None else weight)
            fields = {"state": "active", "weight": repr(restored[0]), "owner": owner}
            fields["reason"] = reason
            fields["changed_at"] = repr(self.clock())
            pipe.multi()
            pipe.hset(backend_key(name), mapping=fields)
            pipe.hdel(backend_key(name), "weight_before_drain")
            pipe.incr(VERSION_KEY)

        self.client.transaction(txn, backend_key(name))
        return restored[0]

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
            current = int(pipe.get(VERSION_KEY) or 0)
            if expected_version is not None and current != expected_version:
                raise StalePlan(expected_version, current)
            seen: dict[str, float | None] = {}
            for name in weights:
                raw = pipe.hget(backend_key(name), "weight")
                if raw is None and not pipe.exists(backend_key(name)):
                    raise BadParams(f"weights.{name}", f"no backend named {name!r} in the registry")
                seen[name] = _float(raw)
            check_weights_unchanged(seen, expected_weights)
            pipe.multi()
            for name, weight in weights.items():
                fields = {"weight": repr(float(weight)), "owner": owner, "reason": reason}
                pipe.hset(backend_key(name), mapping=fields)
            pipe.incr(VERSION_KEY)
            new_version.append(current + 1)

        watched = [VERSION_KEY, *(backend_key(n) for n in weights)]
        self.client.transaction(txn, *watched)
        return new_version[-1]

    # -- locks -----------------------------------------------------------------------------

    def acquire_lock(self, target: str, holder: str, action: str, ttl_s: float) -> LockLease:
        lease = LockLease(target, uuid.uuid4().hex, holder, self.clock(), action)
        ttl_ms = max(1, int(ttl_s * 1000))
        for _ in range(3):  # a lock that expires between SET and GET: try again
            if self.client.set(lock_key(target), _lock_value(lease), nx=True, px=ttl_ms):
                return lease
            raw = self.client.get(lock_key(target))
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
        return bool(self._renew(keys=[lock_key(lease.target)], args=[_lock_value(lease), ttl_ms]))

    def release_lock(self, lease: LockLease) -> bool:
        return bool(self._release(keys=[lock_key(lease.target)], args=[_lock_value(lease)]))

    # -- audit -----------------------------------------------------------------------------

    def append_audit(self, record: Mapping[str, JsonValue]) -> None:
        fields = {k: "" if v is None else str(v) for k, v in record.items()}
        self.client.xadd(AUDIT_STREAM, fields, maxlen=AUDIT_MAXLEN, approximate=True)

    def read_audit(self, limit: int) -> list[dict[str, str]]:
        """The newest ``limit`` records of the fleet's audit stream, oldest first (a read)."""
        return read_audit_stream(self.client, limit)

    def close(self) -> None:
        self.client.close()


def read_audit_stream(client: Any, limit: int = 100) -> list[dict[str, str]]:
    """The newest ``limit`` audit stream entries, oldest first (XREVRANGE: a read only)."""
    entries = client.xrevrange(AUDIT_STREAM, count=limit) or []
    rows: list[dict[str, str]] = []
    for _entry_id, fields in reversed(entries):
        rows.append({_text(k): _text(v) for k, v in fields.items()})
    return rows


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value
