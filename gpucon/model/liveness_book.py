"""Gathering the liveness signals of a tick and judging every backend with them, cheaply.

``gather`` indexes each reading's ready checks (by backend) and ``up`` series (by scrape
target); ``match_targets`` finds each backend's target by its url; ``LivenessBook`` keeps
last tick's verdicts and judges again (``gpucon.model.liveness.judge``) only the backends
whose signals or their freshness changed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from operator import eq
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import msgspec

from gpucon.model.fleet import Backend
from gpucon.model.liveness import (
    BackendLiveness,
    LivenessPolicy,
    ReadyCheck,
    TargetUp,
    judge,
)

if TYPE_CHECKING:
    from gpucon.model.reading import Reading

T = TypeVar("T")

Group = tuple[str, float, Mapping[str, T]]  # (source, reading time, entries by key)


class Signals(msgspec.Struct, frozen=True):
    """The liveness signals of one tick: for each reading that carries any, its source, its
    time and its entries by key (``gather``); the first reading that knows a key wins."""

    checks: tuple[Group[ReadyCheck], ...] = ()
    ups: tuple[Group[TargetUp], ...] = ()

    def up_by_instance(self) -> dict[str, tuple[TargetUp, str, float]]:
        found: dict[str, tuple[TargetUp, str, float]] = {}
        for source, at, by_instance in self.ups:
            for instance, u in by_instance.items():
                found.setdefault(instance, (u, source, at))
        return found


def gather(
    readings: Iterable[Reading], memo: dict[int, tuple[object, dict[str, object]]] | None = None
) -> Signals:
    """The signals the readings carry. ``memo`` keeps each reading's entries indexed by key
    while its tuple is the same object (a source that did not change them passes it on)."""
    memo = {} if memo is None else memo

    def index(entries: tuple[object, ...], key: Callable[[Any], str]) -> dict[str, Any]:
        hit = memo.get(id(entries))
        if hit is not None and hit[0] is entries:
            return hit[1]
        by_key: dict[str, object] = {}
        for e in entries:
            by_key.setdefault(key(e), e)
        memo[id(entries)] = (entries, by_key)
        return by_key

    checks: list[Group[ReadyCheck]] = []
    ups: list[Group[TargetUp]] = []
    for r in readings:
        if r.ready_checks:
            checks.append((r.source, r.taken_at, index(r.ready_checks, _backend_of)))
        if r.target_up:
            ups.append((r.source, r.taken_at, index(r.target_up, _instance_of)))
    return Signals(tuple(checks), tuple(ups))


def _backend_of(c: ReadyCheck) -> str:
    return c.backend


def _instance_of(u: TargetUp) -> str:
    return u.instance


@functools.lru_cache(maxsize=16384)
def _split(url: str | None) -> tuple[str | None, str | None]:
    """(host:port, host) of a url; (None, None) when it has none or is malformed."""
    if not url:
        return None, None
    try:
        parts = urlsplit(url)
        return parts.netloc or None, parts.hostname
    except ValueError:
        return None, None


def _host(instance: str) -> str | None:
    return _split(f"//{instance}")[1]


def match_targets(
    backends: Mapping[str, Backend], ups: Mapping[str, tuple[TargetUp, str, float]]
) -> dict[str, tuple[TargetUp, str, float]]:
    """``up`` per backend: the target whose instance is the backend url's host:port, else the
    only target on the url's host (Triton serves metrics on another port than inference) that
    is no other backend's own: a backend whose target was dropped from Prometheus's config
    took its neighbour's ``up=1`` on a host left with one target, and was vouched for by it."""
    if not ups:
        return {}
    matched: dict[str, tuple[TargetUp, str, float]] = {}
    owned: set[str] = set()  # the targets some backend's url names exactly
    misses: list[tuple[str, str]] = []  # (backend, its url's host) with no target of its own
    for name, b in backends.items():
        netloc, host = _split(b.url)
        if netloc and (hit := ups.get(netloc)) is not None:
            matched[name] = hit
            owned.add(netloc)
        elif host is not None:
            misses.append((name, host))
    if not misses:
        return matched
    per_host: dict[str, list[str]] = {}
    for instance in ups:
        host = _host(instance)
        if host is not None and instance not in owned:
            per_host.setdefault(host, []).append(instance)
    for name, host in misses:
        if len(per_host.get(host, ())) == 1:
            matched[name] = ups[per_host[host][0]]
    return matched


