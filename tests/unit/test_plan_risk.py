"""Plans that show the risk: a drain's takers' headroom, an undrain's alerts, WARN shown apart."""

from __future__ import annotations

from msgspec.structs import replace

from gpucon.actions import drain, undrain
from gpucon.actions.plan import Plan
from gpucon.actions.render import plan_lines
from gpucon.hub import Hub
from gpucon.model.alerts import Alert, Severity
from gpucon.model.fleet import Backend, BackendState, LatencyStats, Slot, SlotKind
from gpucon.model.liveness import BackendLiveness
from gpucon.model.snapshot import Snapshot
from gpucon.screens.plan import plan_text
from gpucon.sim import DEMO_SLO_P95_MS, build_sim_fleet
from gpucon.sim.source import SimSource

SLO = 14000.0


def fleet(activity: float, p95: float, rps: float = 0.1, takers: int = 4) -> Snapshot:
    """``b0`` to drain, serving 0.3 req/s; ``takers`` others at ``activity`` and ``p95``."""
    backends = {"b0": Backend("b0", slot_id="s0", model="sdxl", weight=1.0)}
    slots = {"s0": Slot("s0", SlotKind.MIG, activity_pct=50.0)}
    latency = {"b0": LatencyStats("b0", req_per_s=0.3, p95_ms=8000.0)}
    for i in range(1, takers + 1):
        backends[f"b{i}"] = Backend(f"b{i}", slot_id=f"s{i}", model="sdxl", weight=1.0)
        slots[f"s{i}"] = Slot(f"s{i}", SlotKind.MIG, activity_pct=activity)
        latency[f"b{i}"] = LatencyStats(f"b{i}", req_per_s=rps, p95_ms=p95)
    return Snapshot(
        taken_at=100.0,
        backends=backends,
        slots=slots,
        latency=latency,
        slo_p95_ms={n: SLO for n in backends},
    )


def precondition(plan: Plan, name: str) -> tuple[str, str]:
    found = {p.name: p for p in plan.preconditions}[name]
    return found.verdict, found.text


def test_drain_onto_backends_at_full_activity_and_4x_their_slo_warns() -> None:
    plan = drain.plan_drain(fleet(activity=100.0, p95=4 * SLO), {"backend": "b0"})
    assert precondition(plan, "others_serving:sdxl")[0] == "PASS"
    verdict, text = precondition(plan, "headroom:sdxl")
    assert verdict == "WARN"
    # the drained backend's share, then the model's total it is part of (0.3 + 4 × 0.1)
    assert text.startswith("4 backends take its 0.3 req/s (of sdxl's 0.7/s): no headroom (all 4")
    assert "b1 activity 100%, p95 56.0 s / SLO 14.0 s (4.0×)" in text
    assert plan.ok  # a warning, not a refusal: the operator may still drain a broken backend
    assert [p.name for p in plan.warnings] == ["headroom:sdxl"]
    lines = plan_lines(plan)
    assert any(line.startswith("  [WARN] headroom:sdxl: ") for line in lines)
    assert lines[-1].startswith("WARNING: 1 precondition(s) hold with a risk")


def test_drain_onto_backends_that_would_saturate_warns() -> None:
    # each taker at 60 % serving 0.1 req/s; the 0.3 req/s of b0 spread over two: 60 % → 100 %
    plan = drain.plan_drain(fleet(activity=60.0, p95=5000.0, takers=2), {"backend": "b0"})
    verdict, text = precondition(plan, "headroom:sdxl")
    assert verdict == "WARN"
    assert "0 over SLO or saturated now, the rest would be saturated" in text
    assert "b1 activity 60%, p95 5.0 s / SLO 14.0 s (0.36×) → ~100% after" in text


def test_drain_onto_backends_with_room_passes_and_shows_their_load() -> None:
    plan = drain.plan_drain(fleet(activity=20.0, p95=5000.0), {"backend": "b0"})
    verdict, text = precondition(plan, "headroom:sdxl")
    assert verdict == "PASS"
    # 0.3 req/s over four that serve 0.1 each: +75 %
    assert "b1 activity 20%, p95 5.0 s / SLO 14.0 s (0.36×) → ~35% after" in text
    assert not plan.warnings


