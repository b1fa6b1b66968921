"""The checks every config value passes: each number finite and within the range its unit
allows, names, URLs, environment variable names, PromQL durations, and one generic builder
(``Checker.build``) that fills a dataclass of ``gpucon.config`` from a TOML table, checking
each field by its type. Every refusal is a ConfigError naming the file (or the environment
variable), the key path and what was expected.

``gpucon.config.schema`` walks the document's tables with it; ``gpucon.config.env`` checks
the environment's overrides with it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from gpucon.config import (
    ConfigError,
    NvmlConfig,
    ProbeTarget,
    PrometheusConfig,
    ReadinessConfig,
    RecordConfig,
    RedisConfig,
)
from gpucon.errors import range_text, shown

T = TypeVar("T")

# Every number a config holds is finite and within a stated range: a value that passes here
# must also work where it is used (a 1e18 s timeout passed once and then broke every read:
# no clock or Redis client takes it). Ranges by the field's unit, from its name's suffix.
MAX_DURATION_S = 86_400.0  # cadences, timeouts, windows: a day at most
MIN_REFRESH_S = 0.05  # the console redraws at most 20 times a second
# a shorter duration is no deadline at all: a clock's step (time.monotonic() + 1e-31 is itself)
MIN_DURATION_S = 0.001
MAX_MS = 3_600_000.0  # SLOs and waits in milliseconds: an hour at most
MAX_MIB = 16_777_216.0  # 16 TiB of GPU memory
MAX_RATE = 1_000_000.0
MAX_PLAIN = 1_000_000_000.0  # any other number
MAX_INTEGER = 1_000_000
MAX_STRING_CHARS = 4_096
# PromQL's duration syntax ([5m], [1h30m], [500ms])
PROMQL_DURATION_RE = re.compile(r"^(?:[0-9]+(?:ms|[smhdwy]))+$")


def number_range(name: str) -> tuple[float, float, bool]:
    """(minimum, maximum, minimum excluded) for a float field named ``name``."""
    if name == "refresh_s":
        return MIN_REFRESH_S, MAX_DURATION_S, False
    if name.endswith("_s"):
        return MIN_DURATION_S, MAX_DURATION_S, False
    if name.endswith("_ms"):
        return 0.0, MAX_MS, True
    if name.endswith("_pct"):
        return 0.0, 100.0, False
    if name.endswith("_mib"):
        return 0.0, MAX_MIB, False
    if name.startswith("max_"):
        return 0.0, MAX_RATE, True
    return 0.0, MAX_PLAIN, False


# [record] field -> (minimum, maximum, what it is)
RECORD_LIMITS: dict[str, tuple[float, float, str]] = {
    "keyframe_s": (1.0, 3600.0, "seconds between keyframes,"),
    "max_mib": (1.0, MAX_MIB, "a size cap in MiB,"),
    "max_age_h": (1.0 / 60.0, 87_600.0, "an age cap in hours,"),
}

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
URL_SCHEMES: dict[type, tuple[str, ...]] = {
    RedisConfig: ("redis", "rediss", "unix"),
    PrometheusConfig: ("http", "https"),
    ProbeTarget: ("http", "https"),
}


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


class Checker:
    """Validation helpers bound to one file, so every error names it."""

    def __init__(self, path: Path | None, variable: str | None = None) -> None:
        self.path = path
        self.variable = variable  # set when checking an environment variable
        self.origins: dict[str, str] = {}

    def fail(
        self, key: str, expected: str, value: object = None, *, got: str | None = None
    ) -> typing.NoReturn:
        said = got if got is not None else f"{_type_name(value)} {shown(value)}"
        key = shown(key, 200)[1:-1] if not key.isprintable() or len(key) > 200 else key
        where = (
            f"environment {self.variable} ({key})"
            if self.variable
            else f"{self.path or '(no file)'}: {key}"
        )
        raise ConfigError(f"{where}: expected {expected}, got {said}")

    def table(self, value: object, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, "a table", value)
        return typing.cast(dict[str, Any], value)

    def no_unknown(self, table: Mapping[str, Any], allowed: tuple[str, ...], key: str) -> None:
        for name in table:
            if name not in allowed:
                where = f"{key}.{name}" if key else name
                self.fail(
                    where, f"one of the known keys ({', '.join(allowed)})", got="an unknown key"
                )

    def number(
        self, value: object, key: str, *, field: str | None = None, positive: bool = False
    ) -> float:
        """A finite number within the range its field's name implies (``number_range``);
        ``positive``: greater than the range's minimum, not equal to it."""
        minimum, maximum, above = number_range(field or key.rsplit(".", 1)[-1])
        above = above or positive
        allowed = f"a number {range_text(minimum, maximum, above=above)}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, allowed, value)
        try:
            number = float(typing.cast(float, value))
        except OverflowError:  # an integer beyond any float
            self.fail(key, allowed, value)
        if not math.isfinite(number):
            self.fail(key, f"a finite number ({range_text(minimum, maximum, above=above)})", value)
        if (number <= minimum if above else number < minimum) or number > maximum:
            self.fail(key, allowed, value)
        return number

    def integer(self, value: object, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, "an integer", value)
        if not 0 < value <= MAX_INTEGER:
            self.fail(key, f"an integer greater than 0 and at most {MAX_INTEGER:,}", value)
        return value

    def string(self, value: object, key: str, *, allow_empty: bool = False) -> str:
        if not isinstance(value, str):
            self.fail(key, "a string", value)
        text = value
        if not allow_empty and not text.strip():
            self.fail(key, "a non-empty string", value)
        if len(text) > MAX_STRING_CHARS:
            self.fail(key, f"a string of at most {MAX_STRING_CHARS:,} characters", value)
        if any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in text):
            self.fail(key, "a string without control characters", value)
        return text

    def name(self, value: object, key: str) -> str:
        text = self.string(value, key)
        if not NAME_RE.match(text):
            self.fail(key, "a name of letters, digits, '_', '.', ':' or '-'", value)
        return text

    def boolean(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, "true or false", value)
        return value

    def url(self, value: object, key: str, schemes: tuple[str, ...]) -> str:
        text = self.string(value, key)
        expected = " or ".join(f"{s}://" for s in schemes) + " URL"
        try:
            parts = urlsplit(text)
            _ = parts.port  # raises on a non-numeric port
        except ValueError:
            self.fail(key, expected, text)
        if parts.scheme not in schemes or (parts.scheme != "unix" and not parts.hostname):
            self.fail(key, expected, text)
        if parts.scheme == "unix" and not parts.path:
            self.fail(key, "a unix:// URL with a socket path", text)
        return text

    def string_list(self, value: object, key: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            self.fail(key, "a non-empty array of strings", value)
        items = typing.cast(list[object], value)
        return tuple(self.string(item, f"{key}[{i}]") for i, item in enumerate(items))

    def integer_list(self, value: object, key: str) -> tuple[int, ...]:
        """An array of integers greater than 0 (may be empty: e.g. no XID is critical)."""
        if not isinstance(value, list):
            self.fail(key, "an array of integers", value)
        items = typing.cast(list[object], value)
        return tuple(self.integer(item, f"{key}[{i}]") for i, item in enumerate(items))

    def string_map(self, value: object, key: str) -> dict[str, str]:
        table = self.table(value, key)
        return {k: self.string(v, f"{key}.{k}") for k, v in table.items()}

    # -- dataclasses -----------------------------------------------------------------------

    def build(self, cls: type[T], value: object, key: str, **fixed: Any) -> T:
        """An instance of record ``cls`` (a dataclass or a msgspec Struct) from a TOML table,
        each field checked by its type."""
        table = self.table(value, key)
        fields = [(n, required) for n, required in _fields(cls) if n not in fixed]
        self.no_unknown(table, tuple(n for n, _ in fields), key)
        kwargs: dict[str, Any] = dict(fixed)
        for name, required in fields:
            sub = f"{key}.{name}"
            if name not in table:
                if required:
                    self.fail(sub, f"a value ({_describe(field_type(cls, name))})", got="nothing")
                continue
            kwargs[name] = self.field_value(cls, name, field_type(cls, name), table[name], sub)
            self.origins[sub] = "file"
        return cls(**kwargs)

    def field_value(self, cls: type, name: str, hint: object, value: object, key: str) -> object:
        if name == "url" and cls in URL_SCHEMES:
            return self.url(value, key, URL_SCHEMES[cls])
        if name == "uri":
            text = self.string(value, key)
            if "://" not in text:
                self.fail(key, "a libvirt URI such as qemu:///system", value)
            return text
        if name == "queries":
            return self.queries(value, key)
        if name == "path" and cls is ReadinessConfig:
            text = self.string(value, key)
            if not text.startswith("/") or any(c.isspace() for c in text):
                self.fail(key, "a url path starting with / (e.g. /v2/health/ready)", value)
            return text
        if name == "noisy_min_r":  # a correlation: r above 1 would never fire
            r = self.number(value, key, positive=True)
            if r > 1.0:
                self.fail(key, "a correlation greater than 0 and at most 1", value)
            return r
        if name == "kubeconfig" or name.endswith("_file"):
            return str(Path(self.string(value, key)).expanduser())
        if name.endswith("_env"):
            text = self.string(value, key)
            if not ENV_NAME_RE.match(text):
                self.fail(key, "the name of an environment variable (letters, digits, _)", value)
        if name == "mig_executor":
            text = self.string(value, key)
            if text not in MIG_EXECUTORS:
                self.fail(key, f"one of {', '.join(MIG_EXECUTORS)}", value)
            return text
        if name == "rate_window":
            text = self.string(value, key)
            if not PROMQL_DURATION_RE.match(text):
                self.fail(key, "a PromQL duration such as 30s, 1m or 1h30m", value)
            return text
        if cls is RecordConfig:
            return self.record_limit(name, value, key)
        if hint is float or hint == (float | None):
            return self.number(value, key, field=name)
        if hint is int:
            return self.integer(value, key)
        if hint is bool:
            return self.boolean(value, key)
        if hint is str or hint == (str | None):
            return self.string(value, key, allow_empty=cls is NvmlConfig and name == "host")
        if hint == tuple[str, ...]:
            return self.string_list(value, key)
        if hint == tuple[int, ...]:
            return self.integer_list(value, key)
        if hint == dict[str, str]:
            return self.string_map(value, key)
        raise TypeError(f"config field {cls.__name__}.{name}: no check for {hint!r}")

    def record_limit(self, name: str, value: object, key: str) -> float:
        """``[record]``: a keyframe from every second to every hour; a size cap from 1 MiB to
        16 TiB; an age cap from a minute to ten years."""
        low, high, what = RECORD_LIMITS[name]
        allowed = f"{what} {range_text(low, high, above=False)}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, allowed, value)
        number = float(value)
        if not math.isfinite(number) or not low <= number <= high:
            self.fail(key, allowed, value)
        return number

    def queries(self, value: object, key: str) -> dict[str, str]:
        from gpucon.sources.promql import DEFAULT_QUERIES

        table = self.string_map(value, key)
        for family in table:
            self.origins[f"{key}.{family}"] = "file"
            if family not in DEFAULT_QUERIES:
                known = ", ".join(DEFAULT_QUERIES)
                self.fail(
                    f"{key}.{family}", f"a known metric family ({known})", got="an unknown one"
                )
        return table


MIG_EXECUTORS = ("nvml", "nvidia-smi", "kubernetes")


def _describe(hint: object) -> str:
    names: dict[object, str] = {
        float: "a number",
        int: "an integer",
        str: "a string",
        bool: "true or false",
    }
    return names.get(hint, "a value")


def _fields(cls: type) -> list[tuple[str, bool]]:
    """(name, required) of each field of a msgspec Struct or a dataclass, in order (their
    types are not resolved: ``field_type`` resolves those a table sets)."""
    if hasattr(cls, "__struct_fields__"):
        names: tuple[str, ...] = getattr(cls, "__struct_fields__")  # noqa: B009
        # msgspec holds the defaults of the trailing fields: those before them are required
        required = len(names) - len(getattr(cls, "__struct_defaults__"))  # noqa: B009
        return [(name, i < required) for i, name in enumerate(names)]
    missing = dataclasses.MISSING
    return [
        (f.name, f.default is missing and f.default_factory is missing)
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    ]


def field_type(cls: type, name: str) -> object:
    """The type of ``cls``'s field ``name``: its annotation (a string, under ``from
    __future__ import annotations``) evaluated in its module, as ``typing.get_type_hints``
    does, for this one field. Resolving every field of every table (get_type_hints,
    ``msgspec.structs.fields``) compiled ~80 annotations, ~3 ms of a live console's start,
    for the few fields a config sets."""
    for klass in cls.__mro__:
        annotation = vars(klass).get("__annotations__", {}).get(name)
        if annotation is None:
            continue
        if isinstance(annotation, str):
            return eval(annotation, vars(sys.modules[klass.__module__]))
        return annotation
    raise TypeError(f"{cls.__name__} has no field {name!r}")
