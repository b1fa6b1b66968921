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
unchanged backend keeps the same ``BackendLiveness`` object from tick to tick (see
``gpucon.model.liveness_book``): the UI and the alert rules see no change and redraw nothing.

Each signal also carries since when it has said what it says now (``SignalSince``): the time
a source gives for the change (Prometheus's last sample of the other ``up`` value, the
scheduler's ``ready_since`` in ``gpucon:ready``), else the
first observation of the new value after this console saw the old one, else only a lower
bound ("for at least"): the first time this console saw it at all. ``aged_because`` writes the
verdict's words with those ages, as the not-ready alert and the detail screen show them.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from gpucon.model.ages import fmt_elapsed
from gpucon.model.fleet import Backend, LatencyStats
from gpucon.redact import redact


class ReadyCheck(msgspec.Struct, frozen=True, gc=False):
    """One backend's answer to ``GET /v2/health/ready`` (its time is its reading's)."""

    backend: str
    ready: bool
    # why it is not ready: "refused", "timeout", "status 503", ...
    error: str | None = None

    def __post_init__(self) -> None:
        # the text is shown (detail, alerts): a url it quotes keeps no credentials
        if self.error:
            msgspec.structs.force_setattr(self, "error", redact(self.error))


class TargetUp(msgspec.Struct, frozen=True, gc=False):
    """Prometheus's ``up`` for one scrape target (``instance`` is its host:port); ``since``:
    when it last had the other value, as Prometheus's own samples say (epoch seconds; None
    when not asked or not within the source's look-back)."""

    instance: str
    up: bool
    job: str | None = None
    since: float | None = None


class SignalSince(msgspec.Struct, frozen=True, gc=False):
    """Since when a signal has said what it says now (epoch seconds). ``seen`` False: only a
    lower bound, the first time this console saw it say so (it may have said so long before)."""

    at: float
    seen: bool = False

    def age(self, now: float) -> str:
        """``"for 45s"``, or ``"for ≥45s"`` when only this console's view bounds it; ``""``
        for a bound under 2 s (a console that has just looked knows nothing of how long)."""
        elapsed = max(0.0, now - self.at)
        if self.seen:
            return f"for {fmt_elapsed(elapsed)}"
        return "" if elapsed < 2 else f"for ≥{fmt_elapsed(elapsed)}"


class LivenessPolicy(msgspec.Struct, frozen=True, gc=False):
    """How old each signal may be and still count (seconds)."""

    http_max_age_s: float = 5.0
    prom_max_age_s: float = 15.0
    registry_max_age_s: float = 5.0
    # readiness signals that disagree longer than this are reported as disputed (serving None)
    dispute_after_s: float = 5.0


class BackendLiveness(msgspec.Struct, frozen=True, gc=False):
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
    # True: serving; False: not ready; None: no fresh signal, or a lasting disagreement
    serving: bool | None = None
    # what decided, in words ("http refused, prometheus up=0"); no ages, so it stays stable
    because: str = ""
    disputed: bool = False
    # since when each signal has said what it says now (``gpucon.model.liveness_book`` carries
    # them from tick to tick; ``judge`` alone knows only what a source dates)
    http_since: SignalSince | None = None
    prom_since: SignalSince | None = None
    registry_since: SignalSince | None = None

    def fault_began(self) -> SignalSince | None:
        """The earliest start among the signals that say not ready now (None: none says so):
        how old a not-ready fault is, exact where that signal's change was seen or dated."""
        objecting = [
            since
            for says_not, since in (
                (self.http_ready is False and self.http_fresh, self.http_since),
                (self.prom_up is False and self.prom_fresh, self.prom_since),
                (self.registry_ready is False and self.registry_fresh, self.registry_since),
            )
            if says_not and since is not None
        ]
        return min(objecting, key=lambda s: s.at) if objecting else None


# the verdict's words name their signal first: "http ...", "prometheus ...", "registry ..."
_SIGNAL_OF_WORD = (
    ("http ", "http_since"),
    ("prometheus ", "prom_since"),
    ("registry ", "registry_since"),
)


def aged_because(lv: BackendLiveness, now: float) -> str:
    """``because`` with each signal's age: ``"http refused for 45s, registry ready=0 for
    ≥45s, prometheus up=0 for 2m"`` (``≥``: as long as this console has watched it)."""
    parts = []
    for words in lv.because.split(", "):
        since: SignalSince | None = None
        for prefix, field in _SIGNAL_OF_WORD:
            if words.startswith(prefix):
                since = getattr(lv, field)
                break
        age = "" if since is None else since.age(now)
        if not age:
            parts.append(words)
            continue
        # "prometheus up=0 (no readiness signal)": the age goes with the value, before the note
        value, bracket, note = words.partition(" (")
        parts.append(f"{value} {age}{bracket}{note}")
    return ", ".join(parts)


def _since(
    before: tuple[bool | None, SignalSince | None] | None,
    value: bool | None,
    observed_at: float | None,
    dated: float | None = None,
) -> SignalSince | None:
    """Since when a signal has said ``value``: the source's date for it, else the last
    verdict's while the value is the same (``before``: its value and since), else this
    observation, seen as a change only when the last verdict knew another value."""
    if value is None or observed_at is None:
        return None
    if dated is not None:
        return SignalSince(min(dated, observed_at), seen=True)
    if before is None:
        return SignalSince(observed_at)
    before_value, before_since = before
    if before_since is not None and before_value == value:
        return before_since
    return SignalSince(observed_at, seen=before_value is not None)


def judge(
    b: Backend,
    check: tuple[ReadyCheck, str, float] | None,
    up: tuple[TargetUp, str, float] | None,
    now: float,
    policy: LivenessPolicy,
    disputed_for_s: float = 0.0,
    previous: BackendLiveness | None = None,
) -> BackendLiveness:
    """The verdict on one backend from its signals (pure); ``disputed_for_s``: how long its
    readiness signals have disagreed so far; ``previous``: the last verdict on it, whose
    signals' starts carry over while they say the same."""
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
        http_since=_since(
            None if previous is None else (previous.http_ready, previous.http_since),
            None if check is None else check[0].ready,
            None if check is None else check[2],
        ),
        prom_since=_since(
            None if previous is None else (previous.prom_up, previous.prom_since),
            None if up is None else up[0].up,
            None if up is None else up[2],
            None if up is None else up[0].since,
        ),
        registry_since=_since(
            None if previous is None else (previous.registry_ready, previous.registry_since),
            b.ready,
            ready_at,
            b.ready_since,
        ),
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


def dead_targets(liveness: Mapping[str, BackendLiveness]) -> list[str]:
    """The backends whose scrape target is down (fresh ``up`` = 0)."""
    return [n for n, lv in liveness.items() if lv.prom_up is False and lv.prom_fresh]


def withhold_dead_targets(
    latency: Mapping[str, LatencyStats],
    liveness: Mapping[str, BackendLiveness],
    dead: list[str] | None = None,
) -> dict[str, LatencyStats]:
    """Latency with the rates of backends whose scrape target is down (fresh ``up`` = 0)
    withheld: Prometheus computes them from samples taken before the target died, so they
    would show traffic that is no longer there. ``dead``: ``dead_targets(liveness)``, when
    the caller kept it."""
    if dead is None:
        dead = dead_targets(liveness)
    if not dead:
        return latency if isinstance(latency, dict) else dict(latency)
    out = dict(latency)
    for name in dead:
        stats = out.get(name)
        if stats is None:
            continue
        out[name] = msgspec.structs.replace(
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
