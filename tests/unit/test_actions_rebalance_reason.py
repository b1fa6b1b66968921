"""Rebalance's ``reason`` is validated like drain's and undrain's: refused, naming the field."""

from __future__ import annotations

import pytest

from gpucon.actions import drain, rebalance
from gpucon.errors import BadParams, ExitCode
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot


def fleet() -> Snapshot:
    backends = {
        "b1": Backend("b1", slot_id="h/gpu0", weight=1.0, state=BackendState.ACTIVE),
        "b2": Backend("b2", slot_id="h/gpu1", weight=1.0, state=BackendState.ACTIVE),
    }
    return Snapshot(taken_at=1000.0, backends=backends)


PARAMS = {"weights": {"b1": 3.0}, "registry_version": 4}


@pytest.mark.parametrize("reason", ["xid\x1b[2J79", "two\nlines", "bell\x07", "del\x7f", 42, "  "])
def test_a_bad_reason_is_refused_naming_the_field(reason: object) -> None:
    with pytest.raises(BadParams) as info:
        rebalance.plan_rebalance(fleet(), {**PARAMS, "reason": reason})
    assert info.value.field == "reason"
    assert str(info.value).startswith("reason: ")
    assert info.value.exit_code is ExitCode.BAD_PARAMS
    # the same refusal drain gives for the same text: one rule for every action
    with pytest.raises(BadParams) as drained:
        drain.plan_drain(fleet(), {"backend": "b1", "reason": reason})
    assert drained.value.problem == info.value.problem


def test_a_good_reason_is_kept_and_none_means_the_default() -> None:
    plan = rebalance.plan_rebalance(fleet(), {**PARAMS, "reason": "  capacity moved  "})
    assert plan.params["reason"] == "capacity moved"
    assert rebalance.plan_rebalance(fleet(), {**PARAMS, "reason": None}).params["reason"] == (
        "rebalanced with gpucon"
    )
    assert rebalance.plan_rebalance(fleet(), PARAMS).params["reason"] == "rebalanced with gpucon"
