"""Strict validation of a parsed config document into the dataclasses of ``gpucon.config``.

One generic builder checks each table against its dataclass's fields and types: unknown keys,
wrong types, non-positive durations, bad URLs and bad names are refused with a ConfigError
naming the file, the key path and what was expected. The few tables with their own shape
(fleets, ``[slo]``, ``[keys]``, PromQL templates) have small dedicated checks.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from gpucon.config import (
    ConfigError,
    FleetConfig,
    GpuconConfig,
    KubeConfig,
    LibvirtConfig,
    NvmlConfig,
    ProbeTarget,
    PrometheusConfig,
    ReadinessConfig,
    RecordConfig,
    RedisConfig,
    UiConfig,
)
from gpucon.config.mps import TRANSPORTS, MpsDaemonConfig, MpsServerConfig
from gpucon.errors import range_text, shown
from gpucon.model.alerts import AlertThresholds

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
SOURCE_TABLES: dict[str, type] = {
    "redis": RedisConfig,
    "prometheus": PrometheusConfig,
    "nvml": NvmlConfig,
    "libvirt": LibvirtConfig,
    "kube": KubeConfig,
    "readiness": ReadinessConfig,
}
TOP_LEVEL_KEYS = ("fleet", "operator", "audit_path", "read_only")
TOP_LEVEL_TABLES = ("ui", "keys", "slo", "alerts", "fleets", "record")


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
        """An instance of dataclass ``cls`` from a TOML table, each field checked by its type."""
        table = self.table(value, key)
        hints = typing.get_type_hints(cls)
        fields = [f for f in dataclasses.fields(cls) if f.name not in fixed]  # type: ignore[arg-type]
        self.no_unknown(table, tuple(f.name for f in fields), key)
        kwargs: dict[str, Any] = dict(fixed)
        for f in fields:
            sub = f"{key}.{f.name}"
            if f.name not in table:
                no_default = dataclasses.MISSING
                if f.default is no_default and f.default_factory is no_default:
                    self.fail(sub, f"a value ({_describe(hints[f.name])})", got="nothing")
                continue
            kwargs[f.name] = self.field_value(cls, f.name, hints[f.name], table[f.name], sub)
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


def credentials_exclusive(check: Checker, source: RedisConfig | PrometheusConfig, key: str) -> None:
    """A password comes from one place, and Prometheus takes a password or a token, not both."""
    if source.password_file and source.password_env:
        check.fail(f"{key}.password_env", "either password_file or password_env", got="both")
    if isinstance(source, PrometheusConfig):
        if source.token_file and source.token_env:
            check.fail(f"{key}.token_env", "either token_file or token_env", got="both")
        if (source.token_file or source.token_env) and (
            source.password_file or source.password_env or source.username
        ):
            check.fail(f"{key}.token_file", "a token or a username/password", got="both")


def parse_fleet(check: Checker, name: str, value: object) -> FleetConfig:
    key = f"fleets.{name}"
    check.name(name, f"{key} (the fleet's name)")
    table = check.table(value, key)
    check.no_unknown(table, (*SOURCE_TABLES, "probe_targets", "mps"), key)
    kwargs: dict[str, Any] = {"name": name}
    for source, cls in SOURCE_TABLES.items():
        if source in table:
            kwargs[source] = check.build(cls, table[source], f"{key}.{source}")
            check.origins[f"{key}.{source}"] = "file"
            if source in ("redis", "prometheus"):
                credentials_exclusive(check, kwargs[source], f"{key}.{source}")
    if "probe_targets" in table:
        targets = table["probe_targets"]
        if not isinstance(targets, list):
            check.fail(f"{key}.probe_targets", "an array of tables ([[...probe_targets]])", targets)
        built = [
            check.build(ProbeTarget, t, f"{key}.probe_targets[{i}]") for i, t in enumerate(targets)
        ]
        names = [t.name for t in built]
        for i, target_name in enumerate(names):
            if names.index(target_name) != i:
                check.fail(f"{key}.probe_targets[{i}].name", "a unique name", target_name)
        kwargs["probe_targets"] = tuple(built)
    if "mps" in table:
        kwargs["mps"] = parse_mps(check, table["mps"], f"{key}.mps")
    return FleetConfig(**kwargs)


def parse_mps(check: Checker, value: object, key: str) -> tuple[MpsDaemonConfig, ...]:
    """``[[fleets.NAME.mps]]`` with their ``[[...servers]]``: each transport's own fields."""
    if not isinstance(value, list):
        check.fail(key, "an array of tables ([[...mps]])", value)
    daemons: list[MpsDaemonConfig] = []
    for i, item in enumerate(value):
        where = f"{key}[{i}]"
        table = dict(check.table(item, where))
        servers_value = table.pop("servers", [])
        if not isinstance(servers_value, list):
            check.fail(f"{where}.servers", "an array of tables ([[...servers]])", servers_value)
        servers = tuple(
            check.build(MpsServerConfig, s, f"{where}.servers[{j}]")
            for j, s in enumerate(servers_value)
        )
        daemon = check.build(MpsDaemonConfig, table, where, servers=servers)
        if daemon.transport not in TRANSPORTS:
            check.fail(f"{where}.transport", " or ".join(TRANSPORTS), daemon.transport)
        if daemon.transport == "ssh" and not (daemon.ssh_host and daemon.ssh_known_hosts_file):
            check.fail(f"{where}.ssh_host", "ssh_host and ssh_known_hosts_file", got="missing")
        if daemon.transport == "kube" and not daemon.node:
            check.fail(f"{where}.node", "the node whose MPS pod to restart", got="nothing")
        if daemon.target in {d.target for d in daemons}:
            check.fail(f"{where}.target", "a target no other [[mps]] table names", daemon.target)
        daemons.append(daemon)
    return tuple(daemons)


