"""Rebalance refuses weights that would send a model's traffic only to backends that are not
ready, when a ready one serves it now: refused before any write, naming the field."""

from __future__ import annotations

import pytest

from gpucon.actions import rebalance
from gpucon.errors import BadParams, ExitCode
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.liveness import BackendLiveness
from gpucon.model.snapshot import Snapshot


def fleet(*, b1_ready: bool = True) -> Snapshot:
    """b1 and b2 serve model m; b3 serves m too but its http check times out."""
    backends = {
        n: Backend(n, model="m", weight=1.0, state=BackendState.ACTIVE) for n in ("b1", "b2", "b3")
    }
    liveness = {
        "b1": BackendLiveness("b1", serving=b1_ready, because="http ready"),
        "b2": BackendLiveness("b2", serving=True, because="http ready"),
        "b3": BackendLiveness("b3", serving=False, because="http timeout"),
    }
    if not b1_ready:
        liveness["b2"] = BackendLiveness("b2", serving=False, because="http refused")
    return Snapshot(taken_at=1000.0, backends=backends, liveness=liveness)


def test_weights_that_send_everything_to_a_not_ready_backend_are_refused() -> None:
    with pytest.raises(BadParams) as info:
        rebalance.plan_rebalance(fleet(), {"weights": {"b1": 0, "b2": 0, "b3": 1}})
    assert info.value.field == "weights"
    assert info.value.exit_code is ExitCode.BAD_PARAMS
    assert info.value.problem == (
        "model m would be sent only to backends that are NOT READY: b3 (http timeout); "
        "keep a weight above 0 on a ready one (b1, b2); nothing was written"
    )


def test_weights_that_keep_one_ready_backend_are_planned() -> None:
    plan = rebalance.plan_rebalance(fleet(), {"weights": {"b1": 0, "b3": 1}})
    assert plan.params["weights"] == {"b1": 0.0, "b3": 1.0}


def test_weights_are_not_refused_when_nothing_ready_serves_the_model_now() -> None:
    # b1 and b2 are not ready either: moving weight among dead backends makes nothing worse
    plan = rebalance.plan_rebalance(fleet(b1_ready=False), {"weights": {"b1": 0, "b2": 0, "b3": 2}})
    assert plan.params["weights"] == {"b1": 0.0, "b2": 0.0, "b3": 2.0}
