"""The registry read that does not block Redis: version-gated hashes, cheap reads each tick.

A backend hash changes only when someone acts, and every such write bumps
``gpucon:registry:version``. What changes all the time lives elsewhere: in-flight counts in
the ``gpucon:inflight`` hash (the scheduler's scripts count there), health verdicts in the
``gpucon:ready`` document (one JSON string the scheduler writes after each health round), and
whether the scheduler keeps them at all in its heartbeat (``gpucon:schedulers``,
``registry/heartbeat.py``). So a tick sends four plain commands — ``GET`` the version,
``HGETALL gpucon:inflight``, ``GET gpucon:ready``, ``HGETALL gpucon:schedulers`` — that the
caller may put in its own pipeline; only when the version moved (or
every ``full_refresh_s``, for writers that forget to bump it) does the reader fetch
``SMEMBERS`` and the backend hashes, pipelined without MULTI so the server serves other
clients between them. Round trips: 1 per tick, 2 when the registry changed, 3 when backends
were added. No script runs: every command is one a Redis ACL user limited to ``+@read`` may
send.

The version is read before the hashes it gates, so the hashes are never older than the version
kept with them; a write landing in between shows as a new version on the next tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from gpucon.model.fleet import Backend
from gpucon.registry import keys
from gpucon.registry.heartbeat import Heartbeat, parse_heartbeats
from gpucon.registry.parse import (
    READY_FIELDS,
    BackendRecord,
    parse_backend,
    parse_ready,
    parse_record,
)

TICK_COMMANDS = 4
DEFAULT_FULL_REFRESH_S = 60.0

# The Redis ACL rules of a user that can run a read-only console and nothing else (README:
# "Read-only consoles"): reads of the registry and the request streams, the connection's own
# commands (not CLIENT KILL or PAUSE: those are @dangerous), TIME, and the streams' read-only
# script (EVAL_RO, whose inner commands the same rules check). Every write is NOPERM.
READ_ONLY_ACL_RULES = (
    "resetkeys ~gpucon:* ~gen:* resetchannels nocommands "
    "+@read +@connection -@dangerous +time +eval_ro -@write"
)

# what one backend's live values were: (inflight text, (ready, ready_at[, ready_since]) texts)
Live = tuple[str | None, tuple[str, ...] | None]


class RegistryRead(msgspec.Struct, frozen=True, gc=False):
    """The registry as one read saw it."""

    version: int
    backends: tuple[Backend, ...]
    problems: tuple[str, ...]
    round_trips: int
    # the newest scheduler heartbeat; None when no scheduler writes one (liveness unknown)
    heartbeat: Heartbeat | None = None


def text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def decode_hash(raw: Mapping[Any, Any] | None) -> dict[str, str]:
    return {text(k): text(v) for k, v in (raw or {}).items()}


def live_fields(inflight: str | None, ready: tuple[str, ...] | None) -> dict[str, str]:
    """The per-request and per-health-check values of one backend, as hash fields."""
    fields = {} if ready is None else dict(zip(READY_FIELDS, ready, strict=False))
    if inflight is not None:
        fields["inflight"] = inflight
    return fields


def _version(raw: object, problems: list[str]) -> int:
    if raw is None:
        return 0
    try:
        return int(text(raw))
    except ValueError:
        problems.append(f"{keys.VERSION}: expected an integer, got {text(raw)!r:.40}")
        return -1


class RegistryReader:
    """Reads the registry tick after tick, re-reading backend hashes only when they changed."""

    def __init__(
        self,
        full_refresh_s: float = DEFAULT_FULL_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.full_refresh_s = full_refresh_s
        self.clock = clock
        self._version: int | None = None
        self._full_at = 0.0
        self._hashes: dict[str, dict[str, str]] = {}
        self._parsed: dict[str, tuple[Live, Backend, tuple[str, ...]]] = {}
        # the last health document and its parse: it changes once per health round
        self._ready_raw: object = None
        self._ready: tuple[dict[str, tuple[str, ...]], tuple[str, ...]] = ({}, ())

    def queue_tick(self, pipe: Any) -> int:
        """Add this tick's commands to ``pipe``; returns how many replies they take."""
        pipe.get(keys.VERSION)
        pipe.hgetall(keys.INFLIGHT)
        pipe.get(keys.READY)
        pipe.hgetall(keys.SCHEDULERS)
        return TICK_COMMANDS

    def read(self, client: Any) -> RegistryRead:
        """One read on its own: the tick's pipeline, then the hashes if they changed."""
        pipe = client.pipeline(transaction=False)
        self.queue_tick(pipe)
        replies: list[Any] = pipe.execute(raise_on_error=True)
        return self.finish(client, replies, round_trips=1)

    def finish(self, client: Any, replies: Sequence[Any], round_trips: int = 0) -> RegistryRead:
        """The registry from the tick's replies (``queue_tick``'s, in order), re-reading the
        backend hashes through ``client`` when the version moved. Errors in the replies raise."""
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        problems: list[str] = []
        version = _version(replies[0], problems)
        stale = self.clock() - self._full_at >= self.full_refresh_s
        if self._version is None or version != self._version or version < 0 or stale:
            round_trips += self._read_hashes(client)
            self._version = version
            self._full_at = self.clock()
        inflight = decode_hash(replies[1])
        if replies[2] != self._ready_raw:
            self._ready_raw = replies[2]
            self._ready = parse_ready(None if replies[2] is None else text(replies[2]))
        ready, ready_problems = self._ready
        problems.extend(ready_problems)
        heartbeat, beat_problems = parse_heartbeats(decode_hash(replies[3]))
        problems.extend(beat_problems)
        backends = []
        parsed = {}
        for name, fields in self._hashes.items():
            live: Live = (inflight.get(name), ready.get(name))
            known = self._parsed.get(name)
            if known is None or known[0] != live:
                merged = {**fields, **live_fields(*live)} if fields else fields
                known = (live, *parse_backend(name, merged))
            parsed[name] = known
            backends.append(known[1])
            problems.extend(known[2])
        self._parsed = parsed
        return RegistryRead(version, tuple(backends), tuple(problems), round_trips, heartbeat)

    def _read_hashes(self, client: Any) -> int:
        """SMEMBERS and every backend hash, non-transactional; returns the round trips."""
        known = sorted(self._hashes)
        pipe = client.pipeline(transaction=False)
        pipe.smembers(keys.BACKENDS)
        for name in known:
            pipe.hgetall(keys.backend_key(name))
        replies = pipe.execute(raise_on_error=True)
        names = sorted(text(n) for n in replies[0])
        hashes = dict(zip(known, (decode_hash(r) for r in replies[1:]), strict=True))
        added = [n for n in names if n not in hashes]
        trips = 1
        if added:
            pipe = client.pipeline(transaction=False)
            for name in added:
                pipe.hgetall(keys.backend_key(name))
            fetched = pipe.execute(raise_on_error=True)
            hashes.update(zip(added, map(decode_hash, fetched), strict=True))
            trips += 1
        self._hashes = {n: hashes[n] for n in names}
        self._parsed = {}  # the hashes may have changed under the same live values
        return trips


def read_once(client: Any) -> RegistryRead:
    """The whole registry, read once (the command line's planning read)."""
    return RegistryReader().read(client)


def read_record(client: Any, name: str) -> tuple[BackendRecord, tuple[str, ...]] | None:
    """One backend as a write sees it (its hash and its live values, one round trip), or None
    when the registry has no hash for it."""
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.backend_key(name))
    pipe.hget(keys.INFLIGHT, name)
    pipe.get(keys.READY)
    raw, inflight, ready = pipe.execute(raise_on_error=True)
    fields = decode_hash(raw)
    if not fields:
        return None
    verdicts, _ = parse_ready(None if ready is None else text(ready))
    live = live_fields(None if inflight is None else text(inflight), verdicts.get(name))
    return parse_record(name, {**fields, **live})
