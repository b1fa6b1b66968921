"""Backends named with control characters can be named: by their real name (the console's
selected row) or by the escaped form messages and listings print (the CLI)."""

from __future__ import annotations

import pytest

from gpucon.actions import drain, rebalance, undrain
from gpucon.actions.backends import find_backend
from gpucon.errors import BadParams
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.ids import escaped_name
from gpucon.model.snapshot import Snapshot

ODD = "b\x1b[31m1"
BIDI = "b\u202e2"


def fleet() -> Snapshot:
    names = (ODD, BIDI, "plain", "a\\b", "名前")
    backends = {
        n: Backend(n, slot_id=f"h/gpu{i}", weight=1.0, state=BackendState.ACTIVE)
        for i, n in enumerate(names)
    }
    return Snapshot(taken_at=1000.0, backends=backends)


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        (ODD, "b\\x1b[31m1"),
        (BIDI, "b\\u202e2"),
        ("plain", "plain"),
        ("a\\b", "a\\\\b"),
        ("名前", "名前"),
        ("tab\there", "tab\\x09here"),
        ("\U000e0041", "\\U000e0041"),
    ],
)
def test_the_escaped_form_is_printable_and_unambiguous(name: str, escaped: str) -> None:
    assert escaped_name(name) == escaped
    assert escaped.isprintable()


def test_a_backend_is_found_by_its_real_name_or_its_escaped_form() -> None:
    snap = fleet()
    for name in snap.backends:
        assert find_backend(snap, name).name == name
        assert find_backend(snap, escaped_name(name)).name == name
    assert find_backend(snap, " plain ").name == "plain"


def test_an_unknown_name_is_refused_with_the_known_names_escaped() -> None:
    with pytest.raises(BadParams) as caught:
        find_backend(fleet(), "ghost\x1b]0;owned\x07")
    message = str(caught.value)
    assert message.startswith("backend: unknown backend 'ghost\\x1b]0;owned\\x07'")
    assert "b\\x1b[31m1" in message and "\x1b" not in message


def test_drain_undrain_and_rebalance_act_on_the_real_name() -> None:
    snap = fleet()
    plan = drain.plan_drain(snap, {"backend": "b\\x1b[31m1", "timeout_s": 5})
    assert plan.target == ODD and plan.params["backends"] == [ODD]
    plan = drain.plan_drain(snap, {"backend": ODD, "timeout_s": 5})  # the console's row
    assert plan.target == ODD
    drained = {**snap.backends, ODD: Backend(ODD, slot_id="h/gpu0", state=BackendState.DRAINED)}
    plan = undrain.plan_undrain(Snapshot(taken_at=1000.0, backends=drained), {"backend": ODD})
    assert plan.target == ODD
    plan = rebalance.plan_rebalance(snap, {"weights": {"b\\x1b[31m1": 3}})
    assert ODD in plan.params["weights"]  # type: ignore[operator]


def test_a_reason_with_control_characters_is_still_refused_and_shown_escaped() -> None:
    with pytest.raises(BadParams, match=r"^reason: must not contain control or format .*\\x1b"):
        drain.plan_drain(fleet(), {"backend": "plain", "reason": "ok\x1b[2J"})
