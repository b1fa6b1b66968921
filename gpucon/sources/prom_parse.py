"""Turn Prometheus instant-query results into fleet fragments: GPUs and slots from DCGM.

(Triton's latency families are parsed in gpucon.sources.prom_triton, with the helpers here.)

Pure functions over the JSON the query API returns (``[{"metric": {...}, "value": [t, "v"]}]``).
Garbage never raises: a NaN, an infinity, a value that is not a number, a series without the
labels it needs — each is skipped and described in the returned error list, so the source can
report itself degraded while showing everything that was good.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpucon.model.fleet import Gpu, Slot, SlotKind
from gpucon.model.ids import gpu_slot_id, mig_slot_id
from gpucon.sources.problems import Problems
from gpucon.sources.promql import GPU_HEALTH_FIELDS

# dcgm-exporter before 4.6 says Hostname, from 4.6 on hostname; in Kubernetes both may hold
# the exporter pod's name, so a config can name another label first (e.g. "node")
HOST_LABELS = ("Hostname", "hostname")
MIB = 1024.0 * 1024.0


def sample_value(series: Mapping[str, Any], family: str, problems: Problems) -> float | None:
    """The series' value as a finite float, or None (and a problem noted)."""
    value = series.get("value") if type(series) is dict else None
    labels = labels_of(series)
    name = labels.get("__name__") or labels.get("dcgm_field") or family
    try:
        number = float(value[1])  # type: ignore[index]
    except (TypeError, ValueError, IndexError, KeyError, OverflowError):
        problems.add(f"{family}: {name} has a value that is not a number ({value!r:.40})")
        return None
    if not math.isfinite(number):
        # NaN is normal for a rate over no traffic; only say so for gauges
        if family not in _NAN_IS_NORMAL:
            problems.add(f"{family}: {name} is {number}")
        return None
    return number


_NAN_IS_NORMAL = frozenset(
    {"latency_summary", "latency_histogram", "latency_average", "queue_time", "compute_time"}
)


def labels_of(series: Mapping[str, Any]) -> Mapping[str, str]:
    """The series' labels; a label whose name or value is not text is dropped (Prometheus
    never sends one, but a proxy or a bad exporter may: it must not break a sort later)."""
    labels = series.get("metric") if type(series) is dict else None
    if type(labels) is not dict:
        return {}
    if all(type(v) is str for v in labels.values()):
        return labels
    return {k: v for k, v in labels.items() if type(k) is str and type(v) is str}


# -- DCGM -------------------------------------------------------------------------------------


@dataclass
class _DcgmEntity:
    host: str
    gpu_index: int
    uuid: str | None
    gi_id: int | None
    profile: str | None
    model_name: str | None
    values: dict[str, float] = field(default_factory=dict)
    activity_metric: str | None = None


def _entity_key(
    labels: Mapping[str, str], family: str, problems: Problems, host_labels: Sequence[str]
) -> _DcgmEntity | None:
    name = labels.get("__name__") or labels.get("dcgm_field") or family
    host = next((labels[h] for h in host_labels if labels.get(h)), None)
    if host is None:
        problems.add(f"{family}: {name} has no {'/'.join(host_labels)} label")
        return None
    try:
        gpu_index = int(labels.get("gpu", ""))
    except ValueError:
        problems.add(f"{family}: {name} on {host} has no numeric gpu label")
        return None
    gi_text = labels.get("GPU_I_ID", "")
    gi_id: int | None = None
    if gi_text != "":
        try:
            gi_id = int(gi_text)
        except ValueError:
            problems.add(f"{family}: {name} on {host} gpu {gpu_index}: GPU_I_ID {gi_text!r:.20}")
            return None
    return _DcgmEntity(
        host=host,
        gpu_index=gpu_index,
        uuid=labels.get("UUID") or None,
        gi_id=gi_id,
        profile=labels.get("GPU_I_PROFILE") or None,
        model_name=labels.get("modelName") or None,
    )


def _memory_field(name: str) -> tuple[str, float] | None:
    """(field, factor to MiB) for a framebuffer metric name of either DCGM generation."""
    factor = 1.0 / MIB if "BYTES" in name else 1.0
    for part, fld in (("USED", "fb_used"), ("FREE", "fb_free"), ("TOTAL", "fb_total")):
        if f"FB_{part}" in name:
            return fld, factor
    if "FB_CAPACITY" in name:
        return "fb_total", factor
    return None