class LivenessBook:
    """Judges every backend each tick, reusing last tick's verdict where nothing changed.

    A verdict is kept while the backend's readiness fields, its check and its ``up`` (the same
    objects) and each signal's freshness are unchanged, so a fleet of thousands costs a dict
    walk.
    """

    def __init__(self, policy: LivenessPolicy | None = None) -> None:
        self.policy = policy or LivenessPolicy()
        # name -> (backend, check, up, the three freshnesses, verdict, its readiness fields)
        self._cache: dict[str, tuple[Any, ...]] = {}
        self._disputed_since: dict[str, float] = {}
        self._memo: dict[int, tuple[object, dict[str, object]]] = {}
        # the last call's verdicts and the backends' names they were judged for, in order
        self._last: dict[str, BackendLiveness] | None = None
        self._last_names: list[str] = []
        # what the last call's verdicts were read from, column by column (``_Read``), when it
        # had no ``up`` and no verdict disputed: the next call compares columns, not backends
        self._read: _Read | None = None

    def judge_readings(
        self, backends: Mapping[str, Backend], readings: Iterable[Reading], now: float
    ) -> dict[str, BackendLiveness]:
        """``judge_all`` over the signals the readings carry."""
        memo = self._memo
        signals = gather(readings, memo)
        if len(memo) > 2 * (len(signals.checks) + len(signals.ups)) + 8:
            live = {id(g[2]) for g in (*signals.checks, *signals.ups)}
            self._memo = {k: v for k, v in memo.items() if id(v[1]) in live}
        return self.judge_all(backends, signals, now)

    def judge_all(
        self, backends: Mapping[str, Backend], signals: Signals, now: float
    ) -> dict[str, BackendLiveness]:
        p = self.policy
        groups = [(src, at, now - at <= p.http_max_age_s, by) for src, at, by in signals.checks]
        read = None if signals.ups else _Read.of(backends, groups, now, p.registry_max_age_s)
        if read is not None and self._last is not None and read.same_as(self._read):
            # every backend reads what it read last call (its check, its readiness fields and
            # their freshness): every verdict is kept, none disputed, so the last mapping is
            # this call's, decided in a few comprehensions instead of a walk of the backends
            return self._last
        ups = match_targets(backends, signals.up_by_instance()) if signals.ups else {}
        cache = self._cache
        cached = cache.get
        prom_age, registry_age = p.prom_max_age_s, p.registry_max_age_s
        out: dict[str, BackendLiveness] = {}
        judged = False  # a verdict judged anew (not the cached one)
        disputed = False  # some verdict disputed (judged again next call, whatever it reads)
        # one source of checks (the usual case): its lookup bound once, no loop a backend
        only = groups[0] if len(groups) == 1 else None
        only_get = only[3].get if only is not None else None
        up: tuple[TargetUp, str, float] | None = None
        u: TargetUp | None = None
        u_fresh = False
        for name, b in backends.items():
            # the first group that checked this backend (its check's tuple is made only for
            # a backend judged again: most keep their verdict)
            found = None
            c: ReadyCheck | None = None
            if only_get is not None:
                c = only_get(name)
                if c is not None:
                    found = only
            else:
                for group in groups:
                    c = group[3].get(name)
                    if c is not None:
                        found = group
                        break
            c_fresh = found is not None and found[2]
            if ups:
                up = ups.get(name)
                u = None if up is None else up[0]
                u_fresh = up is not None and now - up[2] <= prom_age
            ready_at = b.ready_at
            r_fresh = ready_at is not None and now - ready_at <= registry_age
            hit = cached(name)
            # kept while the backend (the same object, or the fields the verdict reads), its
            # check and up (the same objects) and each signal's freshness are unchanged
            if (
                hit is not None
                and hit[1] is c
                and hit[2] is u
                and hit[3] is c_fresh
                and hit[4] is u_fresh
                and hit[5] is r_fresh
                # a new object with the same fields (a live source's every read): compared
                # field by field, no tuple built a backend
                and (hit[0] is b or (hit[7] == b.ready and hit[8] == ready_at and hit[9] == b.url))
            ):
                kept = hit[6]
                # a disputed verdict changes with time alone: judged again every tick
                if not kept.disputed:
                    out[name] = kept
                    continue
            since = self._disputed_since.get(name, now)
            check = None if found is None or c is None else (c, found[0], found[1])
            verdict = judge(b, check, up, now, p, now - since, None if hit is None else hit[6])
            judged = True
            if verdict.disputed:
                disputed = True
                self._disputed_since.setdefault(name, now)
            else:
                self._disputed_since.pop(name, None)
            # the backend by what the verdict reads of it: a new inflight count changes nothing
            cache[name] = (b, c, u, c_fresh, u_fresh, r_fresh, verdict, b.ready, ready_at, b.url)
            out[name] = verdict
        if len(cache) > 2 * len(out) + 64:
            self._cache = {k: v for k, v in cache.items() if k in out}
        # every verdict kept, for the same names in the same order: each is the one the last
        # call gave (a cached verdict changes only when judged anew), so the last mapping is
        # handed on, and whoever compares snapshots (the recorder, the UI) skips it by identity
        self._read = None if disputed else read
        names = list(backends)
        last = self._last
        if not judged and last is not None and names == self._last_names:
            return last
        self._last, self._last_names = out, names
        return out


