"""The risk a plan shows before it moves load: the takers' headroom, the alerts it walks into.

Drain: the backends that keep serving a model take the drained backends' load. The plan shows
each one's activity and p95 against its SLO now, and projects their activity once the load
has moved (it spreads in proportion to what each serves now, and activity grows with the
work). It WARNs when none of them has room: each is over its SLO, saturated, or would be
saturated after the move. It is a warning and not a refusal on purpose: the backend being
drained is often the broken one (XID errors, a noisy neighbour), and taking it out can be right
even when the rest are hot. The operator must be able to do it from the console at 2 AM, and
must see what it costs before confirming. ("Nothing would serve the model" stays a FAIL.)

The drain's preconditions on the backends that keep serving are here too (``others_serving``):
an active backend that is not ready takes no load, so it is not counted among them, and a
backend being drained that is not serving is said to move no load (``state_line``).

Undrain: alerts firing on the backend or its slot now. The backend is about to get traffic
again; an alert there (a hot slot, low memory, p95 over SLO) means it may fail the requests it
gets, so the plan WARNs and names them.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucon.actions.load import (
    SATURATED_PCT,
    BackendLoad,
    alerts_on,
    backend_load,
    not_serving,
)
from gpucon.actions.plan import Precondition
from gpucon.actions.recheck import changed_by
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot

SHOWN = 4  # backends listed by name in a precondition line; the rest are counted


def _moved_rps(snapshot: Snapshot, leaving: Sequence[Backend]) -> float | None:
    rates = [snapshot.latency.get(b.name) for b in leaving]
    known = [lat.req_per_s for lat in rates if lat is not None and lat.req_per_s is not None]
    return sum(known) if known else None


def _model_rps(snapshot: Snapshot, model: str) -> float | None:
    """What the model's backends serve in all (every backend for "", the queue's)."""
    rates = [
        lat.req_per_s
        for b in snapshot.backends.values()
        if not model or b.model == model
        if (lat := snapshot.latency.get(b.name)) is not None and lat.req_per_s is not None
    ]
    return sum(rates) if rates else None


def counted(count: int, noun: str) -> str:
    """``1 backend``, ``2 backends``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _projected(load: BackendLoad, growth: float | None) -> float | None:
    """The taker's activity once the load moved; None when either is unknown."""
    if load.activity_pct is None or growth is None:
        return None
    return min(100.0, load.activity_pct * (1.0 + growth))


def _has_room(load: BackendLoad, projected: float | None) -> bool | None:
    """True/False when known; None when neither activity nor p95 is known."""
    if load.over_slo or load.saturated:
        return False
    if projected is not None and projected >= SATURATED_PCT:
        return False
    if load.activity_pct is None and load.p95_ms is None:
        return None
    return True


def headroom(
    snapshot: Snapshot, model: str, leaving: Sequence[Backend], takers: Sequence[Backend]
) -> Precondition:
    """PASS when some taker has room for the load, WARN when none has; "n/a" when unknown."""
    name = f"headroom:{model}" if model else "headroom"
    what = model or "the queue"
    idle = [b.name for b in leaving if not_serving(snapshot, b) is not None]
    if leaving and len(idle) == len(leaving):  # the scheduler sends them nothing now
        return Precondition(
            name,
            True,
            f"{', '.join(idle[:SHOWN])} not serving: draining moves no load; "
            f"{counted(len(takers), 'backend')} serve {what} as before",
        )
    loads = [backend_load(snapshot, b) for b in takers]
    moved = _moved_rps(snapshot, leaving)
    served = [ld.req_per_s for ld in loads if ld.req_per_s is not None]
    growth = moved / sum(served) if moved is not None and served and sum(served) > 0 else None
    rooms = [_has_room(ld, _projected(ld, growth)) for ld in loads]
    # the drained backends' share, and the model's total it is part of: "its 7.37 req/s (of
    # bert-base's 21/s)", not the model's name on the drained backend's share
    whose = "its" if len(leaving) == 1 else "their"
    moving = f"{whose} load (req/s n/a)" if moved is None else f"{whose} {moved:.3g} req/s"
    total = _model_rps(snapshot, model)
    of_total = "" if moved is None or total is None else f" (of {what}'s {total:.3g}/s)"
    verb = "takes" if len(loads) == 1 else "take"
    head = f"{counted(len(loads), 'backend')} {verb} {moving}{of_total}"
    if all(r is None for r in rooms):
        return Precondition(name, True, f"{head}: headroom n/a (no activity or p95 known)")
    parts = []
    for load in loads[:SHOWN]:
        projected = _projected(load, growth)
        after = "" if projected is None else f" → ~{projected:.0f}% after"
        parts.append(f"{load.name} {load.describe()}{after}")
    if len(loads) > SHOWN:
        parts.append(f"and {len(loads) - SHOWN} more")
    detail = "; ".join(parts)
    if not any(rooms):
        hot = sum(1 for ld in loads if ld.over_slo or ld.saturated)
        why = (
            f"all {len(loads)} are over SLO or saturated now"
            if hot == len(loads)
            else f"{hot} over SLO or saturated now, the rest would be saturated"
        )
        return Precondition(name, True, f"{head}: no headroom ({why}): {detail}", warning=True)
    full = sum(1 for r in rooms if r is False)
    note = f" ({full} of them without room)" if full else ""
    return Precondition(name, True, f"{head}{note}: {detail}")


