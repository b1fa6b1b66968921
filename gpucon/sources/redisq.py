"""RedisQueueSource: the request queues (Redis Streams) and the scheduler registry, read-only.

One pipelined round trip per tick, whatever the number of streams and backends: ``TIME``;
per stream ``XLEN``, ``XINFO GROUPS``, ``XINFO CONSUMERS`` (how long since a consumer last
read: a dead scheduler stops reading), ``XPENDING`` (summary) and a read-only script that
finds the oldest entry not yet delivered to the group; and the registry's tick commands
(``gpucon.registry.read``: the version and the two shared live hashes). Backend hashes are
fetched, pipelined without MULTI, only when the registry version moved: one more round trip
then (two when backends were added). The script runs with ``EVAL_RO`` (Redis >= 7), which the
server refuses to run if it writes; a console run as a Redis ACL user without ``@write`` is
refused every write by the server itself (README: read-only consoles). The connection names
itself with ``CLIENT SETNAME`` so tests can tell its traffic apart.

The oldest waiting entry's age is taken on the server's clock (``TIME``) from the smaller of
the oldest pending entry (XPENDING) and the oldest undelivered one — not the oldest entry kept
in the stream, which may have been acknowledged long ago.

Garbage in the registry never raises: ``gpucon.registry.parse`` reads it (a bad field is
``None``, a missing or unknown state is ``down``) and the Reading is degraded with an error
that names the key and the field.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from msgspec.structs import replace

from gpucon.model.fleet import Backend, Health, QueueStats
from gpucon.model.reading import Reading, SchedulerBeat, failed_reading
from gpucon.registry.read import DEFAULT_FULL_REFRESH_S, RegistryReader
from gpucon.sources.base import describe_error
from gpucon.sources.connect import RedisAuth, redis_client
from gpucon.sources.problems import Problems

# replies per stream in the tick's pipeline: XLEN, XINFO GROUPS, XINFO CONSUMERS, XPENDING, script
PER_STREAM = 5

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
    """Reads stream queues and the backend registry: one pipelined round trip per tick, one more
    when the registry changed (``gpucon.registry.read``)."""

    name = "redis"

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        streams: Sequence[str] = ("gen:queue",),
        group: str = "g1",
        cadence_s: float = 1.0,
        timeout_s: float = 2.0,
        client_name: str = "gpucon",
        registry_refresh_s: float = DEFAULT_FULL_REFRESH_S,
        auth: RedisAuth | None = None,
    ) -> None:
        self.url = url
        self.auth = auth
        self.streams = tuple(streams)
        self.group = group
        self.cadence_s = cadence_s
        self.timeout_s = timeout_s
        self.client_name = client_name
        self._client: Any = None
        self._lock = threading.Lock()
        # keeps the backend hashes between ticks: re-read only when the registry changed
        self._registry = RegistryReader(full_refresh_s=registry_refresh_s)

    def _connect(self) -> Any:
        if self._client is None:
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            self._client = redis_client(
                self.url,
                self.auth,
                timeout_s=self.timeout_s,
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
                client = self._connect()
                replies = self._round_trip(client)
                problems = Problems()
                queues = self._queues(replies, problems)
                backends, round_trips, beat = self._backends(client, replies, problems)
            except Exception as exc:  # unreachable, timed out, refused: this read is down
                self._reset()
                return failed_reading(
                    self.name, started, time.perf_counter() - perf, describe_error(exc)
                )
        error = problems.summary()
        return Reading(
            source=self.name,
            health=Health.DEGRADED if error else Health.OK,
            taken_at=started,
            duration_s=time.perf_counter() - perf,
            error=error,
            backends=tuple(backends),
            queues=tuple(queues),
            scheduler_beat=beat,
            round_trips=round_trips,
        )

    def _round_trip(self, client: Any) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        pipe.time()
        for stream in self.streams:
            pipe.xlen(stream)
            pipe.xinfo_groups(stream)
            pipe.xinfo_consumers(stream, self.group)
            pipe.xpending(stream, self.group)
            pipe.eval_ro(OLDEST_UNDELIVERED_LUA, 1, stream, self.group)
        self._registry.queue_tick(pipe)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        # connection-level failures surface here; command errors stay per reply
        if isinstance(replies[0], Exception):
            raise replies[0]
        return replies

    def _queues(self, replies: list[Any], problems: Problems) -> list[QueueStats]:
        secs, usecs = replies[0]
        server_now_ms = secs * 1000.0 + usecs / 1000.0
        queues = []
        for i, stream in enumerate(self.streams):
            xlen, groups, consumers, pending, undelivered = replies[
                1 + PER_STREAM * i : 1 + PER_STREAM * (i + 1)
            ]
            queue = self._queue(stream, xlen, groups, pending, undelivered, server_now_ms, problems)
            if queue.group is not None:
                queue = replace(queue, consumer_idle_s=_least_idle_s(consumers))
            queues.append(queue)
        return queues

    def _backends(
        self, client: Any, replies: list[Any], problems: Problems
    ) -> tuple[list[Backend], int, SchedulerBeat | None]:
        """The registry's backends, the round trips this read took in all, and the newest
        scheduler heartbeat with its age on Redis's clock (``TIME``, the pipeline's first)."""
        tick = replies[1 + PER_STREAM * len(self.streams) :]
        refused = next((r for r in tick if isinstance(r, Exception)), None)
        if refused is not None:  # a wrong type or an ACL refusal: the queues still count
            problems.add(f"registry: {describe_error(refused)}")
            return [], 1, None
        import redis

        try:
            read = self._registry.finish(client, tick, round_trips=1)
        except redis.ResponseError as exc:  # refused by the server, not unreachable
            problems.add(f"registry: {describe_error(exc)}")
            return [], 2, None
        for text in read.problems:
            problems.add(text)
        beat = None
        if read.heartbeat is not None:
            secs, usecs = replies[0]
            age = secs + usecs / 1e6 - read.heartbeat.at  # below 0: its clock is ahead
            heartbeat = read.heartbeat
            beat = SchedulerBeat(
                heartbeat.scheduler, max(0.0, age), heartbeat.every_s, heartbeat.at, max(0.0, -age)
            )
        return list(read.backends), read.round_trips, beat

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
            entries_read=_entries_read(group.get("entries-read"), last),
        )

    def _reset(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            # closing a broken connection may fail; there is nothing to keep
            with contextlib.suppress(Exception):
                client.close()

    def close(self) -> None:
        self._reset()


def _least_idle_s(consumers: object) -> float | None:
    """Seconds since the group's most recently active consumer read; None when unknown."""
    if not isinstance(consumers, list):  # refused or not read
        return None
    idle = [c.get("idle") for c in consumers if isinstance(c, Mapping)]
    known = [ms for ms in idle if isinstance(ms, int) and not isinstance(ms, bool)]
    return min(known) / 1000.0 if known else None


def _entries_read(value: object, last_delivered: object) -> int | None:
    """A group's read count (XINFO GROUPS ``entries-read``, Redis 7): nil until a group made
    anew reads its first entry, which its last-delivered id ``0-0`` tells apart (read 0)."""
    count = _int_or_none(value)
    if count is None and last_delivered is not None and _text(last_delivered) == "0-0":
        return 0
    return count


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
