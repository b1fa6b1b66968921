"""A model served by one backend out of several: ``one_left`` (WARN).

Each backend that stops serving a model is its own alert (``not_ready``, a drain's reminder),
but nothing said what they add up to: after one backend of three died and another was drained,
the model hung on the third alone, all clear but for the dead one's CRIT, and one more failure
(or a drain of the wrong backend) would leave it nothing. The rule names each model that has
two or more backends and exactly one serving: active, and not known to be failing its
readiness (a backend nothing vouches for counts as serving: no alarm from missing evidence).
A model with one backend by design is not named, nor one with none serving (the not-ready and
queue rules say that, CRIT).
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from gpucon.model.alert_base import AlertInputs, AlertThresholds, Found, Severity
from gpucon.model.fleet import Backend, BackendState

# the names given in an alert's text, at most (the detail screen lists them all)
NAMED = 3

_STATE = attrgetter("state")
_READY = attrgetter("ready")


def _all_serve(i: AlertInputs) -> bool:
    """True when every backend serves (the healthy fleet, most ticks): decided by columns read
    in C (at 2,048 GPUs ~14,000 backends) and one pass over the verdicts, without grouping the
    backends by model."""
    values = i.backends.values()
    states = list(map(_STATE, values))
    if states.count(BackendState.ACTIVE) != len(states):
        return False
    if any(lv.serving is False for lv in i.liveness.values()):
        return False
    return False not in list(map(_READY, values))


def _serves(b: Backend, i: AlertInputs) -> bool:
    if b.state is not BackendState.ACTIVE:
        return False
    lv = i.liveness.get(b.name)
    if lv is None:  # no verdict: the registry's word
        return b.ready is not False
    return lv.serving is not False


def _why_not(b: Backend, i: AlertInputs) -> str:
    if b.state is not BackendState.ACTIVE:
        return f"{b.name} {b.state.value}"
    return f"{b.name} not ready"


def one_left(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    if _all_serve(i):
        return
    by_model: dict[str, list[Backend]] = {}
    for b in i.backends.values():
        if b.model:
            by_model.setdefault(b.model, []).append(b)
    for model in sorted(by_model):
        backends = by_model[model]
        if len(backends) < 2:
            continue
        serving = [b for b in backends if _serves(b, i)]
        if len(serving) != 1:
            continue
        out = sorted((b for b in backends if b is not serving[0]), key=lambda b: b.name)
        why = ", ".join(_why_not(b, i) for b in out[:NAMED])
        more = f", {len(out) - NAMED} more" if len(out) > NAMED else ""
        yield (
            "one_left",
            model,
            Severity.WARNING,
            f"only {serving[0].name} serves {model} ({why}{more}): one more failure or drain "
            "leaves it nothing",
        )


RULES = (one_left,)