class _Read:
    """What a call's verdicts read, as columns over the backends in order: the names, each
    one's readiness fields (ready, ready_at, url) and whether its ready_at is fresh, and of
    each check group its source, its freshness and its checks (the same mapping object)."""

    __slots__ = ("ats", "fresh", "groups", "names", "readies", "urls")

    def __init__(
        self,
        names: list[str],
        readies: list[bool | None],
        ats: list[float | None],
        urls: list[str | None],
        fresh: list[bool],
        groups: list[tuple[str, bool, object]],
    ) -> None:
        self.names = names
        self.readies = readies
        self.ats = ats
        self.urls = urls
        self.fresh = fresh
        self.groups = groups

    @classmethod
    def of(
        cls,
        backends: Mapping[str, Backend],
        groups: list[tuple[str, float, bool, Mapping[str, ReadyCheck]]],
        now: float,
        registry_age: float,
    ) -> _Read:
        bs = list(backends.values())
        ats = [b.ready_at for b in bs]
        return cls(
            list(backends),
            [b.ready for b in bs],
            ats,
            [b.url for b in bs],
            [at is not None and now - at <= registry_age for at in ats],
            [(src, fresh, by) for src, _, fresh, by in groups],
        )

    def same_as(self, last: _Read | None) -> bool:
        """True when every column equals ``last``'s: the checks the same objects, the values
        equal (a ready_at compared as ``==`` does, so a NaN never equals itself)."""
        return (
            last is not None
            and len(self.groups) == len(last.groups)
            and all(
                a[0] == b[0] and a[1] is b[1] and a[2] is b[2]
                for a, b in zip(self.groups, last.groups, strict=True)
            )
            and self.names == last.names
            and self.readies == last.readies
            and self.fresh == last.fresh
            and self.urls == last.urls
            and len(self.ats) == len(last.ats)
            and all(map(eq, self.ats, last.ats))
        )
