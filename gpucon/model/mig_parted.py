"""NVIDIA mig-parted config files: a team's named MIG layouts, read as gpucon layouts.

The format (``version: v1``)::

    mig-configs:
      all-balanced:
        - devices: all            # or a list of GPU indexes: [0, 1]
          device-filter: [...]    # optional PCI device ids ("0x20B010DE")
          mig-enabled: true
          mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}

A config may hold several entries (one per GPU model, by ``device-filter``, or per GPU index).
``layout_for(config, name, gpu_index, known)`` picks the entry for one GPU: among the entries
whose ``devices`` include it, the first whose profiles the GPU's table knows (gpucon does not
read PCI device ids, so an entry's ``device-filter`` is matched by its profile names instead,
and the choice says so). Pure: the YAML text is parsed here, the file is read by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from gpucon.model.mig_layout import MAX_ITEMS, LayoutError, LayoutItem, parse_layout

MAX_CONFIG_CHARS = 1_000_000


class MigPartedError(ValueError):
    """A config file or config name gpucon cannot use; the message names the key."""


class PartedChoice(msgspec.Struct, frozen=True, gc=False):
    """The entry of a named config that applies to one GPU, as a layout."""

    name: str
    items: tuple[LayoutItem, ...]
    mig_enabled: bool
    entry: int  # which entry of the config (0-based)
    why: str  # how the entry was chosen


def parse_config(text: str) -> dict[str, list[dict[str, Any]]]:
    """The ``mig-configs`` of a mig-parted file: name -> its entries, checked for shape."""
    import yaml

    if len(text) > MAX_CONFIG_CHARS:
        raise MigPartedError(f"the config file is larger than {MAX_CONFIG_CHARS} characters")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MigPartedError(f"not YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise MigPartedError("expected a mapping with 'version' and 'mig-configs'")
    if str(doc.get("version")) != "v1":
        raise MigPartedError(f"version: expected v1, got {doc.get('version')!r}")
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise MigPartedError("mig-configs: expected a mapping of config names to entries")
    out: dict[str, list[dict[str, Any]]] = {}
    for name, entries in configs.items():
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise MigPartedError(f"mig-configs.{name}: expected a list of entries")
        out[str(name)] = entries
    return out


def _devices_include(entry: Mapping[str, Any], where: str, gpu_index: int) -> bool:
    devices = entry.get("devices", "all")
    if devices == "all":
        return True
    if isinstance(devices, int) and not isinstance(devices, bool):
        return devices == gpu_index
    if isinstance(devices, list) and all(
        isinstance(d, int) and not isinstance(d, bool) for d in devices
    ):
        return gpu_index in devices
    raise MigPartedError(f"{where}.devices: expected 'all' or a list of GPU indexes")


def _items(entry: Mapping[str, Any], where: str) -> tuple[LayoutItem, ...]:
    devices = entry.get("mig-devices") or {}
    if not isinstance(devices, dict):
        raise MigPartedError(f"{where}.mig-devices: expected profile: count pairs")
    items: list[LayoutItem] = []
    for profile, count in devices.items():
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_ITEMS:
            raise MigPartedError(
                f"{where}.mig-devices.{profile}: expected a count from 0 to {MAX_ITEMS}"
            )
        if count:
            try:
                (item,) = parse_layout(str(profile))
            except (LayoutError, ValueError) as exc:
                raise MigPartedError(f"{where}.mig-devices: {exc}") from None
            items.extend([item] * count)
    if len(items) > MAX_ITEMS:
        raise MigPartedError(f"{where}.mig-devices: more than {MAX_ITEMS} instances")
    return tuple(items)


def layout_for(
    configs: Mapping[str, list[dict[str, Any]]],
    name: str,
    gpu_index: int,
    known: Callable[[str], bool],
) -> PartedChoice:
    """The layout config ``name`` gives GPU ``gpu_index`` (``known(profile)``: the GPU's
    profile table has that profile)."""
    entries = configs.get(name)
    if entries is None:
        names = ", ".join(sorted(configs)[:20])
        raise MigPartedError(f"no config {name!r} in the file (it has {names})")
    candidates: list[tuple[int, PartedChoice]] = []
    for i, entry in enumerate(entries):
        where = f"mig-configs.{name}[{i}]"
        if not _devices_include(entry, where, gpu_index):
            continue
        enabled = entry.get("mig-enabled", False)
        if not isinstance(enabled, bool):
            raise MigPartedError(f"{where}.mig-enabled: expected true or false")
        items = _items(entry, where) if enabled else ()
        filtered = "device-filter" in entry
        why = f"entry {i} of {name!r} covers GPU {gpu_index}" + (
            " (its device-filter is matched by profile names)" if filtered else ""
        )
        candidates.append((i, PartedChoice(name, items, enabled, i, why)))
    if not candidates:
        raise MigPartedError(f"config {name!r} has no entry for GPU {gpu_index}")
    for _, choice in candidates:
        if all(known(item.profile) for item in choice.items):
            return choice
    unknown = sorted({i.profile for _, c in candidates for i in c.items if not known(i.profile)})
    raise MigPartedError(
        f"config {name!r}: no entry for GPU {gpu_index} uses only profiles this GPU has "
        f"(unknown here: {', '.join(unknown)})"
    )
