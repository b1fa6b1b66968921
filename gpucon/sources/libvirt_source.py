"""libvirt source: KVM guests and the GPUs passed through to them, as VM slots.

One tick is one bulk call, ``getAllDomainStats`` (state, vCPUs, balloon), whatever the number of
domains. A domain's XML (its PCI hostdevs, vCPUs, memory and the gpucon metadata) is fetched
with ``XMLDesc`` only when the domain is new or its definition may have changed (its UUID is new
or its domain id changed: it was started, stopped or redefined), plus at most one re-check per
tick of the definition fetched longest ago once it is older than ``xml_refresh_s`` (catches
hot-plugs and metadata edits), so round trips stay constant as the fleet grows.

One slot per passed-through GPU: the PCI functions of one device (a GPU at ``41:00.0`` and its
audio function at ``41:00.1``) are one GPU; a guest with one GPU is the slot ``vm:NAME`` (as
before), a guest with several has ``vm:NAME/0``, ``vm:NAME/1``, ... in PCI address order, each
with its own addresses, name and UUID, and the guest's facts (state, vCPUs, memory, MPS).

GPU names: a PCI hostdev is named by the gpucon metadata element when the domain carries one,
otherwise by its user alias (``<alias name='ua-rtx4090'/>`` gives ``rtx4090``), otherwise it is
only its PCI address. MPS inside the guest cannot be read through libvirt (no guest agent);
``VmInfo.mps`` is ``None`` ("n/a") unless the metadata reports it. The metadata convention::

    <metadata>
      <gpucon:vm xmlns:gpucon="https://gpucon.io/libvirt/1">
        <gpucon:gpu address="0000:41:00.0" name="NVIDIA GeForce RTX 4090" uuid="GPU-..."/>
        <gpucon:mps daemon="running" default-thread-pct="100" pinned-mem-limit="0=16G">
          <gpucon:server name="triton-a" thread-pct="60"/>
        </gpucon:mps>
      </gpucon:vm>
    </metadata>

(set it with ``virsh metadata DOMAIN https://gpucon.io/libvirt/1 --key gpucon --set '...'``
from whatever provisions the guest; it is as fresh as its writer keeps it).

libvirt-python blocks: the hub calls ``read()`` in a worker thread and marks a read that
outlasts ``timeout_s`` as timed out. The connection (read-only) is opened lazily in ``read()``
and dropped after any error, so the next read reconnects; every error becomes a ``down`` Reading.
"""

from __future__ import annotations

import contextlib
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from gpucon.model.fleet import Health, MpsState, Slot, SlotKind, VmInfo
from gpucon.model.ids import vm_slot_id
from gpucon.model.reading import Reading, failed_reading
from gpucon.sources.base import describe_error

GPUCON_NS = "https://gpucon.io/libvirt/1"
_NS = {"g": GPUCON_NS}

# virDomainState -> the word shown for it
DOMAIN_STATES = {
    0: "nostate",
    1: "running",
    2: "blocked",
    3: "paused",
    4: "shutting down",
    5: "shut off",
    6: "crashed",
    7: "pmsuspended",
}
_KIB_PER_UNIT = {
    "b": 1 / 1024, "bytes": 1 / 1024, "kb": 1000 / 1024, "k": 1, "kib": 1,
    "mb": 1e6 / 1024, "m": 1024, "mib": 1024, "gb": 1e9 / 1024, "g": 1024**2, "gib": 1024**2,
    "tb": 1e12 / 1024, "t": 1024**3, "tib": 1024**3,
}  # fmt: skip


class PassedGpu(msgspec.Struct, frozen=True, gc=False):
    """One PCI device passed through to a guest."""

    address: str  # 0000:41:00.0
    name: str | None = None
    uuid: str | None = None


class DomainDefinition(msgspec.Struct, frozen=True, gc=False):
    """What a domain's XML says about it."""

    name: str
    uuid: str
    vcpus: int | None
    memory_mib: float | None
    gpus: tuple[PassedGpu, ...]
    mps: MpsState | None


def physical_gpus(gpus: tuple[PassedGpu, ...]) -> list[tuple[PassedGpu, ...]]:
    """The hostdevs grouped by PCI device (domain:bus:slot): a GPU and its other functions."""
    groups: dict[str, list[PassedGpu]] = {}
    for gpu in sorted(gpus, key=lambda g: g.address):
        groups.setdefault(gpu.address.rpartition(".")[0], []).append(gpu)
    return [tuple(group) for group in groups.values()]


def _int(text: str | None, base: int = 10) -> int | None:
    try:
        return int(text, base) if text is not None else None
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _memory_mib(element: ET.Element | None) -> float | None:
    if element is None or element.text is None:
        return None
    value = _float(element.text.strip())
    factor = _KIB_PER_UNIT.get((element.get("unit") or "KiB").lower())
    return None if value is None or factor is None else value * factor / 1024


