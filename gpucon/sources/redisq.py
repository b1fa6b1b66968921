"""RedisQueueSource: the request queues (Redis Streams) and the scheduler registry, read-only.

ONE pipelined round trip per tick, whatever the number of streams and backends:
``TIME``; per stream ``XLEN``, ``XINFO GROUPS``, ``XPENDING`` (summary) and a read-only
script that finds the oldest entry not yet delivered to the group; and one read-only script
that returns every ``gpucon:backend:*`` hash named in ``gpucon:backends`` (DESIGN.md's
contract). Scripts run with ``EVAL_RO`` (Redis ≥ 7), which the server refuses to run if they
write: this source cannot write, by construction. The connection names itself with
``CLIENT SETNAME`` (a connection command) so tests can tell its traffic apart.

The oldest waiting entry's age is taken on the server's clock (``TIME``) from the smaller of
the oldest pending entry (XPENDING) and the oldest undelivered one — not the oldest entry kept
in the stream, which may have been acknowledged long ago.

Garbage in the registry (a non-numeric weight, an unknown state) never raises: the field is
``None`` (an unknown state reads as ``down``), and the Reading is degraded with an error that
names the key and the field. Round trips per tick: 1, plus the connection handshake when a
connection is (re)opened.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from gpucon.model.fleet import Backend, BackendState, Health, QueueStats
from gpucon.model.ids import parse_slot_id
from gpucon.model.reading import Reading, failed_reading
from gpucon.sources.base import describe_error
from gpucon.sources.problems import Problems

BACKENDS_SET = "gpucon:backends"
BACKEND_PREFIX = "gpucon:backend:"

# KEYS[1] the set of backend names; ARGV[1] the hash key prefix. Returns {{name, {f, v, ...}}}.
REGISTRY_LUA = """
local names = redis.call('SMEMBERS', KEYS[1])
local out = {}
for i = 1, #names do
  out[i] = {names[i], redis.call('HGETALL', ARGV[1] .. names[i])}
end
return out
"""

# KEYS[1] stream; ARGV[1] group. The id of the oldest entry not yet delivered to the group,
# or nil (no such group, or nothing waiting).
OLDEST_UNDELIVERED_LUA = """
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])
if type(groups) ~= 'table' or groups.err then return false end
for _, g in ipairs(groups) do
  local name, last
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] end
    if g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
  if name == ARGV[1] and last then
    local r = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', 1)
    if #r == 0 then return false end
    return r[1][1]
  end
