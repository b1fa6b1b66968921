"""Merging readings field by field, joining slices on (parent UUID, GPU instance id)."""

from __future__ import annotations

from gpucon.model.fleet import Backend, Gpu, Health, LatencyStats, Slot, SlotKind, VmInfo
from gpucon.model.ids import gpu_slot_id, mig_slot_id, parse_slot_id, vm_slot_id
from gpucon.model.merge import merge_readings, overlay
from gpucon.model.reading import Reading


def reading(source: str, **parts: object) -> Reading:
    return Reading(source=source, health=Health.OK, taken_at=100.0, **parts)  # type: ignore[arg-type]


def test_slot_ids_round_trip() -> None:
    assert parse_slot_id(mig_slot_id("node-a", 0, 3)).gi_id == 3
    assert parse_slot_id(gpu_slot_id("node-a", 1)).kind == "gpu"
    assert parse_slot_id(vm_slot_id("vm-b-1")).vm_name == "vm-b-1"


def test_bad_slot_id_names_the_id() -> None:
    import pytest

    with pytest.raises(ValueError, match="node/gpuX"):
        parse_slot_id("node/gpuX")


def test_overlay_fills_only_unknown_fields() -> None:
    a = Slot(id="h/gpu0/gi1", kind=SlotKind.MIG, mem_used_mib=100.0)
    b = Slot(id="other", kind=SlotKind.MIG, mem_used_mib=999.0, activity_pct=42.0)
    merged = overlay(a, b)
    assert merged.mem_used_mib == 100.0  # the first source wins
    assert merged.activity_pct == 42.0  # filled from the second
    assert merged.id == "h/gpu0/gi1"


