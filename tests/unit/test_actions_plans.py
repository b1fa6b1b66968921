"""Plans are pure and refuse bad params with messages naming the field."""

from __future__ import annotations

import copy
import math

import pytest

from gpucon.actions import drain, rebalance
from gpucon.actions.catalog import get_action
from gpucon.actions.plan import Tier
from gpucon.errors import BadParams, ExitCode
from gpucon.model.fleet import Backend, BackendState, Slot, SlotKind
from gpucon.model.history import History
from gpucon.model.snapshot import Snapshot


def fleet(**overrides: Backend) -> Snapshot:
    backends = {
        "b1": Backend("b1", slot_id="h/gpu0/gi1", weight=1.0, state=BackendState.ACTIVE),
        "b2": Backend("b2", slot_id="h/gpu0/gi2", weight=1.0, state=BackendState.ACTIVE),
        "b3": Backend("b3", slot_id="h/gpu1", weight=2.0, state=BackendState.ACTIVE),
    }
    backends.update(overrides)
    slots = {
        "h/gpu0/gi1": Slot("h/gpu0/gi1", SlotKind.MIG, sm_count=42),
        "h/gpu0/gi2": Slot("h/gpu0/gi2", SlotKind.MIG, sm_count=14),
        "h/gpu1": Slot("h/gpu1", SlotKind.GPU, sm_count=132),
    }
    return Snapshot(taken_at=1000.0, backends=backends, slots=slots)


def test_drain_plan_is_tier2_and_lists_steps_blast_radius_undo() -> None:
    snap = fleet()
    before = copy.deepcopy(snap)
    plan = drain.plan_drain(snap, {"backend": "b3", "reason": "xid 79", "timeout_s": 30})
    assert plan.tier is Tier.DISRUPTIVE
    assert plan.target == "b3"
    assert plan.ok
    assert [s.key for s in plan.steps] == ["draining:b3", "wait:b3", "drained:b3"]
    assert plan.blast_radius.backends == ("b3",)
    assert plan.blast_radius.slots == ("h/gpu1",)
    assert plan.blast_radius.capacity_pct == pytest.approx(50.0)
    assert "gpucon undrain b3" in plan.undo
    assert snap == before  # pure: the snapshot is untouched
    # same inputs, same plan, same digest
    assert drain.plan_drain(snap, {"backend": "b3", "reason": "xid 79", "timeout_s": 30}) == plan
    other = drain.plan_drain(snap, {"backend": "b3", "reason": "other", "timeout_s": 30})
    assert other.digest != plan.digest


def test_drain_of_last_serving_backend_fails_a_precondition_unless_forced() -> None:
    snap = fleet(
        b1=Backend("b1", weight=0.0, state=BackendState.DRAINED),
        b2=Backend("b2", weight=0.0, state=BackendState.DRAINING),
    )
    plan = drain.plan_drain(snap, {"backend": "b3"})
    assert not plan.ok
    assert [p.name for p in plan.failed_preconditions] == ["others_serving"]
    assert drain.plan_drain(snap, {"backend": "b3", "force": True}).ok


def test_drain_of_drained_backend_fails_a_precondition() -> None:
    snap = fleet(b1=Backend("b1", weight=0.0, state=BackendState.DRAINED))
    plan = drain.plan_drain(snap, {"backend": "b1"})
    assert [p.name for p in plan.failed_preconditions] == ["state:b1"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"backend": "nope"}, "backend"),
        ({}, "backend"),
        ({"backend": "b1", "timeout_s": -1}, "timeout_s"),
        ({"backend": "b1", "timeout_s": math.nan}, "timeout_s"),
        ({"backend": "b1", "timeout_s": 0}, "timeout_s"),
        ({"backend": "b1", "timeout_s": "soon"}, "timeout_s"),
        ({"backend": "b1", "reason": "\x1b[31mred"}, "reason"),
        ({"node": "no-such-node"}, "node"),
    ],
)
def test_drain_bad_params_name_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(BadParams) as info:
        drain.plan_drain(fleet(), params)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")
    assert info.value.exit_code is ExitCode.BAD_PARAMS


def test_node_drain_lists_cordon_and_evictions_after_backends() -> None:
    snap = fleet(
        b1=Backend("b1", weight=1.0, node="n1", pod="ml/b1-pod"),
        b2=Backend("b2", weight=1.0, node="n1", pod="ml/b2-pod"),
    )
    plan = drain.plan_drain(snap, {"node": "n1", "kube": True})
    keys = [s.key for s in plan.steps]
    assert keys == [
        "draining:b1",
        "draining:b2",
        "wait:b1",
        "wait:b2",
        "drained:b1",
        "drained:b2",
        "cordon:n1",
        "evict:ml/b1-pod",
        "evict:ml/b2-pod",
    ]
    assert plan.ok
    without_kube = drain.plan_drain(snap, {"node": "n1"})
    assert [p.name for p in without_kube.failed_preconditions] == ["kubernetes"]