end
return false
"""

TRUE_WORDS = frozenset({"1", "true", "yes", "ready"})
FALSE_WORDS = frozenset({"0", "false", "no", "not-ready"})


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _id_ms(entry_id: object) -> int | None:
    """Milliseconds part of a stream entry id (``1700000000000-0``)."""
    if entry_id is None:
        return None
    try:
        return int(_text(entry_id).split("-", 1)[0])
    except ValueError:
        return None


class RedisQueueSource:
    """Reads stream queues and the backend registry in one pipelined round trip."""

    name = "redis"

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        streams: Sequence[str] = ("gen:queue",),
        group: str = "g1",
        cadence_s: float = 1.0,
        timeout_s: float = 2.0,
        client_name: str = "gpucon",
    ) -> None:
        self.url = url
        self.streams = tuple(streams)
        self.group = group
        self.cadence_s = cadence_s
        self.timeout_s = timeout_s
        self.client_name = client_name
        self._client: Any = None
        self._lock = threading.Lock()
        # raw registry entry -> (Backend, problems): unchanged hashes are not parsed again
        self._parsed: dict[Hashable, tuple[Backend | None, tuple[str, ...]]] = {}

    def _connect(self) -> Any:
        if self._client is None:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            self._client = redis.Redis.from_url(
                self.url,
                socket_timeout=self.timeout_s,
                socket_connect_timeout=self.timeout_s,
                client_name=self.client_name,
                retry=Retry(NoBackoff(), 0),  # the hub's backoff decides when to retry
                decode_responses=False,
                max_connections=2,
            )
        return self._client

    def read(self) -> Reading:
        started = time.time()
        perf = time.perf_counter()
        with self._lock:
            try:
                replies = self._round_trip(self._connect())
            except Exception as exc:  # unreachable, timed out, refused: this read is down
                self._reset()
                return failed_reading(
                    self.name, started, time.perf_counter() - perf, describe_error(exc)
                )
        problems = Problems()
        queues, backends = self._parse(replies, problems)
        error = problems.summary()
        return Reading(
            source=self.name,
            health=Health.DEGRADED if error else Health.OK,
            taken_at=started,
            duration_s=time.perf_counter() - perf,
            error=error,
            backends=tuple(backends),
            queues=tuple(queues),
            round_trips=1,
        )

    def _round_trip(self, client: Any) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        pipe.time()
        for stream in self.streams:
            pipe.xlen(stream)
            pipe.xinfo_groups(stream)
            pipe.xpending(stream, self.group)
            pipe.eval_ro(OLDEST_UNDELIVERED_LUA, 1, stream, self.group)
        pipe.eval_ro(REGISTRY_LUA, 1, BACKENDS_SET, BACKEND_PREFIX)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        # connection-level failures surface here; command errors stay per reply
        if isinstance(replies[0], Exception):
            raise replies[0]
        return replies

    def _parse(
        self, replies: list[Any], problems: Problems
    ) -> tuple[list[QueueStats], list[Backend]]:
        secs, usecs = replies[0]
        server_now_ms = secs * 1000.0 + usecs / 1000.0
        queues = []
        for i, stream in enumerate(self.streams):
            xlen, groups, pending, undelivered = replies[1 + 4 * i : 5 + 4 * i]
            queues.append(
                self._queue(stream, xlen, groups, pending, undelivered, server_now_ms, problems)
            )
        registry = replies[-1]
        if isinstance(registry, Exception):
            problems.add(f"registry: {describe_error(registry)}")
            return queues, []
        parsed: dict[Hashable, tuple[Backend | None, tuple[str, ...]]] = {}
        backends: list[Backend] = []
        for entry in registry:
            key = _entry_key(entry)
            known = self._parsed.get(key) if key is not None else None
            if known is None:
                found = Problems()
                known = (parse_backend(entry, found), tuple(found.all))
            if key is not None:
                parsed[key] = known
            backend, texts = known
            for text in texts:
                problems.add(text)
            if backend is not None:
                backends.append(backend)
        self._parsed = parsed
        return queues, backends

    def _queue(
        self,
        stream: str,
        xlen: object,
        groups: object,
        pending: object,
        undelivered: object,
        server_now_ms: float,
        problems: Problems,
    ) -> QueueStats:
        length = xlen if isinstance(xlen, int) else None
        if isinstance(groups, Exception):
            problems.add(f"stream {stream}: does not exist")
            return QueueStats(stream=stream, length=length)
        group = next(
            (g for g in groups if isinstance(g, Mapping) and _text(g.get("name")) == self.group),  # type: ignore[attr-defined]
            None,
        )
        if group is None:
            problems.add(f"stream {stream}: no consumer group {self.group!r}")
            return QueueStats(stream=stream, length=length)
        oldest_ms = [
            ms
            for ms in (
                _id_ms(pending.get("min")) if isinstance(pending, Mapping) else None,
                _id_ms(undelivered),
            )
            if ms is not None
        ]
        age = max(0.0, (server_now_ms - min(oldest_ms)) / 1000.0) if oldest_ms else 0.0
        lag = group.get("lag")
        last = group.get("last-delivered-id")
        return QueueStats(
            stream=stream,
            length=length,
            group=self.group,
            pending=_int_or_none(group.get("pending")),
            lag=_int_or_none(lag),
            oldest_age_s=age,
            last_delivered_id=None if last is None else _text(last),
            consumers=_int_or_none(group.get("consumers")),
        )

    def _reset(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            # closing a broken connection may fail; there is nothing to keep
            with contextlib.suppress(Exception):
                client.close()

    def close(self) -> None:
        self._reset()


def _entry_key(entry: object) -> Hashable | None:
    """A hashable copy of a registry entry ``[name, [field, value, ...]]``."""
    if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list):
        return (entry[0], tuple(entry[1]))
    return None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_backend(entry: object, problems: Problems) -> Backend | None:
    """A Backend from ``[name, [field, value, ...]]``; garbage fields become None, noted."""
    if not isinstance(entry, list | tuple) or len(entry) != 2:
        problems.add(f"registry: unexpected reply {entry!r:.60}")
        return None
    name = _text(entry[0])
    flat = entry[1] if isinstance(entry[1], list | tuple) else []
    fields = {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}
    key = f"{BACKEND_PREFIX}{name}"
    if not fields:
        problems.add(f"{key}: missing (named in {BACKENDS_SET})")
        return Backend(name=name, state=BackendState.DOWN)

    def bad(field: str, expected: str) -> None:
        problems.add(f"{key} field {field}: expected {expected}, got {fields[field]!r:.40}")

    slot_id = fields.get("slot") or None
    if slot_id is not None:
        try:
            parse_slot_id(slot_id)
        except ValueError:
            bad("slot", "a slot id (host/gpuN, host/gpuN/giM or vm:NAME)")
            slot_id = None
    weight: float | None = None
    if "weight" in fields:
        try:
            weight = float(fields["weight"])
        except ValueError:
            weight = None
        if weight is None or not math.isfinite(weight) or weight < 0:
            bad("weight", "a number ≥ 0")
            weight = None
    state = BackendState.DOWN
    try:
        state = BackendState(fields.get("state", ""))
    except ValueError:
        if "state" in fields:
            bad("state", "active, draining, drained or down")
        else:
            problems.add(f"{key}: no state field (read as down)")
    inflight: int | None = None
    if "inflight" in fields:
        try:
            inflight = int(fields["inflight"])
        except ValueError:
            bad("inflight", "an integer")
    ready: bool | None = None
    if "ready" in fields:
        word = fields["ready"].strip().lower()
        if word in TRUE_WORDS or word in FALSE_WORDS:
            ready = word in TRUE_WORDS
        else:
            bad("ready", "1/true or 0/false")
    ready_at: float | None = None
    if "ready_at" in fields:
        try:
            ready_at = float(fields["ready_at"])
        except ValueError:
            ready_at = None
        if ready_at is None or not math.isfinite(ready_at) or ready_at < 0:
            bad("ready_at", "epoch seconds")
            ready_at = None
    return Backend(
        name=name,
        slot_id=slot_id,
        url=fields.get("url") or None,
        model=fields.get("model") or None,
        weight=weight,
        state=state,
        inflight=inflight,
        ready=ready,
        ready_at=ready_at,
        owner=fields.get("owner") or None,
        reason=fields.get("reason") or None,
        pod=fields.get("pod") or None,
        node=fields.get("node") or None,
    )
