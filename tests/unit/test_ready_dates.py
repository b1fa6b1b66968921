"""``gpucon:ready``'s optional third element: when each verdict last changed.

The checker dates a change by the check that first saw it, only when its check before was
recent; a verdict it has only seen one way stays undated; a restarted checker starts from the
document in Redis. Old two-element documents read as before; the console dates its registry
signal by the third element (seen), else "for at least" as before.
"""

from __future__ import annotations

from gpucon.model.fleet import Backend
from gpucon.model.liveness import LivenessPolicy, SignalSince, judge
from gpucon.registry.parse import parse_ready, ready_text
from gpucon.registry.read import live_fields
from gpucon.registry.ready_dates import DATED_GAP_S, ReadyDates

T0 = 1_764_600_000.0


def test_a_change_is_dated_by_the_check_that_saw_it_and_kept_after() -> None:
    dates = ReadyDates()
    assert dates.update({"b1": (True, T0)}) == {}  # only ever seen ready: undated
    assert dates.update({"b1": (False, T0 + 0.5)}) == {"b1": T0 + 0.5}
    assert dates.update({"b1": (False, T0 + 1.0)}) == {"b1": T0 + 0.5}
    assert dates.update({"b1": (True, T0 + 1.5)}) == {"b1": T0 + 1.5}


def test_a_change_after_a_gap_is_not_dated() -> None:
    dates = ReadyDates()
    dates.update({"b1": (True, T0)})
    assert dates.update({"b1": (False, T0 + DATED_GAP_S + 1)}) == {}


def test_a_restarted_checker_keeps_the_dates_in_redis() -> None:
    dates = ReadyDates()
    dates.seed(ready_text({"b1": (False, T0), "b2": (True, T0)}, {"b1": T0 - 30}))
    assert dates.update({"b1": (False, T0 + 2), "b2": (False, T0 + 2)}) == {
        "b1": T0 - 30,
        "b2": T0 + 2,
    }


def test_documents_with_and_without_the_date_read() -> None:
    raw = ready_text({"b1": (False, T0 + 0.25), "b2": (True, T0)}, {"b1": T0 - 9})
    entries, problems = parse_ready(raw)
    assert problems == ()
    assert live_fields(None, entries["b1"]) == {
        "ready": "0",
        "ready_at": str(T0 + 0.25),
        "ready_since": str(T0 - 9),
    }
    assert live_fields(None, entries["b2"]) == {"ready": "1", "ready_at": str(T0)}
    assert parse_ready('{"b1": [1]}')[1]  # neither form: a problem


def test_the_console_dates_registry_not_ready_by_it() -> None:
    policy = LivenessPolicy()
    dated = Backend("b1", ready=False, ready_at=T0, ready_since=T0 - 45)
    lv = judge(dated, None, None, T0 + 1, policy)
    assert lv.registry_since == SignalSince(T0 - 45, seen=True)
    assert lv.registry_since.age(T0 + 1) == "for 45s"
    undated = Backend("b1", ready=False, ready_at=T0)  # an older scheduler: a lower bound
    lv = judge(undated, None, None, T0 + 1, policy)
    assert lv.registry_since == SignalSince(T0)
