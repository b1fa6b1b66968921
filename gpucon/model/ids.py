"""Slot identifiers: one string per unit of compute a backend runs on.

- MIG instance: ``host/gpu0/gi3``
- whole GPU:    ``host/gpu1``
- VM:           ``vm:vm-b-1`` (a guest with one passed-through GPU)
- VM GPU:       ``vm:vm-b-1/0``, ``vm:vm-b-1/1`` (a guest with several: one slot per GPU, in
                PCI address order; libvirt domain names cannot hold ``/``)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

VM_PREFIX = "vm:"


def mig_slot_id(host: str, gpu_index: int, gi_id: int) -> str:
    return f"{host}/gpu{gpu_index}/gi{gi_id}"


def gpu_slot_id(host: str, gpu_index: int) -> str:
    return f"{host}/gpu{gpu_index}"


def vm_slot_id(vm_name: str, gpu: int | None = None) -> str:
    """``vm:NAME`` for a guest's only GPU; ``vm:NAME/N`` for GPU N of a guest with several."""
    return f"{VM_PREFIX}{vm_name}" if gpu is None else f"{VM_PREFIX}{vm_name}/{gpu}"


class ParsedSlotId(msgspec.Struct, frozen=True, gc=False):
    """The parts of a slot id; ``kind`` is ``mig``, ``gpu`` or ``vm``."""

    kind: str
    host: str | None
    gpu_index: int | None
    gi_id: int | None
    vm_name: str | None
    # which of a guest's several GPUs (``vm:NAME/N``); None for a guest's only GPU
    vm_gpu: int | None = None


def parse_slot_id(slot_id: str) -> ParsedSlotId:
    """Split a slot id into its parts; raise ValueError naming the id when malformed."""
    if slot_id.startswith(VM_PREFIX):
        name = slot_id[len(VM_PREFIX) :]
        base, _, gpu = name.rpartition("/")
        if base and "/" not in base and gpu.isdigit():
            return ParsedSlotId("vm", None, None, None, base, int(gpu))
        if not name or "/" in name:
            raise ValueError(f"slot id {slot_id!r}: expected vm:NAME or vm:NAME/N")
        return ParsedSlotId("vm", None, None, None, name)
    parts = slot_id.split("/")
    try:
        if len(parts) == 2 and parts[1].startswith("gpu"):
            return ParsedSlotId("gpu", parts[0], int(parts[1][3:]), None, None)
        if len(parts) == 3 and parts[1].startswith("gpu") and parts[2].startswith("gi"):
            return ParsedSlotId("mig", parts[0], int(parts[1][3:]), int(parts[2][2:]), None)
    except ValueError:
        pass
    raise ValueError(
        f"slot id {slot_id!r}: expected host/gpuN, host/gpuN/giM, vm:NAME or vm:NAME/N"
    )


def host_of(slot_id: str) -> str | None:
    """The host a ``host/gpuN`` or ``host/gpuN/giM`` id names; None for a VM id (its host is
    the hypervisor's, which the id does not say) or an id that does not parse."""
    try:
        parsed = parse_slot_id(slot_id)
    except ValueError:
        return None
    return parsed.host or None


def known_slot_count(slots: Mapping[str, object], backend_slot_ids: Iterable[str | None]) -> int:
    """How many slots any source names: those described (``slots``) and those only a
    backend's ``slot_id`` names (the registry's, with no GPU source describing them), as the
    fleet table has a row for each."""
    # set operations in C: every backend's slot id is read each tick at thousands of backends
    extra = set(backend_slot_ids)
    extra.difference_update(slots.keys())
    extra.discard(None)
    extra.discard("")
    return len(slots) + len(extra)


def escaped_name(name: str) -> str:
    """``name`` with every control, format or separator character (and the backslash) written
    as a Python-style escape (``b\\x1b[31m1``): the form messages and listings print and the
    CLI accepts, so a backend whose registry name holds such characters can still be named.
    Printable text, CJK included, is kept as it is."""
    import unicodedata

    if name.isprintable() and "\\" not in name:
        return name
    out: list[str] = []
    for ch in name:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable() and unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp"):
            out.append(ch)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)
