"""The model's records: frozen msgspec Structs, kept out of the cyclic collector where they can
be, with the behaviour the rest of gpucon relied on when they were dataclasses."""

from __future__ import annotations

import dataclasses
import gc
import importlib
import pickle
import pkgutil
import typing

import msgspec
import pytest

import gpucon.model
from gpucon.config.mps import MpsDaemonConfig, MpsServerConfig
from gpucon.model.alerts import Alert, Severity
from gpucon.model.fleet import Gpu, Health, Slot, SlotKind, SourceStatus
from gpucon.model.reading import Reading
from gpucon.model.records import as_dict

# field types a record kept out of the collector must not hold: a mutable container could
# hold the record itself (a cycle the collector would never see)
MUTABLE = ("dict", "Mapping", "list", "set[", "History", "GrowthRuns", "Rings")


def model_records() -> list[type[msgspec.Struct]]:
    found: list[type[msgspec.Struct]] = []
    for info in pkgutil.iter_modules(gpucon.model.__path__, "gpucon.model."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, msgspec.Struct)
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return found


def test_every_model_record_is_frozen_and_untracked_only_when_it_holds_no_container() -> None:
    records = model_records()
    assert len(records) > 25  # the fleet, readings, alerts, liveness, MIG, snapshot ...
    for cls in records:
        config = cls.__struct_config__
        assert config.frozen, cls
        hints = typing.get_type_hints(cls)
        mutable = [n for n, h in hints.items() if any(m in str(h) for m in MUTABLE)]
        if not config.gc:
            assert not mutable, f"{cls.__name__} is gc=False but holds {mutable}"


def test_a_leaf_record_is_not_tracked_and_a_snapshot_is() -> None:
    from gpucon.model.snapshot import Snapshot

    slot = Slot(id="h/gpu0/gi1", kind=SlotKind.MIG, mem_used_mib=1.0)
    assert not gc.is_tracked(slot)
    assert gc.is_tracked(Snapshot(taken_at=1.0, slots={slot.id: slot}))


def test_records_compare_hash_pickle_and_match_as_dataclasses_did() -> None:
    a = Gpu(uuid="GPU-1", host="h", index=0, temperature_c=50.0)
    b = Gpu(uuid="GPU-1", host="h", index=0, temperature_c=50.0)
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != msgspec.structs.replace(a, temperature_c=51.0)
    assert pickle.loads(pickle.dumps(a)) == a
    assert repr(a).startswith("Gpu(uuid='GPU-1', host='h', index=0, name=None")
    with pytest.raises(AttributeError):
        a.temperature_c = 1.0  # type: ignore[misc]
    match a:
        case Gpu(uuid, host):
            assert (uuid, host) == ("GPU-1", "h")
        case _:
            pytest.fail("a record matches by position")
    assert not dataclasses.is_dataclass(a)  # dataclasses.replace/fields/asdict do not apply


def test_texts_are_masked_and_defaults_derived_on_replace_too() -> None:
    secret = "redis://user:hunter2@db:6379/0 refused"
    status = SourceStatus("redis", Health.DOWN)
    assert "hunter2" not in (msgspec.structs.replace(status, error=secret).error or "")
    reading = Reading(source="redis", health=Health.DOWN, taken_at=1.0)
    assert "hunter2" not in (msgspec.structs.replace(reading, error=secret).error or "")
    alert = Alert("xid:g", "xid", "g", Severity.CRITICAL, "XID 79", 1.0)
    assert alert.cause is not None  # derived from the rule when not given


def test_as_dict_is_asdict_for_records() -> None:
    server = MpsServerConfig(backend="b1", start=("run", "it"))
    daemon = MpsDaemonConfig(target="gpu-a/gpu0", servers=(server, server))
    out = as_dict(daemon)
    assert out["target"] == "gpu-a/gpu0" and out["servers"][0]["start"] == ("run", "it")
    assert isinstance(out["servers"], tuple) and isinstance(out["servers"][1], dict)
    assert (
        MpsDaemonConfig(**{**out, "servers": tuple(MpsServerConfig(**s) for s in out["servers"])})
        == daemon
    )
