"""What an action needs from the console before it is planned: its params, and the audit log.

Plain functions over typed values (the console's ``Controls``, ``GpuconConfig`` and mode);
the fleet screen calls them and hands the action to ``gpucon.screens.action_runner``, which
plans and applies it off the UI thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from gpucon.actions.audit import AuditStream, AuditStreamReader, RegistryAuditStream
from gpucon.config import GpuconConfig
from gpucon.controls.base import Controls
from gpucon.errors import BadParams
from gpucon.model.snapshot import Snapshot


@runtime_checkable
class StreamRegistry(Protocol):
    """A registry control that can read the fleet's audit stream (the Redis one can)."""

    def read_audit(self, limit: int) -> list[dict[str, str]]: ...


def audit_path(mode: str, controls: Controls | None, config: GpuconConfig | None) -> Path:
    """This console's audit file: the one its controls write, else the configured one (the
    demo keeps its own file: a read-only demo shows that, not the live fleet's)."""
    if controls is not None:
        return Path(controls.audit.path)
    if config is not None:
        from gpucon.controls.base import audit_path_for, demo_audit_path

        return demo_audit_path(config) if mode == "demo" else audit_path_for(config)
    from gpucon.config import default_state_dir

    return default_state_dir() / "audit.jsonl"


def audit_stream(
    mode: str, controls: Controls | None, config: GpuconConfig | None
) -> AuditStream | None:
    """The fleet's shared audit stream where Redis is configured (not in the demo, whose
    actions steer the simulator and are recorded only in this console's file): from the
    config when there is one, else through a live console's registry control."""
    if mode == "demo":
        return None
    redis_config = config.fleet.redis if config is not None else None
    if redis_config is not None:
        from gpucon.config import ConfigError
        from gpucon.config.credentials import redis_auth

        try:
            auth = redis_auth(redis_config)
        except ConfigError:  # the Redis source says why, in the status bar; read without
            auth = None
        return AuditStreamReader(redis_config.url, redis_config.timeout_s, auth=auth)
    registry = controls.registry if controls is not None else None
    if isinstance(registry, StreamRegistry):
        return RegistryAuditStream(registry)
    return None


def params_for(
    name: str,
    snapshot: Snapshot,
    slot_id: str | None,
    backend_name: str | None,
    *,
    controls: Controls,
    config: GpuconConfig | None,
) -> dict[str, object]:
    """The action's params from what the operator selected (BadParams when it is not enough)."""
    if name == "mps-restart":
        return mps_params(snapshot, slot_id, controls, config)
    if name not in ("drain", "undrain", "probe"):
        return {}
    backend = backend_name
    if backend is None and slot_id is not None:
        on_slot = snapshot.backends_on(slot_id)
        if len(on_slot) == 1:
            backend = on_slot[0].name
        elif on_slot:
            raise BadParams("backend", f"{len(on_slot)} backends on {slot_id}: select one row")
    if backend is None:
        raise BadParams("backend", "the selected row has no backend")
    if name == "probe":
        if controls.prober is not None and controls.prober.simulated:  # the demo: any backend
            return {"target": backend, "simulated": True}
        targets = config.fleet.probe_targets if config is not None else ()
        return {"target": backend, "probe_targets": targets}
    return {"backend": backend}


def reslice_target(snapshot: Snapshot, slot_id: str | None) -> tuple[str, str, str]:
    """The selected row's GPU for a re-slice: its name (``host/gpuN``), its layout now and the
    profiles it offers; BadParams naming ``gpu`` when the row is no MIG-capable GPU's."""
    from gpucon.actions.reslice_fleet import gpu_name, mig_slots
    from gpucon.model.mig_layout import describe_counts

    slot = snapshot.slots.get(slot_id or "")
    gpu = snapshot.gpus.get(slot.gpu_uuid or "") if slot is not None else None
    if gpu is None:
        raise BadParams("gpu", _no_gpu_text(slot_id, slot is not None))
    if gpu.mig_profiles is None:
        raise BadParams("gpu", f"{gpu_name(gpu)} offers no MIG profiles: it cannot be re-sliced")
    now = describe_counts(s.profile or "?" for s in mig_slots(snapshot, gpu)) or "no instances"
    return gpu_name(gpu), now, ", ".join(gpu.mig_profiles.names())


def _no_gpu_text(slot_id: str | None, slot_known: bool) -> str:
    """Why the selected row has no GPU to re-slice: no slot, or no GPU source reports it
    (a lab's backends name slots that no NVML, DCGM or libvirt source knows)."""
    from gpucon.model.ids import parse_slot_id

    if not slot_id:
        return "the selected row has no slot: select a row on a MIG GPU to re-slice it"
    try:
        parsed = parse_slot_id(slot_id)
    except ValueError:
        parsed = None
    gpu = (
        f"{parsed.host}/gpu{parsed.gpu_index}"
        if parsed is not None and parsed.host is not None and parsed.gpu_index is not None
        else f"the GPU of {slot_id}"
    )
    where = "" if slot_known else f" nor slot {slot_id}"
    return f"no GPU source (NVML, DCGM or libvirt) reports {gpu}{where}: nothing to re-slice there"


def reslice_params(gpu: str, layout: str, controls: Controls) -> dict[str, object]:
    """What the console plans a re-slice with: the layout typed, and the fleet's executor
    (the demo's simulated one, NVML or nvidia-smi; Kubernetes where none is built)."""
    executor = controls.mig.kind if controls.mig is not None else "kubernetes"
    return {"gpu": gpu, "layout": layout, "executor": executor}


def mps_params(
    snapshot: Snapshot, slot_id: str | None, controls: Controls, config: GpuconConfig | None
) -> dict[str, object]:
    """The MPS restart of the daemon that serves the selected row's slot (its id, its GPU's
    UUID, its VM's name or ``host/gpuN``, as ``[[fleets.NAME.mps]]`` names targets)."""
    from gpucon.model.records import as_dict

    slot = snapshot.slots.get(slot_id or "")
    names = {slot_id}
    if slot is not None:
        names.update({slot.gpu_uuid, slot.vm.name if slot.vm else None})
        if slot.host is not None and slot.gpu_index is not None:
            names.add(f"{slot.host}/gpu{slot.gpu_index}")
    daemon = next((d for d in controls.mps_daemons if d.target in names), None)
    if daemon is None:
        known = ", ".join(d.target for d in controls.mps_daemons) or "none configured"
        raise BadParams("target", f"no MPS daemon serves the selected slot (known: {known})")
    params: dict[str, object] = {"target": daemon.target, "daemon": as_dict(daemon)}
    if controls.prober is not None and controls.prober.simulated:
        servers = {s.backend for s in daemon.servers}
        params["probe_targets"] = [
            {"name": b.name, "url": b.url or "http://simulated", "model": b.model or ""}
            for b in snapshot.backends.values()
            if b.name in servers
        ]
    elif config is not None:
        params["probe_targets"] = [as_dict(t) for t in config.fleet.probe_targets]
    return params
