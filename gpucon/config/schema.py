"""Strict validation of a parsed config document into the dataclasses of ``gpucon.config``.

The generic builder and the value checks (``gpucon.config.checks``) check each table against
its dataclass's fields and types: unknown keys, wrong types, out-of-range numbers, bad URLs and
bad names are refused with a ConfigError naming the file, the key path and what was expected.
This module walks the document: the top-level keys and tables, and the few with their own
shape (fleets, ``[[fleets.NAME.mps]]``, ``[slo]``, ``[keys]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

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
from gpucon.config.checks import Checker
from gpucon.config.mps import TRANSPORTS, MpsDaemonConfig, MpsServerConfig
from gpucon.model.alerts import AlertThresholds

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
    ui = msgspec.structs.replace(ui, keys=keys)
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