def parse_dcgm(
    results: Mapping[str, Sequence[Mapping[str, Any]]],
    problems: Problems,
    host_labels: Sequence[str] = HOST_LABELS,
) -> tuple[list[Gpu], list[Slot]]:
    """GPUs and slots (MIG and whole GPU) from the DCGM families' results."""
    entities: dict[tuple[str, int, int | None], _DcgmEntity] = {}
    health: dict[tuple[str, int, int | None], _DcgmEntity] = {}
    for family, series_list in results.items():
        for series in series_list:
            labels = labels_of(series)
            probe = _entity_key(labels, family, problems, host_labels)
            if probe is None:
                continue
            value = sample_value(series, family, problems)
            if value is None:
                continue
            key = (probe.host, probe.gpu_index, probe.gi_id)
            name = labels.get("__name__", "")
            if family == "gpu_health":
                # whole-GPU fields: they describe the card, and make no slot of their own
                field_name = labels.get("dcgm_field") or name
                health.setdefault(key, probe).values[field_name] = value
                continue
            entity = entities.setdefault(key, probe)
            if family == "fb_memory":
                mem = _memory_field(name)
                if mem is not None:
                    entity.values[mem[0]] = value * mem[1]
            else:
                # DCGM_FI_PROF_* are ratios 0–1 in every generation
                entity.values[family] = value * 100.0
                if family == "gr_engine_active":
                    entity.activity_metric = name or "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    # a MIG GPU's own series (no GPU_I_ID) describe the card, not a slot
    mig_gpus = {(e.host, e.gpu_index) for e in entities.values() if e.gi_id is not None}
    slots = [
        _slot(e)
        for e in entities.values()
        if e.gi_id is not None or (e.host, e.gpu_index) not in mig_gpus
    ]
    gpus = _gpus(entities.values(), mig_gpus)
    return with_health(gpus, health.values(), mig_gpus, problems), slots


def _mem(e: _DcgmEntity) -> tuple[float | None, float | None]:
    used, free, total = (e.values.get(k) for k in ("fb_used", "fb_free", "fb_total"))
    if total is None and used is not None and free is not None:
        total = used + free
    if used is None and total is not None and free is not None:
        used = total - free
    return used, total


def _slot(e: _DcgmEntity) -> Slot:
    used, total = _mem(e)
    mig = e.gi_id is not None
    return Slot(
        id=mig_slot_id(e.host, e.gpu_index, e.gi_id)
        if e.gi_id is not None
        else gpu_slot_id(e.host, e.gpu_index),
        kind=SlotKind.MIG if mig else SlotKind.GPU,
        host=e.host,
        gpu_uuid=e.uuid,
        gpu_index=e.gpu_index,
        gpu_name=e.model_name,
        profile=e.profile if mig else e.model_name,
        gi_id=e.gi_id,
        mem_used_mib=used,
        mem_total_mib=total,
        activity_pct=e.values.get("gr_engine_active"),
        activity_metric=e.activity_metric,
        sm_active_pct=e.values.get("sm_active"),
        dram_active_pct=e.values.get("dram_active"),
    )


def _gpus(entities: Iterable[_DcgmEntity], mig_gpus: set[tuple[str, int]]) -> list[Gpu]:
    """One Gpu per UUID; memory from the card's own series (no GPU_I_ID) where exported."""
    by_uuid: dict[str, Gpu] = {}
    for e in entities:
        if e.uuid is None:
            continue
        used, total = (None, None) if e.gi_id is not None else _mem(e)
        gpu = Gpu(
            uuid=e.uuid,
            host=e.host,
            index=e.gpu_index,
            name=e.model_name,
            mem_used_mib=used,
            mem_total_mib=total,
            mig_enabled=True if (e.host, e.gpu_index) in mig_gpus else None,
        )
        existing = by_uuid.get(e.uuid)
        if existing is None or (e.gi_id is None and existing.mem_used_mib is None):
            by_uuid[e.uuid] = gpu
    return list(by_uuid.values())


def _health_fields(e: _DcgmEntity, problems: Problems) -> dict[str, Any]:
    """Gpu fields from one entity's gpu_health series (names as in GPU_HEALTH_FIELDS)."""
    by_field: dict[str, float] = {}
    # the enforced limit (every limiter applied) says more than the configured one
    for name in sorted(e.values, key=lambda n: n != "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"):
        fld = GPU_HEALTH_FIELDS.get(name)
        if fld is not None:
            by_field.setdefault(fld, e.values[name])
    fields: dict[str, Any] = dict(by_field)
    xid = by_field.get("xid_last")
    if xid is not None:
        if xid.is_integer() and 0 <= xid < 2**31:
            fields["xid_last"] = int(xid)
        else:
            del fields["xid_last"]
            problems.add(f"gpu_health: XID {xid!r:.20} on {e.host} gpu {e.gpu_index}")
    return fields


def with_health(
    gpus: list[Gpu],
    health: Iterable[_DcgmEntity],
    mig_gpus: set[tuple[str, int]],
    problems: Problems,
) -> list[Gpu]:
    """GPUs with temperature, power, utilisation and last XID from the gpu_health family.

    A MIG GPU's exporter may repeat the card's fields on each GPU instance; the card's own
    series (no GPU_I_ID) win, else any instance's. A GPU seen only here is added.
    """
    by_uuid = {g.uuid: g for g in gpus}
    for e in sorted(health, key=lambda h: h.gi_id is not None):
        if e.uuid is None:
            continue
        gpu = by_uuid.get(e.uuid)
        if gpu is None:
            mig = True if (e.host, e.gpu_index) in mig_gpus else None
            gpu = Gpu(e.uuid, e.host, e.gpu_index, name=e.model_name, mig_enabled=mig)
        fields = {k: v for k, v in _health_fields(e, problems).items() if getattr(gpu, k) is None}
        by_uuid[e.uuid] = msgspec.structs.replace(gpu, **fields) if fields else gpu
    return list(by_uuid.values())