def test_unknown_headroom_is_said_and_not_a_warning() -> None:
    snap = Snapshot(
        taken_at=1.0,
        backends={n: Backend(n, model="m", weight=1.0) for n in ("b1", "b2")},
    )
    plan = drain.plan_drain(snap, {"backend": "b1"})
    verdict, text = precondition(plan, "headroom:m")
    assert (verdict, text) == (
        "PASS",
        "1 backend takes its load (req/s n/a): headroom n/a (no activity or p95 known)",
    )


def hot(slot: str) -> Alert:
    return Alert(f"hot_slot:{slot}", "hot_slot", slot, Severity.WARNING, "activity ≥ 98%", 1.0)


def test_undrain_warns_about_alerts_on_its_slot() -> None:
    snap = fleet(activity=99.0, p95=5000.0)
    drained = Backend("b1", slot_id="s1", model="sdxl", weight=0.0, state=BackendState.DRAINED)
    snap = Snapshot(
        taken_at=snap.taken_at,
        backends={**snap.backends, "b1": drained},
        slots=snap.slots,
        alerts=(hot("s1"), hot("s2")),
    )
    plan = undrain.plan_undrain(snap, {"backend": "b1"})
    assert plan.ok
    verdict, text = precondition(plan, "alerts:s1")
    assert verdict == "WARN"
    assert text == (
        "1 alert(s) active on s1: hot_slot on s1 (activity ≥ 98%); "
        "it gets traffic again while they fire"
    )
    quiet = Snapshot(taken_at=1.0, backends={"b1": drained}, slots=snap.slots)
    assert not undrain.plan_undrain(quiet, {"backend": "b1"}).warnings


def test_a_node_undrain_warns_about_alerts_on_the_slots_it_returns() -> None:
    b1 = Backend("b1", slot_id="s1", weight=0.0, state=BackendState.DRAINED, node="n1")
    b2 = Backend("b2", slot_id="s2", weight=0.0, state=BackendState.DRAINED, node="n1")
    snap = Snapshot(taken_at=1.0, backends={"b1": b1, "b2": b2}, alerts=(hot("s2"),))
    plan = undrain.plan_undrain(snap, {"node": "n1", "kube": True})
    assert [p.name for p in plan.warnings] == ["alerts:s1, s2"]


def test_the_plan_screen_shows_warn_in_its_own_style() -> None:
    plan = drain.plan_drain(fleet(activity=100.0, p95=4 * SLO), {"backend": "b0"})
    text = plan_text(plan)
    assert " WARN  headroom:sdxl: " in text.plain
    styles = {text.plain[span.start : span.end]: str(span.style) for span in text.spans}
    assert styles[" WARN "] == "bold black on yellow"
    assert styles[" PASS "] == "bold green"
    assert plan.to_dict()["preconditions"][2] == {  # type: ignore[index]
        "name": "headroom:sdxl",
        "ok": True,
        "warning": True,
        "text": precondition(plan, "headroom:sdxl")[1],
    }


def test_in_the_burst_demo_a_drain_of_the_h200_warns_that_the_slices_are_full() -> None:
    clock_t = [1_800_000_000.0]
    source = SimSource(build_sim_fleet(7, "burst"), clock=lambda: clock_t[0])
    hub = Hub([source], clock=lambda: clock_t[0], slo_p95_ms_by_model=DEMO_SLO_P95_MS)
    for _ in range(240):
        clock_t[0] += 1.0
        hub.poll_once()
        snapshot = hub.tick()
    plan = drain.plan_drain(snapshot, {"backend": "sdxl-c0"})
    verdict, text = precondition(plan, "headroom:sdxl")
    assert verdict == "WARN" and "no headroom" in text
    assert "sdxl-a0-gi1 activity 100%" in text


def not_ready_fleet(target_state: BackendState = BackendState.ACTIVE) -> Snapshot:
    """``b0`` not ready (its http check refused), ``b1``/``b2`` serving, ``b3`` active but
    not ready either."""
    backends = {
        n: Backend(
            n, model="m", weight=1.0, state=target_state if n == "b0" else BackendState.ACTIVE
        )
        for n in ("b0", "b1", "b2", "b3")
    }
    dead = "http refused, prometheus up=0"
    liveness = {
        "b0": BackendLiveness("b0", serving=False, because=dead),
        "b1": BackendLiveness("b1", serving=True, because="http ready"),
        "b2": BackendLiveness("b2", serving=True, because="http ready"),
        "b3": BackendLiveness("b3", serving=False, because=dead),
    }
    return Snapshot(taken_at=1.0, backends=backends, liveness=liveness)


