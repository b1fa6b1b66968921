"""The one parser of a registry hash and the state table, without a server."""

from __future__ import annotations

import pytest

from gpucon.errors import BadParams, StateMoved
from gpucon.model.fleet import Backend, BackendState
from gpucon.registry import states
from gpucon.registry.parse import (
    BackendRecord,
    parse_backend,
    parse_ready,
    parse_record,
    ready_text,
)

GOOD = {"slot": "h/gpu0/gi1", "url": "http://h:1", "model": "m", "weight": "1.5",
        "state": "active", "inflight": "3", "ready": "1", "ready_at": "1764600000.5"}  # fmt: skip


def test_a_good_hash() -> None:
    backend, problems = parse_backend("b1", GOOD)
    assert problems == ()
    assert backend == Backend(
        name="b1", slot_id="h/gpu0/gi1", url="http://h:1", model="m", weight=1.5,
        state=BackendState.ACTIVE, inflight=3, ready=True, ready_at=1764600000.5,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "read_as", "problem"),
    [
        ("weight", "-3", None, "gpucon:backend:b1 field weight: expected a number >= 0, got '-3'"),
        ("weight", "nan", None, "field weight: expected a number >= 0, got 'nan'"),
        ("weight", "inf", None, "field weight"),
        ("weight", "heavy", None, "field weight"),
        ("inflight", "-1", None, "field inflight: expected an integer >= 0"),
        ("inflight", "2.5", None, "field inflight"),
        ("ready", "maybe", None, "field ready: expected 1/true or 0/false"),
        ("ready_at", "yesterday", None, "field ready_at: expected epoch seconds"),
        ("slot", "not a slot", None, "field slot: expected a slot id"),
        ("state", "exploded", BackendState.DOWN, "field state: expected active, draining"),
    ],
)
def test_garbage_is_none_and_named(field: str, value: str, read_as: object, problem: str) -> None:
    backend, problems = parse_backend("b1", {**GOOD, field: value})
    got = getattr(backend, "slot_id" if field == "slot" else field)
    assert got == read_as
    assert len(problems) == 1 and problem in problems[0]


def test_no_state_is_down_and_an_empty_hash_is_missing() -> None:
    backend, problems = parse_backend("b1", {k: v for k, v in GOOD.items() if k != "state"})
    assert backend.state is BackendState.DOWN
    assert problems == ("gpucon:backend:b1: no state field (read as down)",)
    missing, problems = parse_backend("b2", {})
    assert missing == Backend(name="b2", state=BackendState.DOWN)
    assert problems == ("gpucon:backend:b2: missing (named in gpucon:backends)",)


def test_the_record_adds_the_remembered_weight() -> None:
    record, problems = parse_record("b1", {**GOOD, "weight_before_drain": "2"})
    assert (record.weight_before_drain, record.state, record.weight, problems) == (
        2.0, BackendState.ACTIVE, 1.5, (),
    )  # fmt: skip
    bad, problems = parse_record("b1", {**GOOD, "weight_before_drain": "-1"})
    assert bad.weight_before_drain is None and "weight_before_drain" in problems[0]


def test_the_ready_document_round_trips_and_garbage_is_named() -> None:
    text = ready_text({"b1": (True, 1764600000.25), "b2": (False, 5.0)})
    assert parse_ready(text) == ({"b1": ("1", "1764600000.25"), "b2": ("0", "5.0")}, ())
    assert parse_ready(None) == ({}, ())
    assert parse_ready("[1, 2]")[1] == ("gpucon:ready: expected a JSON object, got '[1, 2]'",)
    entries, problems = parse_ready('{"b1": 1, "b2": [1, 2.0]}')
    assert entries == {"b2": ("1", "2.0")} and "'b1'" in problems[0]


A, G, D, W = (BackendState.ACTIVE, BackendState.DRAINING, BackendState.DRAINED,
              BackendState.DOWN)  # fmt: skip
ALLOWED = {(A, G), (G, G), (G, D), (G, A), (D, A), (W, G)}


@pytest.mark.parametrize("start", list(BackendState))
@pytest.mark.parametrize("target", [A, G, D])
def test_the_table(start: BackendState, target: BackendState) -> None:
    if (start, target) in ALLOWED:
        states.check_transition("b1", start, target)
    else:
        with pytest.raises(StateMoved):
            states.check_transition("b1", start, target)


def test_gpucon_never_sets_down_or_nonsense() -> None:
    for new in ("down", "paused"):
        with pytest.raises(BadParams, match="is not a state gpucon sets"):
            states.check_transition("b1", "active", new)


def test_what_the_moves_write() -> None:
    active = BackendRecord(Backend("b1", weight=2.0, state=A))
    drain = states.begin_drain(active, "ann@h1", "xid", now=10.0)
    assert drain.hash_fields() == {"state": "draining", "owner": "ann@h1", "reason": "xid",
                                   "changed_at": "10.0", "weight": "0",
                                   "weight_before_drain": "2.0"}  # fmt: skip
    assert drain.result == 2.0 and drain.deleted_fields() == ()
    again = BackendRecord(Backend("b1", weight=0.0, state=G), weight_before_drain=2.0)
    assert states.begin_drain(again, "ann@h1", "retry", now=11.0).weight_before_drain == 2.0
    drained = BackendRecord(Backend("b1", weight=0.0, state=D), weight_before_drain=2.0)
    back = states.undrain(drained, "ann@h1", "ok", now=12.0, default_weight=1.0)
    assert (back.state, back.weight, back.result, back.deleted_fields()) == (
        A, 2.0, 2.0, ("weight_before_drain",),
    )  # fmt: skip
    with pytest.raises(StateMoved):
        states.begin_drain(drained, "ann@h1", "twice", now=13.0)
