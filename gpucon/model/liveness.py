"""Backend liveness: is each backend serving, which signal says so, and which says not.

Readiness is never assumed. Three signals can vouch for a backend:

- **http**: the backend's own ``GET /v2/health/ready`` (KServe v2), as a source checked it;
- **registry**: ``ready`` / ``ready_at`` that the scheduler writes after its own health check
  (only a recent ``ready_at`` counts: an old one means nobody is checking any more);
- **prometheus**: ``up`` of the backend's scrape target.

``up`` only says the metrics endpoint answered, not that the server takes work, so it decides
alone only when neither readiness signal is fresh. The verdict (``serving``) is True while
some fresh signal vouches and no readiness signal objects, False when the readiness signals
say not ready (or, without them, ``up`` is 0), and None when nothing fresh is known. When the
two readiness signals disagree, one has usually not seen a change yet (a kill, a restart):
the newer observation wins, and only a disagreement that lasts (``dispute_after_s``) makes
the verdict None, "disputed". A signal older than its limit (``LivenessPolicy``) is shown but
not counted.

Signals carry no per-tick timestamps of their own (a check's time is its reading's), so an
unchanged backend keeps the same ``BackendLiveness`` object from tick to tick: the UI and
the alert rules see no change and redraw nothing.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from gpucon.model.fleet import Backend, LatencyStats

if TYPE_CHECKING:
    from gpucon.model.reading import Reading

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReadyCheck:
    """One backend's answer to ``GET /v2/health/ready`` (its time is its reading's)."""

    backend: str
    ready: bool
    # why it is not ready: "refused", "timeout", "status 503", ...
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TargetUp:
    """Prometheus's ``up`` for one scrape target (``instance`` is its host:port)."""

    instance: str
    up: bool
    job: str | None = None


@dataclass(frozen=True, slots=True)
class LivenessPolicy:
    """How old each signal may be and still count (seconds)."""

    http_max_age_s: float = 5.0
    prom_max_age_s: float = 15.0
    registry_max_age_s: float = 5.0
    # readiness signals that disagree longer than this are reported as disputed (serving None)
    dispute_after_s: float = 5.0


@dataclass(frozen=True, slots=True)
class BackendLiveness:
    """What each signal says of one backend, and the verdict drawn from them.

    ``http_source`` / ``prom_source`` name the sources whose readings gave the http check and
    ``up`` (their ages are those sources' last good reads); a ``*_fresh`` False means the
    value is shown but was too old to count.
    """

    name: str
    http_ready: bool | None = None
    http_error: str | None = None
    http_source: str | None = None
    http_fresh: bool = False
    prom_up: bool | None = None
    prom_instance: str | None = None
    prom_source: str | None = None
    prom_fresh: bool = False
    registry_ready: bool | None = None
    registry_ready_at: float | None = None
    registry_fresh: bool = False
    # True: serving; False: not ready; None: no fresh signal, or the signals disagree
    serving: bool | None = None
    # what decided, in words ("http refused, prometheus up=0"); no ages, so it stays stable
    because: str = ""
    disputed: bool = False


Group = tuple[str, float, Mapping[str, T]]  # (source, reading time, entries by key)


@dataclass(frozen=True, slots=True)
class Signals:
    """The liveness signals of one tick: for each reading that carries any, its source, its
    time and its entries by key (``gather``); the first reading that knows a key wins."""

    checks: tuple[Group[ReadyCheck], ...] = ()
    ups: tuple[Group[TargetUp], ...] = ()

    def check(self, name: str) -> tuple[ReadyCheck, str, float] | None:
        for source, at, by_name in self.checks:
            c = by_name.get(name)
            if c is not None:
                return c, source, at
        return None

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
    only target on the url's host (Triton serves metrics on another port than inference)."""
    if not ups:
        return {}
    per_host: dict[str, list[str]] = {}
    for instance in ups:
        host = _host(instance)
        if host is not None:
            per_host.setdefault(host, []).append(instance)
    matched: dict[str, tuple[TargetUp, str, float]] = {}
    for name, b in backends.items():
        netloc, host = _split(b.url)
        hit = ups.get(netloc) if netloc else None
        if hit is None and host is not None and len(per_host.get(host, ())) == 1:
            hit = ups[per_host[host][0]]
        if hit is not None:
            matched[name] = hit
    return matched