def test_undrain_plan_requires_a_drained_backend() -> None:
    snap = fleet(b1=Backend("b1", weight=0.0, state=BackendState.DRAINED))
    plan = drain.plan_undrain(snap, {"backend": "b1"})
    assert plan.ok and plan.tier is Tier.REVERSIBLE
    assert not drain.plan_undrain(snap, {"backend": "b2"}).ok


def test_rebalance_proposes_from_sm_count_before_there_is_throughput() -> None:
    plan = rebalance.plan_rebalance(fleet(), {"registry_version": 7})
    weights = plan.params["weights"]
    # the total weight (4) split by SM share (42:14:132): b1's target 0.894 less the 2 % dead
    # band, b2 and b3 damped to ±25 %
    assert weights == {"b1": 0.914, "b2": 0.75, "b3": 2.5}
    assert "SM share" in plan.params["basis"]
    assert plan.params["reasons"]["b2"].startswith("SM share (14/188)")
    assert plan.registry_version == 7 and plan.ok
    assert any(line.startswith("b1: 1 → ") for line in plan.changes)
    assert plan.undo.startswith("gpucon rebalance --set b1=1 --set b2=1 --set b3=2")


def test_rebalance_prefers_throughput_within_slo() -> None:
    history = History()
    for t in range(30):
        within = t < 20
        history = history.append(
            float(t),
            {
                # b1 served more for 10 samples, but over the SLO: those do not count
                "backend:b1:rps": 10.0 if within else 50.0,
                "backend:b1:p95": 100.0 if within else 900.0,
                "backend:b1:service_ms": 1000.0,
                "backend:b2:service_ms": 1000.0,
                "backend:b3:service_ms": 1000.0,
                "slot:h/gpu0/gi1:activity": 50.0 if within else 100.0,
                "backend:b2:rps": 30.0,
                "backend:b2:p95": 100.0,
                "slot:h/gpu0/gi2:activity": 50.0,
                "backend:b3:rps": 60.0,
                "backend:b3:p95": 200.0,
                "slot:h/gpu1:activity": 50.0,
            },
        )
    snap = Snapshot(
        taken_at=29.0,
        backends=fleet(b1=Backend("b1", slot_id="h/gpu0/gi1", weight=0.5)).backends,
        slots=fleet().slots,
        history=history,
        slo_p95_ms={"b1": 500.0, "b2": 500.0, "b3": 500.0},
    )
    plan = rebalance.plan_rebalance(snap, {"registry_version": 1})
    # capacities 20, 60 and 120 req/s (req/s ÷ activity) of 1 s each; the total 3.5 split by
    # them: 0.35 (damped to 0.375), 1.05 and 2.1 (each less the 2 % dead band)
    assert plan.params["weights"] == {"b1": 0.375, "b2": 1.03, "b3": 2.06}
    reasons = plan.params["reasons"]
    assert reasons["b1"].startswith("sustains 20 req/s × 1 s = 20 in flight within SLO over 20")
    assert reasons["b3"].startswith("sustains 120 req/s × 1 s = 120 in flight within SLO over 30")


@pytest.mark.parametrize(
    ("weights", "field"),
    [
        ({"b1": math.nan}, "weights.b1"),
        ({"b1": -1.0}, "weights.b1"),
        ({"b2": math.inf}, "weights.b2"),
        ({"b1": "heavy"}, "weights.b1"),
        ({"ghost": 1.0}, "weights.ghost"),
        ({"b1": 0.0, "b2": 0.0, "b3": 0.0}, "weights"),
        ({}, "weights"),
    ],
)
def test_rebalance_refuses_bad_weights_naming_the_field(
    weights: dict[str, object], field: str
) -> None:
    with pytest.raises(BadParams) as info:
        rebalance.plan_rebalance(fleet(), {"weights": weights, "registry_version": 1})
    assert info.value.field == field
    assert str(info.value).startswith(field)


def test_rebalance_refuses_weight_for_a_draining_backend() -> None:
    snap = fleet(b1=Backend("b1", weight=0.0, state=BackendState.DRAINING))
    with pytest.raises(BadParams, match=r"weights\.b1: b1 is draining"):
        rebalance.plan_rebalance(snap, {"weights": {"b1": 1.0}, "registry_version": 1})


def test_rebalance_without_a_version_or_without_change_fails_preconditions() -> None:
    snap = fleet()
    no_version = rebalance.plan_rebalance(snap, {"weights": {"b1": 3.0}})
    assert [p.name for p in no_version.failed_preconditions] == ["registry_version"]
    same = rebalance.plan_rebalance(snap, {"weights": {"b1": 1.0}, "registry_version": 2})
    assert [p.name for p in same.failed_preconditions] == ["changes"]