def test_draining_a_backend_that_is_not_ready_says_it_moves_no_load() -> None:
    plan = drain.plan_drain(not_ready_fleet(), {"backend": "b0"})
    verdict, text = precondition(plan, "state:b0")
    assert verdict == "PASS"
    assert text.startswith("b0 is active in the registry but NOT serving (http refused")
    assert "draining it moves no load" in text
    # b3 is active but not ready: it takes none of the load, and the plan says so
    _, serving = precondition(plan, "others_serving:m")
    # counted by what serves: b1 and b2; b3 is active but not ready
    assert serving == "2 other backends serving model m (1 more active but not ready)"
    _, room = precondition(plan, "headroom:m")
    assert room == "b0 not serving: draining moves no load; 2 backends serve m as before"
    assert plan.undo == "gpucon undrain b0 (restores the weight it had)"
    assert "n/a" not in room


def test_undrain_of_a_backend_that_is_not_ready_warns() -> None:
    snap = not_ready_fleet(BackendState.DRAINED)
    plan = undrain.plan_undrain(snap, {"backend": "b0"})
    verdict, text = precondition(plan, "serving:b0")
    assert verdict == "WARN" and text.startswith("b0 is not ready (http refused")
    assert plan.ok
    # with the reminder alert on it, the alerts' line says it, once
    reminder = Alert("not_ready:b0", "not_ready", "b0", Severity.INFO, "drained and not ready", 1.0)
    plan = undrain.plan_undrain(replace(snap, alerts=(reminder,)), {"backend": "b0"})
    names = [p.name for p in plan.warnings]
    assert "serving:b0" not in names and any(n.startswith("alerts:") for n in names)


def test_draining_onto_backends_that_are_all_down_warns() -> None:
    snap = not_ready_fleet()
    dead = BackendLiveness("b1", serving=False, because="http refused")
    liveness = {**snap.liveness, "b1": dead, "b2": replace(dead, name="b2")}
    plan = drain.plan_drain(replace(snap, liveness=liveness), {"backend": "b1"})
    verdict, text = precondition(plan, "others_serving:m")
    assert verdict == "WARN"
    assert text == (
        "no other backend serving model m: 3 active but not ready, so model m has no serving "
        "backend"
    )
    assert "headroom:m" not in {p.name for p in plan.preconditions}
    assert plan.ok  # a warning: draining a dead backend onto dead ones is still allowed


def test_draining_the_last_ready_backend_fails_unless_forced() -> None:
    """b1 serves; every other active backend of m is not ready: draining b1 leaves m with
    nothing serving, which is worse than before, so the plan refuses it without force."""
    snap = not_ready_fleet()
    dead = BackendLiveness("b2", serving=False, because="http refused")
    plan = drain.plan_drain(
        replace(snap, liveness={**snap.liveness, "b2": dead}), {"backend": "b1"}
    )
    verdict, text = precondition(plan, "others_serving:m")
    assert verdict == "FAIL"
    assert text == (
        "b1 is the last backend serving model m: 3 other active backends not ready, so nothing "
        "would serve model m (force to go ahead anyway)"
    )
    assert not plan.ok
    forced = drain.plan_drain(
        replace(snap, liveness={**snap.liveness, "b2": dead}), {"backend": "b1", "force": True}
    )
    verdict, _ = precondition(forced, "others_serving:m")
    assert verdict == "WARN" and forced.ok


def test_a_backend_left_draining_says_who_set_it_and_that_the_drain_finishes_it() -> None:
    """The next console after a drain was killed: the plan says the backend was left
    draining, by whom and why, not just 'is draining'."""
    snap = not_ready_fleet()
    left = replace(
        snap.backends["b1"], state=BackendState.DRAINING, owner="ann@h1", reason="bad fan"
    )
    plan = drain.plan_drain(
        replace(snap, backends={**snap.backends, "b1": left}), {"backend": "b1"}
    )
    verdict, text = precondition(plan, "state:b1")
    assert verdict == "PASS"
    assert text == "b1 is draining (set by ann@h1: bad fan): running this drain finishes it"
    assert plan.params["reason"] == "bad fan"
