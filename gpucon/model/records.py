"""Helpers for gpucon's records (frozen ``msgspec.Struct`` classes: the model, the config's tables).

Copy a record with ``msgspec.structs.replace(record, field=value)`` (never ``dataclasses.replace``:
a Struct is not a dataclass); its field names are ``type(record).__struct_fields__``. ``as_dict``
is ``dataclasses.asdict`` for records: ``msgspec.structs.asdict`` stops at the first level and
``msgspec.to_builtins`` turns tuples into lists, which would change a plan's digest.
"""

from __future__ import annotations

from typing import Any

import msgspec


def as_dict(record: msgspec.Struct) -> dict[str, Any]:
    """The record's fields by name, nested records as dicts too (tuples stay tuples)."""
    return {name: _plain(getattr(record, name)) for name in record.__struct_fields__}


def _plain(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return as_dict(value)
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
