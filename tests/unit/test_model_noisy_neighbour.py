"""The noisy-neighbour hint on synthetic series, and the co-tenant sample it reads."""

from __future__ import annotations

import random

import pytest

from gpucon.model.alerts import Alert, AlertInputs, AlertThresholds, Severity, derive_alerts
from gpucon.model.cotenants import foreign_processes
from gpucon.model.fleet import (
    Backend,
    ComputeProcess,
    Health,
    Slot,
    SlotKind,
    SourceStatus,
)
from gpucon.model.history import History
from gpucon.model.history_samples import history_samples
from gpucon.model.merge import MergedFleet

T = AlertThresholds()
SLOT = "vm:vm-b-1"
SERVERS = (ComputeProcess(101, "tritonserver", 9000.0), ComputeProcess(102, "tritonserver", 5000.0))
ROGUE = ComputeProcess(31337, "python3 train_lora.py", 3800.0)


def vm(with_rogue: bool) -> Slot:
    procs = (*SERVERS, ROGUE) if with_rogue else SERVERS
    return Slot(SLOT, SlotKind.VM, mem_used_mib=15000.0, mem_total_mib=24576.0, processes=procs)


BACKENDS = {
    "sdxl-vm": Backend("sdxl-vm", slot_id=SLOT),
    "sd15-vm": Backend("sd15-vm", slot_id=SLOT),
}


def run(
    p95: list[float], co: list[float | None], other: list[float] | None = None
) -> tuple[History, float]:
    """History of the slot's memory, its co-tenants' memory and both backends' p95."""
    h = History(capacity=120)
    for k, (p, c) in enumerate(zip(p95, co, strict=True)):
        sample: dict[str, float | None] = {
            f"slot:{SLOT}:mem_used": 15000.0,
            "backend:sdxl-vm:p95": p,
            "backend:sd15-vm:p95": 2000.0 if other is None else other[k],
        }
        if c is not None:
            sample[f"slot:{SLOT}:cotenant_mem"] = c
        h = h.append(float(k), sample)
    return h, float(len(p95) - 1)


def derive(
    h: History, now: float, rogue: bool = True, previous: tuple[Alert, ...] = ()
) -> list[Alert]:
    i = AlertInputs(
        now,
        {SLOT: vm(rogue)},
        BACKENDS,
        {},
        {},
        {"sim": SourceStatus("sim", Health.OK, None, now, 0.01)},
        h,
    )
    return [a for a in derive_alerts(i, T, previous) if a.rule == "noisy_neighbour"]


def noisy(n: int, level: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [level * (1.0 + 0.04 * (rng.random() - 0.5)) for _ in range(n)]


def test_p95_rising_with_a_co_tenant_names_it_and_the_correlation() -> None:
    # 20 s calm at ~6 s p95; then train_lora.py appears and the p95 climbs 6 → 8 s in 5 s
    p95 = [*noisy(20, 6000.0), 6300.0, 6700.0, 7100.0, 7500.0, 8000.0]
    co: list[float | None] = [None] * 20 + [3800.0] * 5
    h, now = run(p95, co)
    (alert,) = derive(h, now)
    assert alert.target == SLOT and alert.severity is Severity.WARNING
    assert "python3 train_lora.py (pid 31337, 3.7 GiB)" in alert.message
    assert "p95 of sdxl-vm" in alert.message and "→ 8.0 s" in alert.message
    r = float(alert.message.split("r = ")[1].split()[0])
    assert r >= T.noisy_min_r and "over 24s" in alert.message
    # it holds while the co-tenant stays, though a flat series no longer correlates
    flat, later = run(p95 + [8000.0] * 40, co + [3800.0] * 40)
    assert [a.message for a in derive(flat, later, previous=(alert,))] == [alert.message]
    assert derive(flat, later) == []  # nothing measured, nothing held
    # and goes when the co-tenant does
    assert derive(flat, later, rogue=False, previous=(alert,)) == []


@pytest.mark.parametrize(
    ("p95", "co"),
    [
        # the co-tenant is there, the p95 does not move: no hint
        (noisy(25, 6000.0), [None] * 20 + [3800.0] * 5),
        # the p95 rises with no co-tenant in sight (load): no hint
        ([*noisy(20, 6000.0), 6300.0, 6700.0, 7100.0, 7500.0, 8000.0], [None] * 25),
        # the p95 rose long before the co-tenant came, flat since: weak r, no rise with it
        ([6000.0] * 5 + noisy(20, 8000.0), [None] * 22 + [3800.0] * 3),
    ],
)
def test_no_hint_without_a_rise_that_moves_with_the_co_tenant(
    p95: list[float], co: list[float | None]
) -> None:
    h, now = run(p95, co)
    assert derive(h, now) == []


def test_servers_and_the_mps_daemon_are_not_co_tenants() -> None:
    mps = ComputeProcess(7, "nvidia-cuda-mps-server", 30.0)
    assert foreign_processes((*SERVERS, mps), 2) == ()
    assert foreign_processes((*SERVERS, ROGUE), 2) == (ROGUE,)
    # a backend whose server runs as "python3 serve.py" is not its own neighbour
    assert foreign_processes((ComputeProcess(5, "python3 serve.py", 100.0),), 1) == ()


def test_the_co_tenant_sample_is_taken_only_while_there_is_one() -> None:
    def fleet(rogue: bool) -> MergedFleet:
        return MergedFleet({}, {SLOT: vm(rogue)}, dict(BACKENDS), {}, {}, {}, {})

    assert f"slot:{SLOT}:cotenant_mem" not in history_samples(fleet(False))
    assert history_samples(fleet(True))[f"slot:{SLOT}:cotenant_mem"] == 3800.0


def test_memory_growing_on_a_slot_with_a_co_tenant_names_it() -> None:
    h = History(capacity=120)
    for k in range(10):
        grown = 15000.0 + 500.0 * max(0, k - 5)
        sample: dict[str, float | None] = {f"slot:{SLOT}:mem_used": grown}
        if k > 5:
            sample[f"slot:{SLOT}:cotenant_mem"] = 3800.0
        h = h.append(float(k), sample)
    slot = Slot(SLOT, SlotKind.VM, mem_used_mib=17000.0, mem_total_mib=24576.0,
                processes=(*SERVERS, ROGUE))  # fmt: skip
    i = AlertInputs(9.0, {SLOT: slot}, BACKENDS, {}, {}, {}, h)
    (alert,) = [a for a in derive_alerts(i, T) if a.rule == "memory_trend"]
    assert alert.message.endswith("co-tenant python3 train_lora.py (pid 31337) holds 3.7 GiB")