def _pci_address(hostdev: ET.Element) -> str | None:
    addr = hostdev.find("source/address")
    if addr is None:
        return None
    parts = [_int(addr.get(k, "0"), 16) for k in ("domain", "bus", "slot", "function")]
    if any(p is None for p in parts):
        return None
    dom, bus, slot, fn = (p or 0 for p in parts)
    return f"{dom:04x}:{bus:02x}:{slot:02x}.{fn:x}"


def _metadata_mps(element: ET.Element | None) -> MpsState | None:
    if element is None:
        return None
    daemon = element.get("daemon")
    servers = tuple(
        (s.get("name", "?"), pct)
        for s in element.findall("g:server", _NS)
        if (pct := _float(s.get("thread-pct"))) is not None
    )
    return MpsState(
        daemon_running=None if daemon is None else daemon == "running",
        default_thread_pct=_float(element.get("default-thread-pct")),
        thread_pct_by_server=servers,
        pinned_mem_limit=element.get("pinned-mem-limit"),
    )


def parse_domain_xml(xml: str) -> DomainDefinition:
    """Parse ``XMLDesc`` output; raise ValueError saying what is wrong."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ValueError(f"malformed domain XML: {exc}") from None
    name = (root.findtext("name") or "").strip()
    uuid = (root.findtext("uuid") or "").strip()
    if root.tag != "domain" or not name:
        raise ValueError("domain XML has no <domain><name>")
    vcpu = root.find("vcpu")
    vcpus = None if vcpu is None else _int(vcpu.get("current") or (vcpu.text or "").strip())
    memory = _memory_mib(root.find("currentMemory"))
    if memory is None:
        memory = _memory_mib(root.find("memory"))
    meta = root.find("metadata/g:vm", _NS)
    meta_gpus = [] if meta is None else meta.findall("g:gpu", _NS)
    by_address = {g.get("address"): g for g in meta_gpus if g.get("address")}
    unaddressed = [g for g in meta_gpus if not g.get("address")]
    gpus: list[PassedGpu] = []
    for hostdev in root.findall("devices/hostdev[@mode='subsystem'][@type='pci']"):
        address = _pci_address(hostdev)
        if address is None:
            continue
        # an Element without children is falsy: test against None, never with ``or``
        described = by_address.get(address)
        if described is None and len(unaddressed) == 1:
            described = unaddressed[0]
        alias = hostdev.find("alias")
        alias_name = alias.get("name") if alias is not None else None
        if alias_name and alias_name.startswith("ua-"):
            alias_name = alias_name[3:]
        gpu_name = described.get("name") if described is not None else None
        gpus.append(
            PassedGpu(
                address,
                gpu_name or alias_name or None,
                described.get("uuid") if described is not None else None,
            )
        )
    mps = _metadata_mps(meta.find("g:mps", _NS) if meta is not None else None)
    return DomainDefinition(name, uuid, vcpus, memory, tuple(gpus), mps)


@dataclass
class _CachedDefinition:
    domain_id: int
    fetched_at: float
    definition: DomainDefinition | None
    error: str | None = None


def _import_libvirt() -> Any:
    try:
        import libvirt
    except ImportError as exc:
        raise RuntimeError(
            "libvirt-python is not installed (pip install 'gpucon[libvirt]')"
        ) from exc
    # libvirt prints every error to stderr by default, which would tear the console's screen
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    return libvirt


def _read_only_connection(uri: str) -> Any:
    return _import_libvirt().openReadOnly(uri)


class LibvirtSource:
    """KVM guests on one libvirt host, with the GPUs passed through to them."""

    name = "libvirt"

    def __init__(
        self,
        uri: str,
        cadence_s: float = 5.0,
        timeout_s: float = 4.0,
        host: str | None = None,
        *,
        xml_refresh_s: float = 60.0,
        connect: Callable[[str], Any] = _read_only_connection,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.uri = uri
        self.cadence_s = cadence_s
        self.timeout_s = timeout_s
        self.host = host
        self.xml_refresh_s = xml_refresh_s
        self._connect = connect
        self._clock = clock
        self._conn: Any = None
        self._host_name: str | None = host
        self._cache: dict[str, _CachedDefinition] = {}
        self._lock = threading.Lock()  # reads never overlap (the hub ensures it); close may race
        self._closed = False

    def read(self) -> Reading:
        started = self._clock()
        perf = time.perf_counter()
        with self._lock:
            try:
                return self._read(started, perf)
            except Exception as exc:
                self._drop_connection()
                error = f"{self.uri}: {describe_error(exc)}"
                return failed_reading(self.name, started, time.perf_counter() - perf, error)
            finally:
                if self._closed:  # close() came while this read was in flight
                    self._drop_connection()

    def _read(self, started: float, perf: float) -> Reading:
        libvirt = _import_libvirt()
        trips = 0
        self._closed = False  # a read after close() reconnects
        if self._conn is None:
            self._conn = self._connect(self.uri)
            trips += 1
            if self._host_name is None:
                self._host_name = self._conn.getHostname()
                trips += 1
        flags = (
            libvirt.VIR_DOMAIN_STATS_STATE
            | libvirt.VIR_DOMAIN_STATS_VCPU
            | libvirt.VIR_DOMAIN_STATS_BALLOON
        )
        stats = self._conn.getAllDomainStats(flags)
        trips += 1
        seen: set[str] = set()
        slots: list[Slot] = []
        errors: list[str] = []
        # the one definition re-checked this tick: the one fetched longest ago, once it is due
        oldest = min(self._cache.items(), key=lambda kv: kv[1].fetched_at, default=None)
        recheck = (
            oldest[0]
            if oldest is not None and started - oldest[1].fetched_at >= self.xml_refresh_s
            else None
        )
        for dom, values in sorted(stats, key=lambda pair: pair[0].name()):
            uuid = dom.UUIDString()
            seen.add(uuid)
            cached = self._cache.get(uuid)
            if cached is None or cached.domain_id != dom.ID() or uuid == recheck:
                cached = self._fetch_definition(dom, started)
                trips += 1
            if cached.error:
                errors.append(f"domain {dom.name()}: {cached.error}")
            slots.extend(self._slots(dom.name(), values, cached.definition))
        for gone in set(self._cache) - seen:
            del self._cache[gone]
        return Reading(
            source=self.name,
            health=Health.DEGRADED if errors else Health.OK,
            taken_at=started,
            duration_s=time.perf_counter() - perf,
            error="; ".join(errors) or None,
            slots=tuple(slots),
            round_trips=trips,
        )

    def _fetch_definition(self, dom: Any, now: float) -> _CachedDefinition:
        import libvirt

        definition: DomainDefinition | None = None
        error: str | None = None
        try:
            definition = parse_domain_xml(dom.XMLDesc(0))
        except ValueError as exc:
            error = str(exc)
        except libvirt.libvirtError as exc:
            error = describe_error(exc)
        cached = _CachedDefinition(dom.ID(), now, definition, error)
        self._cache[dom.UUIDString()] = cached
        return cached

    def _slots(
        self, name: str, values: dict[str, Any], definition: DomainDefinition | None
    ) -> list[Slot]:
        """One slot for a guest with one GPU (or none), one per GPU for a guest with several."""
        groups = physical_gpus(definition.gpus) if definition else []
        if len(groups) <= 1:
            return [self._slot(vm_slot_id(name), None, name, values, definition, groups)]
        return [
            self._slot(vm_slot_id(name, i), i, name, values, definition, [group])
            for i, group in enumerate(groups)
        ]

    def _slot(
        self,
        slot_id: str,
        gpu_index: int | None,
        name: str,
        values: dict[str, Any],
        definition: DomainDefinition | None,
        groups: list[tuple[PassedGpu, ...]],
    ) -> Slot:
        state_code = values.get("state.state")
        state = None if state_code is None else DOMAIN_STATES.get(state_code, f"state {state_code}")
        vcpus = values.get("vcpu.current")
        balloon_kib = values.get("balloon.current")
        gpus = [g for group in groups for g in group]
        gpu_names = list(dict.fromkeys(g.name for g in gpus if g.name))
        gpu_uuid = next((g.uuid for g in gpus if g.uuid), None)
        vm = VmInfo(
            name=name,
            state=state,
            vcpus=vcpus if isinstance(vcpus, int) else definition.vcpus if definition else None,
            memory_mib=balloon_kib / 1024
            if isinstance(balloon_kib, int) and balloon_kib > 0
            else definition.memory_mib
            if definition
            else None,
            host=self._host_name,
            gpu_pci_addresses=tuple(g.address for g in gpus),
            gpu_uuid=gpu_uuid,
            mps=definition.mps if definition else None,
        )
        return Slot(
            id=slot_id,
            kind=SlotKind.VM,
            host=self._host_name,
            gpu_uuid=gpu_uuid,
            gpu_index=gpu_index,
            gpu_name=gpu_names[0] if gpu_names else None,
            profile=" + ".join(gpu_names) if gpu_names else None,
            vm=vm,
        )

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # a dead connection may fail to close; it is gone either way
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Drop the connection; never waits on a read in flight (it drops it when it ends)."""
        self._closed = True
        if self._lock.acquire(timeout=0.1):
            try:
                self._drop_connection()
            finally:
                self._lock.release()