def judge(
    b: Backend,
    check: tuple[ReadyCheck, str, float] | None,
    up: tuple[TargetUp, str, float] | None,
    now: float,
    policy: LivenessPolicy,
    disputed_for_s: float = 0.0,
) -> BackendLiveness:
    """The verdict on one backend from its signals (pure); ``disputed_for_s``: how long its
    readiness signals have disagreed so far."""
    http_fresh = check is not None and now - check[2] <= policy.http_max_age_s
    prom_fresh = up is not None and now - up[2] <= policy.prom_max_age_s
    ready_at = b.ready_at
    registry_fresh = (
        b.ready is not None and ready_at is not None and now - ready_at <= policy.registry_max_age_s
    )
    # (vouches, words, observed at) of each fresh readiness signal
    readiness: list[tuple[bool, str, float]] = []
    if check is not None and http_fresh:
        c, at = check[0], check[2]
        words = "http ready" if c.ready else f"http {c.error or 'not ready'}"
        readiness.append((c.ready, words, at))
    if registry_fresh and ready_at is not None:
        readiness.append((bool(b.ready), f"registry ready={1 if b.ready else 0}", ready_at))
    up_now = None if up is None or not prom_fresh else up[0].up
    serving: bool | None
    disputed = False
    if readiness:
        votes = {v for v, _, _ in readiness}
        if len(votes) == 1:
            serving = votes.pop()
        else:
            # one of them has not seen the change yet: the newest observation wins, unless
            # they have disagreed for longer than any change takes to reach both
            disputed = True
            newest = max(readiness, key=lambda r: r[2])
            serving = None if disputed_for_s >= policy.dispute_after_s else newest[0]
        words_list = [w for _, w, _ in readiness]
        # up=0 beside readiness that vouches is worth saying; up=1 beside not ready is not
        if up_now is not None and (serving is not False or not up_now):
            words_list.append(f"prometheus up={1 if up_now else 0}")
        because = ", ".join(words_list)
    elif up_now is not None:
        serving = up_now
        because = f"prometheus up={1 if up_now else 0} (no readiness signal)"
    else:
        serving = None
        because = _nothing_fresh(b, check, up)
    return BackendLiveness(
        name=b.name,
        http_ready=None if check is None else check[0].ready,
        http_error=None if check is None else check[0].error,
        http_source=None if check is None else check[1],
        http_fresh=http_fresh,
        prom_up=None if up is None else up[0].up,
        prom_instance=None if up is None else up[0].instance,
        prom_source=None if up is None else up[1],
        prom_fresh=prom_fresh,
        registry_ready=b.ready,
        registry_ready_at=ready_at,
        registry_fresh=registry_fresh,
        serving=serving,
        because=because,
        disputed=disputed,
    )


def _nothing_fresh(
    b: Backend,
    check: tuple[ReadyCheck, str, float] | None,
    up: tuple[TargetUp, str, float] | None,
) -> str:
    old = [
        what
        for what, known in (
            ("http check", check is not None),
            ("prometheus up", up is not None),
            ("registry ready_at", b.ready_at is not None),
        )
        if known
    ]
    if old:
        return "no fresh signal (" + ", ".join(old) + " too old)"
    if not b.url:
        return "no readiness signal (no url to check)"
    return "no readiness signal"


class LivenessBook:
    """Judges every backend each tick, reusing last tick's verdict where nothing changed.

    A verdict is kept while the backend's readiness fields, its check and its ``up`` (the same
    objects) and each signal's freshness are unchanged, so a fleet of thousands costs a dict
    walk.
    """

    def __init__(self, policy: LivenessPolicy | None = None) -> None:
        self.policy = policy or LivenessPolicy()
        self._cache: dict[str, tuple[object, ...]] = {}
        self._disputed_since: dict[str, float] = {}
        self._memo: dict[int, tuple[object, dict[str, object]]] = {}

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
        ups = match_targets(backends, signals.up_by_instance()) if signals.ups else {}
        cache = self._cache
        out: dict[str, BackendLiveness] = {}
        for name, b in backends.items():
            check: tuple[ReadyCheck, str, float] | None = None
            c: ReadyCheck | None = None
            c_fresh = False
            for src, at, fresh, by_name in groups:
                c = by_name.get(name)
                if c is not None:
                    check, c_fresh = (c, src, at), fresh
                    break
            up = ups.get(name)
            u = None if up is None else up[0]
            u_fresh = up is not None and now - up[2] <= p.prom_max_age_s
            ready_at = b.ready_at
            r_fresh = ready_at is not None and now - ready_at <= p.registry_max_age_s
            hit = cache.get(name)
            if (
                hit is not None
                and (hit[0] is b or hit[0] == (b.ready, ready_at, b.url))
                and hit[1] is c
                and hit[2] is u
                and hit[3] == (c_fresh, u_fresh, r_fresh)
            ):
                kept = hit[4]
                # a disputed verdict changes with time alone: judged again every tick
                if isinstance(kept, BackendLiveness) and not kept.disputed:
                    out[name] = kept
                    continue
            since = self._disputed_since.get(name, now)
            verdict = judge(b, check, up, now, p, now - since)
            if verdict.disputed:
                self._disputed_since.setdefault(name, now)
            else:
                self._disputed_since.pop(name, None)
            # the backend by what the verdict reads of it: a new inflight count changes nothing
            cache[name] = ((b.ready, ready_at, b.url), c, u, (c_fresh, u_fresh, r_fresh), verdict)
            out[name] = verdict
        if len(cache) > 2 * len(out) + 64:
            self._cache = {k: v for k, v in cache.items() if k in out}
        return out


def withhold_dead_targets(
    latency: Mapping[str, LatencyStats], liveness: Mapping[str, BackendLiveness]
) -> dict[str, LatencyStats]:
    """Latency with the rates of backends whose scrape target is down (fresh ``up`` = 0)
    withheld: Prometheus computes them from samples taken before the target died, so they
    would show traffic that is no longer there."""
    dead = [n for n, lv in liveness.items() if lv.prom_up is False and lv.prom_fresh]
    if not dead:
        return latency if isinstance(latency, dict) else dict(latency)
    out = dict(latency)
    for name in dead:
        stats = out.get(name)
        if stats is None:
            continue
        out[name] = dataclasses.replace(
            stats,
            req_per_s=None,
            p50_ms=None,
            p95_ms=None,
            p99_ms=None,
            error_rate=None,
            errors_by_reason=(),
            queue_ms=None,
            compute_ms=None,
            pending=None,
            avg_ms=None,
        )
    return out