def test_catalog_finds_each_action_and_refuses_unknown_names() -> None:
    # the catalog's plan is the action's, with a line per stale source ahead (none here)
    snap = fleet(b1=Backend("b1", model="m", weight=1.0), b2=Backend("b2", model="m", weight=1.0))
    made = get_action("drain").plan(snap, {"backend": "b1"})
    assert made == drain.plan_drain(snap, {"backend": "b1"})
    assert get_action("undrain").apply is drain.apply_undrain
    assert get_action("rebalance").tier is Tier.REVERSIBLE
    with pytest.raises(BadParams, match=r"^action: unknown action 'explode'"):
        get_action("explode")


def test_drain_of_the_last_backend_of_a_model_fails_even_if_others_serve() -> None:
    snap = fleet(
        b1=Backend("b1", model="llama", weight=1.0),
        b2=Backend("b2", model="bert", weight=1.0),
        b3=Backend("b3", model="bert", weight=2.0),
    )
    plan = drain.plan_drain(snap, {"backend": "b1"})
    assert [p.name for p in plan.failed_preconditions] == ["others_serving:llama"]
    assert "nothing would serve model llama" in plan.failed_preconditions[0].text
    assert drain.plan_drain(snap, {"backend": "b2"}).ok  # b3 still serves bert


def test_rebalance_says_why_a_registry_only_slot_has_no_capacity() -> None:
    """The lab's backends name their slots in the registry, and no GPU source reports them:
    the plan said "its slot is not known" beside a slot the table shows."""
    snap = Snapshot(
        taken_at=100.0,
        backends={
            "b1": Backend("b1", slot_id="lab/gpu0/gi1", model="m", weight=1.0),
            "b2": Backend("b2", model="m", weight=1.0),
        },
    )
    plan = rebalance.plan_rebalance(snap, {})
    text = "\n".join(plan.changes)
    assert (
        "b1: 1 → 1 (unchanged) · no capacity known (no GPU source (NVML, DCGM) reports its slot "
        "lab/gpu0/gi1, so neither its activity nor its SM count is known): kept"
    ) in text
    assert "b2: 1 → 1 (unchanged) · no capacity known (the registry names no slot" in text
    assert "is not known" not in text and "n/a" not in text


def test_drain_and_probe_give_one_backends_share_of_capacity_the_same_way() -> None:
    """The same backend, the same snapshot: the drain's and the probe's blast radius give the
    same share, each saying what happens to it; none reads like missing data."""
    from gpucon.actions import probe, undrain
    from gpucon.config import ProbeTarget

    snap = fleet()
    target = ProbeTarget(name="b3", url="http://10.0.0.3:8000", model="m")
    drained = drain.plan_drain(snap, {"backend": "b3"}).blast_radius
    probed = probe.plan(snap, {"target": "b3", "probe_targets": [target]}).blast_radius
    assert drained.capacity_pct == probed.capacity_pct == pytest.approx(50.0)
    assert drained.describe() == (
        "1 backend(s), 1 slot(s); 50% of fleet capacity taken out of service"
    )
    assert probed.describe() == (
        "1 backend(s), 1 slot(s); 50% of fleet capacity takes the probe's extra load "
        "(none taken out of service)"
    )
    # through the queue every active backend takes a part of the probe's load
    queued = probe.plan(
        snap,
        {"target": "b3", "probe_targets": [target], "via_queue": True, "redis_url": "redis://x"},
    ).blast_radius
    assert queued.capacity_pct == pytest.approx(100.0) and len(queued.backends) == 3
    # a target the scheduler sends nothing to has no share, and says why
    idle = fleet(b3=Backend("b3", slot_id="h/gpu1", weight=0.0, state=BackendState.DRAINED))
    none = probe.plan(idle, {"target": "b3", "probe_targets": [target]}).blast_radius
    assert none.capacity_pct is None
    assert none.describe().endswith(
        "no share of fleet capacity: the scheduler sends it no traffic (drained)"
    )
    back = undrain.plan_undrain(idle, {"backend": "b3"}).blast_radius
    assert back.describe().endswith("no fleet capacity taken out of service: it returns capacity")
    # an unreadable weight: the share is unknown, and the plan names whose
    bad = fleet(b1=Backend("b1", slot_id="h/gpu0/gi1", weight=None, state=BackendState.ACTIVE))
    unknown = drain.plan_drain(bad, {"backend": "b3"}).blast_radius
    assert unknown.capacity_pct is None
    assert "n/a" not in unknown.describe()
    assert unknown.describe().endswith(
        "share of fleet capacity unknown: the weight of b1 is not readable"
    )
