"""Re-slice through the NVML executor: the real Redis registry, and an NVML STAND-IN holding the
recorded A100-80GB table (tests/helpers/nvml_mig_standin.py: real placement and occupancy
rules, NVML's InUse and InsufficientResources). The card here is never reconfigured."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest
import redis
from msgspec.structs import replace

from gpucon.actions import reslice, reslice_apply
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus, Plan, ProgressEvent
from gpucon.actions.registry_snapshot import read_registry
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.mig import GpuRef, MigError, NvmlMig
from gpucon.controls.mig_smi import SmiMig
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.fleet import BackendState, ComputeProcess, Gpu, Slot, SlotKind
from gpucon.model.snapshot import Snapshot
from tests.helpers.mig_tables import table
from tests.helpers.nvidia_smi_standin import NvidiaSmiStandIn
from tests.helpers.nvml_mig_standin import NvmlMigStandIn

pytestmark = pytest.mark.integration

UUID = "GPU-a100-standin"
TARGET = [("1g.10gb", 2, True), ("1g.10gb", 3, True), ("2g.20gb", 0, True), ("3g.40gb", 4, True)]


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("sdxl-1", "http://127.0.0.1:1", "sdxl", "h/gpu0/gi1", weight=2.0),
            BackendRecord("sd15-2", "http://127.0.0.1:2", "sd15", "h/gpu0/gi2", weight=1.0),
            BackendRecord("sdxl-9", "http://127.0.0.1:9", "sdxl", "h2/gpu0", weight=1.0),
            BackendRecord("sd15-9", "http://127.0.0.1:8", "sd15", "h2/gpu1", weight=1.0),
        ],
    )
    yield c
    c.close()


@pytest.fixture
def standin() -> NvmlMigStandIn:
    """The GPU as a team left it: 4g.40gb at 0 and 2g.20gb at 4, a compute instance each."""
    s = NvmlMigStandIn(table("a100_80gb"), uuid=UUID)
    mig = NvmlMig(s)
    gpu = GpuRef("h", 0, UUID)
    for pid, start, size in ((5, 0, 4), (14, 4, 2)):
        mig.create_ci(gpu, mig.create_gi(gpu, pid, start, size))
    s.calls.clear()
    return s


def snapshot_of(client: redis.Redis, standin: NvmlMigStandIn) -> Snapshot:
    """The registry as gpucon reads it, plus the GPU and its slots as the NVML source would."""
    registry, _ = read_registry(client)
    t = standin.table
    gpu = Gpu(UUID, "h", 0, "NVIDIA A100-SXM4-80GB", mig_enabled=True, mig_profiles=t)
    slots = {}
    for gi in standin.gis.values():
        sid = f"h/gpu0/gi{gi.gi_id}"
        pids = [
            ComputeProcess(p)
            for (g, _), ps in standin.processes.items()
            if g == gi.gi_id
            for p in ps
        ]
        slots[sid] = Slot(
            sid,
            SlotKind.MIG,
            "h",
            UUID,
            0,
            profile=gi.profile.name,
            gi_id=gi.gi_id,
            ci_id=0,
            sm_count=gi.profile.sm_count,
            mem_total_mib=gi.profile.memory_mib,
            processes=tuple(pids),
        )
    return replace(registry, gpus={UUID: gpu}, slots=slots)


def controls_for(redis_url: str, tmp_path: Path, standin: NvmlMigStandIn) -> Controls:
    registry = RedisRegistry.from_url(redis_url)
    audit = AuditLog(tmp_path / "audit.jsonl", registry.append_audit)
    return Controls(registry, audit, "ann@h1", mig=NvmlMig(standin))


def plan_for(snapshot: Snapshot) -> Plan:
    params = {"gpu": "h/gpu0", "layout": "3g.40gb+2g.20gb+2x1g.10gb", "executor": "nvml"}
    return reslice.plan_reslice(snapshot, params | {"poll_s": 0.01, "timeout_s": 5})


def test_a_server_still_running_stops_the_reslice_before_any_instance_is_touched(
    client: redis.Redis, redis_url: str, tmp_path: Path, standin: NvmlMigStandIn
) -> None:
    standin.add_process(1, 0, 4242)
    plan = plan_for(snapshot_of(client, standin))
    assert [p.name for p in plan.warnings] == ["processes"]
    controls = controls_for(redis_url, tmp_path, standin)
    outcome = execute(reslice_apply.apply_reslice, plan, controls, lambda e: None)
    assert outcome.status is OutcomeStatus.FAILED and "pid 4242" in outcome.message
    assert standin.calls == []  # nothing destroyed
    assert "gi1@0, gi2@4" in outcome.state_left
    for name in ("sdxl-1", "sd15-2"):  # drained, and left so
        record = controls.registry.backend(name)
        assert record is not None and record.state is BackendState.DRAINED

    # NVML itself refuses too: InUse, whatever gpucon checked first
    with pytest.raises(MigError) as refused:
        NvmlMig(standin).destroy_ci(GpuRef("h", 0, UUID), 1, 0)
    assert refused.value.code == pynvml.NVML_ERROR_IN_USE

    standin.processes.clear()  # the operator stopped the drained server: run it again
    again = execute(reslice_apply.apply_reslice, plan, controls, lambda e: None)
    assert again.ok, again
    assert standin.layout() == TARGET


def test_a_crash_between_steps_then_a_rerun_converges(
    client: redis.Redis, redis_url: str, tmp_path: Path, standin: NvmlMigStandIn
) -> None:
    plan = plan_for(snapshot_of(client, standin))
    assert plan.ok, plan.failed_preconditions
    assert plan.params["assignment"] == {"sdxl-1": 3, "sd15-2": 0}
    controls = controls_for(redis_url, tmp_path, standin)
    # the third instance cannot be created: the run stops there, two exist
    standin.fail_next("nvmlGpuInstanceCreateComputeInstance", pynvml.NVML_ERROR_UNKNOWN)
    first = execute(reslice_apply.apply_reslice, plan, controls, lambda e: None)
    assert first.status is OutcomeStatus.FAILED
    assert "create:0" in first.message
    assert standin.layout() == [("2g.20gb", 0, False)]
    # the rerun of the same plan keeps what is there, creates only what is missing
    standin.calls.clear()
    events: list[ProgressEvent] = []
    second = execute(reslice_apply.apply_reslice, plan, controls, events.append)
    assert second.ok, second
    assert standin.layout() == TARGET
    creates = [c for c in standin.calls if c[0] == "create_gi"]
    assert len(creates) == 3  # 2g.20gb at 0 was there already (its compute instance added)
    assert ("create_ci", 1, 1) in standin.calls
    texts = {e.step: e.text for e in events if str(e.status) == "done"}
    assert texts["destroy:gi1"].startswith("already gone")  # id 1 is the new 2g.20gb now
    slots = {n: controls.registry.backend(n) for n in ("sdxl-1", "sd15-2")}
    assert slots["sdxl-1"] is not None and slots["sdxl-1"].slot_id == "h/gpu0/gi4"
    assert slots["sd15-2"] is not None and slots["sd15-2"].slot_id == "h/gpu0/gi1"
    assert all(r is not None and r.state is BackendState.ACTIVE for r in slots.values())
    assert controls.registry.backend("sdxl-1").weight == 2.0  # type: ignore[union-attr]
    # a third run finds everything in place and changes nothing
    standin.calls.clear()
    assert execute(reslice_apply.apply_reslice, plan, controls, lambda e: None).ok
    assert standin.calls == []
    events_logged = [r.event for r in read_audit(tmp_path / "audit.jsonl")]
    assert events_logged.count("intent") == 3 and events_logged.count("outcome") == 3


def test_nvml_refuses_as_nvml_does(standin: NvmlMigStandIn) -> None:
    mig = NvmlMig(standin)
    gpu = GpuRef("h", 0, UUID)
    with pytest.raises(MigError) as overlap:  # 1g at slice 5 is inside 2g.20gb at 4
        mig.create_gi(gpu, 19, 5, 1)
    assert overlap.value.code == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    with pytest.raises(MigError) as bad_start:  # 1g may start at 0..6, not 7
        mig.create_gi(gpu, 19, 7, 1)
    assert bad_start.value.code == pynvml.NVML_ERROR_INVALID_ARGUMENT
    with pytest.raises(MigError) as in_use:  # a compute instance is still in it
        mig.destroy_gi(gpu, 1)
    assert in_use.value.code == pynvml.NVML_ERROR_IN_USE
    instances = mig.instances(gpu)
    assert [(g.profile_id, g.start, g.size, g.ci_ids) for g in instances] == [
        (5, 0, 4, (0,)),
        (14, 4, 2, (0,)),
    ]


def test_a_layout_without_placement_is_refused_before_anything(
    client: redis.Redis, standin: NvmlMigStandIn
) -> None:
    snapshot = snapshot_of(client, standin)
    plan = reslice.plan_reslice(
        snapshot, {"gpu": "h/gpu0", "layout": "2x3g.40gb+1x1g.10gb", "executor": "nvml"}
    )
    (failed,) = plan.failed_preconditions
    assert failed.name == "layout" and "1g.10gb has no free start" in failed.text
    off = replace(snapshot, gpus={UUID: replace(snapshot.gpus[UUID], mig_enabled=False)})
    plan = plan_for(off)
    assert [p.name for p in plan.failed_preconditions] == ["mig_enabled"]


def test_the_nvidia_smi_executor_runs_the_commands_and_converges(
    client: redis.Redis, redis_url: str, tmp_path: Path, standin: NvmlMigStandIn
) -> None:
    """``nvidia-smi mig`` through its stand-in over the same NVML stand-in: the argv are the
    documented ones, and a refused command (InUse) stops the run as an NVML call does."""
    smi = NvidiaSmiStandIn(standin)
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(
        registry, AuditLog(tmp_path / "audit.jsonl", registry.append_audit), "ann@h1",
        mig=SmiMig(smi),
    )  # fmt: skip
    plan = reslice.plan_reslice(
        snapshot_of(client, standin),
        {"gpu": "h/gpu0", "layout": "7g.80gb", "executor": "nvidia-smi", "poll_s": 0.01},
    )
    standin.add_process(2, 0, 777)
    refused = execute(reslice_apply.apply_reslice, plan, controls, lambda e: None)
    assert refused.status is OutcomeStatus.FAILED and "pid 777" in refused.message
    standin.processes.clear()
    smi.argvs.clear()
    outcome = execute(reslice_apply.apply_reslice, plan, controls, lambda e: None)
    assert outcome.ok, outcome
    assert standin.layout() == [("7g.80gb", 0, True)]
    writes = [a for a in smi.argvs if any(x in a for x in ("-dci", "-dgi", "-cgi", "-cci"))]
    assert writes == [
        ["nvidia-smi", "mig", "-i", "0", "-gi", "1", "-ci", "0", "-dci"],
        ["nvidia-smi", "mig", "-i", "0", "-gi", "1", "-dgi"],
        ["nvidia-smi", "mig", "-i", "0", "-gi", "2", "-ci", "0", "-dci"],
        ["nvidia-smi", "mig", "-i", "0", "-gi", "2", "-dgi"],
        ["nvidia-smi", "mig", "-i", "0", "-cgi", "0:0"],
        ["nvidia-smi", "mig", "-i", "0", "-gi", "1", "-cci"],
    ]
    # the second sdxl-1 / sd15-2 slot group has no instance left: it stays drained
    left = controls.registry.backend("sd15-2")
    assert left is not None and left.state is BackendState.DRAINED
    assert "left drained with no instance: sd15-2" in outcome.message


def test_after_a_crash_a_fresh_plan_on_the_fleet_as_it_is_converges_too(
    client: redis.Redis, redis_url: str, tmp_path: Path, standin: NvmlMigStandIn
) -> None:
    controls = controls_for(redis_url, tmp_path, standin)
    standin.fail_next("nvmlGpuInstanceDestroy", pynvml.NVML_ERROR_UNKNOWN)
    first = execute(reslice_apply.apply_reslice, plan_for(snapshot_of(client, standin)), controls,
                    lambda e: None)  # fmt: skip
    assert first.status is OutcomeStatus.FAILED and "destroy:gi1" in first.message
    # planned again from what the fleet shows now: the backends are drained, registered on
    # slot ids whose instances are half gone, and found by those ids
    again = plan_for(snapshot_of(client, standin))
    assert again.ok, again.failed_preconditions
    assert set(again.blast_radius.backends) == {"sdxl-1", "sd15-2"}
    assert execute(reslice_apply.apply_reslice, again, controls, lambda e: None).ok
    assert standin.layout() == TARGET