def test_mig_slice_joins_nvml_and_dcgm_on_uuid_and_instance_id() -> None:
    nvml = reading(
        "nvml",
        slots=(
            Slot(
                id="localhost/gpu0/gi1",
                kind=SlotKind.MIG,
                gpu_uuid="GPU-1",
                gi_id=1,
                mem_used_mib=10.0,
                mem_total_mib=40000.0,
            ),
        ),
    )
    prom = reading(
        "prometheus",
        slots=(
            Slot(
                id="node-a/gpu0/gi1",
                kind=SlotKind.MIG,
                gpu_uuid="GPU-1",
                gi_id=1,
                activity_pct=71.0,
                activity_metric="DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            ),
            Slot(
                id="node-a/gpu0/gi2", kind=SlotKind.MIG, gpu_uuid="GPU-1", gi_id=2, activity_pct=5.0
            ),
        ),
    )
    fleet = merge_readings([nvml, prom])
    assert set(fleet.slots) == {"localhost/gpu0/gi1", "node-a/gpu0/gi2"}
    joined = fleet.slots["localhost/gpu0/gi1"]
    assert joined.mem_used_mib == 10.0 and joined.activity_pct == 71.0
    assert fleet.origins["slot:localhost/gpu0/gi1"] == {"nvml", "prometheus"}
    assert fleet.origins["slot:node-a/gpu0/gi2"] == {"prometheus"}


def test_vms_join_on_id_not_on_gpu() -> None:
    vm = Slot(id="vm:vm-b-1", kind=SlotKind.VM, gpu_uuid="GPU-9", vm=VmInfo(name="vm-b-1"))
    whole = Slot(id="h/gpu0", kind=SlotKind.GPU, gpu_uuid="GPU-9")
    fleet = merge_readings([reading("libvirt", slots=(vm,)), reading("nvml", slots=(whole,))])
    assert set(fleet.slots) == {"vm:vm-b-1", "h/gpu0"}


def test_latency_keyed_by_instance_resolves_to_backend_by_url() -> None:
    reg = reading(
        "redis", backends=(Backend(name="sdxl-0", url="http://10.0.0.5:8000", slot_id="h/gpu0"),)
    )
    prom = reading(
        "prometheus",
        latency=(
            LatencyStats(key="10.0.0.5:8000", p95_ms=900.0),
            LatencyStats(key="unknown:1", p95_ms=1.0),
        ),
    )
    fleet = merge_readings([reg, prom])
    assert fleet.latency["sdxl-0"].p95_ms == 900.0
    assert "unknown:1" in fleet.latency
    # the backend's source also vouches for its slot
    assert "redis" in fleet.origins["slot:h/gpu0"]


def _served(name: str, model: str | None, url: str = "http://10.0.0.5:8000") -> Backend:
    return Backend(name=name, url=url, model=model, slot_id="h/gpu0")


def _lat(model: str | None, p95: float, address: str = "10.0.0.5:8000") -> LatencyStats:
    return LatencyStats(key=address, address=address, model=model, p95_ms=p95, req_per_s=1.0)


def test_two_models_on_one_server_join_their_own_backends() -> None:
    reg = reading("redis", backends=(_served("sd15-a", "sd15"), _served("sdxl-a", "sdxl")))
    prom = reading("prometheus", latency=(_lat("sdxl", 2610.0), _lat("sd15", 1620.0)))
    latency = merge_readings([reg, prom]).latency
    assert {k: v.p95_ms for k, v in latency.items()} == {"sd15-a": 1620.0, "sdxl-a": 2610.0}


def test_latency_without_model_is_not_guessed_between_two_backends() -> None:
    reg = reading("redis", backends=(_served("sd15-a", "sd15"), _served("sdxl-a", "sdxl")))
    prom = reading("prometheus", latency=(_lat(None, 2610.0),))
    latency = merge_readings([reg, prom]).latency
    assert set(latency) == {"10.0.0.5:8000"}  # nobody's p95: not sd15-a's, not sdxl-a's


def test_address_alone_decides_only_when_unambiguous() -> None:
    # no model label, one backend there: the address decides (a server of one model)
    reg = reading("redis", backends=(_served("sd15-a", "sd15"),))
    assert set(merge_readings([reg, reading("p", latency=(_lat(None, 5.0),))]).latency) == {
        "sd15-a"
    }
    # the registry does not say the model, and the server exports one model: that one
    reg = reading("redis", backends=(_served("b", None),))
    assert set(merge_readings([reg, reading("p", latency=(_lat("sdxl", 5.0),))]).latency) == {"b"}
    # ... but two models there: neither is guessed to be b's
    two = reading("p", latency=(_lat("sdxl", 5.0), _lat("sd15", 6.0)))
    assert set(merge_readings([reg, two]).latency) == {"10.0.0.5:8000/sdxl", "10.0.0.5:8000/sd15"}
    # a model the one backend there does not serve is not its latency
    reg = reading("redis", backends=(_served("sd15-a", "sd15"),))
    assert set(merge_readings([reg, reading("p", latency=(_lat("sdxl", 5.0),))]).latency) == {
        "10.0.0.5:8000/sdxl"
    }


def test_same_model_on_two_servers_joins_by_address() -> None:
    reg = reading(
        "redis",
        backends=(_served("a", "sdxl"), _served("b", "sdxl", url="http://10.0.0.6:8000/")),
    )
    prom = reading("p", latency=(_lat("sdxl", 1.0), _lat("sdxl", 2.0, address="10.0.0.6:8000")))
    latency = merge_readings([reg, prom]).latency
    assert {k: v.p95_ms for k, v in latency.items()} == {"a": 1.0, "b": 2.0}


def test_gpus_merge_by_uuid() -> None:
    a = reading(
        "nvml", gpus=(Gpu(uuid="GPU-1", host="h", index=0, util_pct=None, temperature_c=50.0),)
    )
    b = reading("prometheus", gpus=(Gpu(uuid="GPU-1", host="h", index=0, util_pct=30.0),))
    g = merge_readings([a, b]).gpus["GPU-1"]
    assert g.util_pct == 30.0 and g.temperature_c == 50.0


def test_origins_of_a_fleet_of_the_same_shape_are_reused_and_follow_a_new_shape() -> None:
    """The origins depend only on who names which entity (not on values): the same shape
    again gives the same origins without noting them again; any change of shape notes anew."""
    from gpucon.model import merge

    def fleet(p95: float, extra: bool = False, slot_of_b1: str = "h/gpu0") -> list[Reading]:
        backends = (Backend("b1", slot_id=slot_of_b1), Backend("b2", slot_id="h/gpu1"))
        return [
            reading(
                "sim",
                gpus=(Gpu("G0", "h", 0), Gpu("G1", "h", 1)),
                slots=(
                    Slot("h/gpu0", SlotKind.GPU, gpu_uuid="G0"),
                    Slot("h/gpu1", SlotKind.GPU, gpu_uuid="G1"),
                ),
                backends=backends + ((Backend("b3", slot_id="h/gpu1"),) if extra else ()),
                latency=(LatencyStats("b1", p95_ms=p95),),
            ),
            reading("redis", backends=(Backend("b2", slot_id="h/gpu1", inflight=3),)),
        ]

    def fresh(readings: list[Reading]) -> dict[str, frozenset[str]]:
        merge._LAST_ORIGINS.clear()
        return merge_readings(readings).origins

    first = merge_readings(fleet(10.0))
    again = merge_readings(fleet(20.0))
    assert again.origins is first.origins and again.latency["b1"].p95_ms == 20.0
    assert first.origins == fresh(fleet(10.0))
    assert first.origins["slot:h/gpu1"] == {"sim", "redis"}  # redis's b2 serves on it
    for changed in (fleet(10.0, extra=True), fleet(10.0, slot_of_b1="h/gpu1")):
        merge_readings(fleet(10.0))
        origins = merge_readings(changed).origins
        assert origins is not first.origins and origins == fresh(changed)