def parse_document(document: Mapping[str, Any], path: Path | None) -> GpuconConfig:
    """Validate a whole config document (as tomllib returns it)."""
    check = Checker(path)
    check.no_unknown(document, (*TOP_LEVEL_KEYS, *TOP_LEVEL_TABLES), "")
    fleets_table = check.table(document.get("fleets", {}), "fleets")
    if not fleets_table:
        check.fail("fleets", "at least one [fleets.NAME.SOURCE] table", got="no fleets")
    fleets = {name: parse_fleet(check, name, value) for name, value in fleets_table.items()}
    default_fleet = next(iter(fleets))
    check.origins["fleet"] = "first fleet in the file"
    if "fleet" in document:
        default_fleet = check.name(document["fleet"], "fleet")
        check.origins["fleet"] = "file"
    ui_table = check.table(document.get("ui", {}), "ui")
    ui = check.build(UiConfig, ui_table, "ui", keys={})
    keys = check.string_map(document.get("keys", {}), "keys")
    for binding in keys:
        check.name(binding, f"keys.{binding} (a binding id)")
        check.origins[f"keys.{binding}"] = "file"
    from gpucon.config.keys import key_collisions

    for collision in key_collisions(keys)[:1]:
        raise ConfigError(f"{path or '(no file)'}: {collision}")
    ui = dataclasses.replace(ui, keys=keys)
    slo = {
        model: check.number(ms, f"slo.{model}", field="slo_ms")
        for model, ms in check.table(document.get("slo", {}), "slo").items()
    }
    for model in slo:
        check.origins[f"slo.{model}"] = "file"
    alerts = check.build(AlertThresholds, document.get("alerts", {}), "alerts")
    record = check.build(RecordConfig, document.get("record", {}), "record")
    audit_path = None
    if "audit_path" in document:
        audit_path = Path(check.string(document["audit_path"], "audit_path")).expanduser()
        check.origins["audit_path"] = "file"
    operator = None
    if "operator" in document:
        operator = check.string(document["operator"], "operator")
        check.origins["operator"] = "file"
    read_only = False
    if "read_only" in document:
        read_only = check.boolean(document["read_only"], "read_only")
        check.origins["read_only"] = "file"
    return GpuconConfig(
        path=path,
        fleets=fleets,
        default_fleet=default_fleet,
        alerts=alerts,
        slo_p95_ms=slo,
        ui=ui,
        record=record,
        audit_path=audit_path,
        operator=operator,
        read_only=read_only,
        origins=dict(check.origins),
    )