def alerts_warning(snapshot: Snapshot, backends: Sequence[Backend]) -> Precondition | None:
    """A WARN naming the alerts that fire on the backends or their slots; None when none do."""
    seen: dict[str, str] = {}
    for b in backends:
        for alert in alerts_on(snapshot, b):
            seen.setdefault(alert.key, f"{alert.rule} on {alert.target} ({alert.message})")
    if not seen:
        return None
    slots = sorted({b.slot_id for b in backends if b.slot_id})
    where = ", ".join(slots) if slots else ", ".join(b.name for b in backends)
    listed = "; ".join(seen[k] for k in sorted(seen)[:SHOWN])
    more = f"; and {len(seen) - SHOWN} more" if len(seen) > SHOWN else ""
    text = (
        f"{len(seen)} alert(s) active on {where}: {listed}{more}; "
        "it gets traffic again while they fire"
    )
    return Precondition(f"alerts:{where}", True, text, warning=True)


def others_serving(
    snapshot: Snapshot, draining: tuple[Backend, ...], force: bool
) -> list[Precondition]:
    """For each model the drain takes backends from, another active backend must serve it,
    and the plan says whether those have room for the load (``headroom``)."""
    names = {b.name for b in draining}
    active = [
        b
        for b in snapshot.backends.values()
        if b.name not in names and b.state is BackendState.ACTIVE and (b.weight or 0.0) > 0
    ]
    # an active backend that is not ready takes no load now: said, and left out of headroom
    down = {b.name for b in active if not_serving(snapshot, b) is not None}
    checks = []
    for model in sorted({b.model or "" for b in draining}):
        # a backend without a model can serve anything, as far as gpucon knows
        others = [b for b in active if not model or not b.model or b.model == model]
        live = [b for b in others if b.name not in down]
        what = f"model {model}" if model else "the queue"
        ok = bool(others)
        # counted by what serves: an active backend that is not ready serves nothing
        idle = len(others) - len(live)
        # the drain's own backends of this model that serve now: the last of them to go
        # leaves the model with nothing serving (worse than before), which needs force
        serving_now = [
            b.name
            for b in draining
            if (not model or b.model == model) and not_serving(snapshot, b) is None
            if b.state is BackendState.ACTIVE and (b.weight or 0.0) > 0
        ]
        if not ok:
            text = f"no other active backend: nothing would serve {what} (force to go ahead anyway)"
        elif not live and serving_now:
            ok = False
            last = "is the last backend" if len(serving_now) == 1 else "are the last backends"
            text = (
                f"{', '.join(serving_now[:SHOWN])} {last} serving {what}: "
                f"{counted(idle, 'other active backend')} not ready, so nothing would serve "
                f"{what} (force to go ahead anyway)"
            )
        elif not live:
            text = (
                f"no other backend serving {what}: {idle} active but not ready, "
                f"so {what} has no serving backend"
            )
        else:
            text = f"{counted(len(live), 'other backend')} serving {what}"
            if idle:
                text += f" ({idle} more active but not ready)"
        name = f"others_serving:{model}" if model else "others_serving"
        checks.append(Precondition(name, ok or force, text, warning=(ok or force) and not live))
        if live:
            leaving = [b for b in draining if not model or b.model == model]
            checks.append(headroom(snapshot, model, leaving, live))
    return checks


def kept_serving_by(
    snapshot: Snapshot, draining: Sequence[Backend], force: bool
) -> dict[str, list[str]]:
    """For each backend the drain takes from a model it serves now, the other backends its
    plan counts on to keep serving that model (every one serving now): the drain's first write
    checks, in its own transaction, that one of them is still active (reading them in order and
    stopping at the first that serves, so a large fleet costs one read), so
    two drains planned at once cannot both take a model's last serving backends. None for a
    forced drain, or a backend that serves nothing now (draining it moves no load)."""
    if force:
        return {}
    names = {b.name for b in draining}
    kept: dict[str, list[str]] = {}
    for b in draining:
        if b.state is not BackendState.ACTIVE or not (b.weight or 0.0) > 0:
            continue
        if not_serving(snapshot, b) is not None:
            continue
        others = sorted(
            o.name
            for o in snapshot.backends.values()
            if o.name not in names and o.state is BackendState.ACTIVE and (o.weight or 0.0) > 0
            if not b.model or not o.model or o.model == b.model
            if not_serving(snapshot, o) is None
        )
        if others:
            kept[b.name] = others
    return kept


def state_line(snapshot: Snapshot, b: Backend, node: str | None) -> Precondition:
    """The backend's state, and whether it serves: a backend that is not ready gets no
    traffic, so draining it moves no load (it only keeps the scheduler from sending it any
    once it is ready again)."""
    ok = b.state is not BackendState.DRAINED
    text = f"{b.name} is {b.state}" + ("" if ok else ": already drained, nothing to do")
    why = not_serving(snapshot, b)
    if ok and why is not None and b.state is not BackendState.DOWN:  # "down" says it already
        text = (
            f"{b.name} is {b.state} in the registry but NOT serving ({why}): draining it moves "
            "no load, it keeps the scheduler off it once it is ready again"
        )
    if b.state is BackendState.DRAINING:  # a drain that stopped (timed out, killed) left it
        text += f"{changed_by(b)}: running this drain finishes it"
    return Precondition(f"state:{b.name}", ok or node is not None, text)
