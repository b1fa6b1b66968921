"""``gpucon config check``: validate the config and print what would be used, and from where.

Prints the effective values (file, environment or default, per value) as TOML-like lines,
the fleet that would open, and exits 2 with the error (file, key, expectation) on a bad or
missing config. Standard library only at module level.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gpucon.redact import redact

if TYPE_CHECKING:
    from gpucon.config import GpuconConfig

SOURCE_NAMES = ("nvml", "libvirt", "prometheus", "redis", "kube", "readiness")
# shown only when set: where a credential comes from (a path, a variable's name), never a value
CREDENTIAL_FIELDS = frozenset(
    {"username", "password_file", "password_env", "token_file", "token_env"}
    | {"ca_file", "cert_file", "key_file", "insecure_skip_verify"}
)


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=["check"],
        default="check",
        help="check: validate and print the effective config (the default)",
    )


def _value(value: object) -> str:
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, ensure_ascii=False)


def _table(
    lines: list[str], config: GpuconConfig, key: str, obj: Any, skip: tuple[str, ...] = ()
) -> None:
    lines.append(f"[{key}]")
    # a msgspec Struct (the alert thresholds) names its fields itself; a dataclass through fields()
    names = getattr(obj, "__struct_fields__", None) or [f.name for f in dataclasses.fields(obj)]
    fields = [
        name
        for name in names
        if name not in skip
        and not (name in CREDENTIAL_FIELDS and getattr(obj, name) in (None, False))
    ]
    width = max((len(name) for name in fields), default=0)
    for name in fields:
        value = getattr(obj, name)
        if isinstance(value, dict):
            continue
        shown = redact(_value(value))  # before padding: the columns stay aligned
        lines.append(f"{name:<{width}} = {shown:<40} # {config.origin(f'{key}.{name}')}")
    for name in fields:
        value = getattr(obj, name)
        if isinstance(value, dict) and value:
            lines.append(f"[{key}.{name}]")
            for k, v in value.items():
                lines.append(f"{k} = {_value(v)}  # {config.origin(f'{key}.{name}.{k}')}")
    lines.append("")


def describe_config(config: GpuconConfig) -> list[str]:
    """The effective config as TOML-like lines, each value followed by where it came from."""
    lines = [
        f"# config file: {config.path or '(none: environment only)'}",
        f"# opens fleet {config.default_fleet!r} (from {config.origin('fleet')})",
        "",
    ]
    for key in ("read_only", "operator", "audit_path"):
        lines.append(f"{key} = {_value(getattr(config, key))}  # {config.origin(key)}")
    lines.append("")
    _table(lines, config, "ui", config.ui, skip=("keys",))
    if config.ui.keys:
        lines.append("[keys]")
        lines += [
            f"{k} = {_value(v)}  # {config.origin(f'keys.{k}')}" for k, v in config.ui.keys.items()
        ]
        lines.append("")
    if config.slo_p95_ms:
        lines.append("[slo]")
        lines += [
            f"{k} = {_value(v)}  # {config.origin(f'slo.{k}')}"
            for k, v in config.slo_p95_ms.items()
        ]
        lines.append("")
    _table(lines, config, "alerts", config.alerts)
    _table(lines, config, "record", config.record)
    for name, fleet in config.fleets.items():
        chosen = "  (opens)" if name == config.default_fleet else ""
        lines.append(f"# -- fleet {name}{chosen}")
        from gpucon.config import readiness_of

        tables = {s: getattr(fleet, s) for s in SOURCE_NAMES}
        tables["readiness"] = readiness_of(fleet)  # on by default beside a registry
        configured = [s for s in SOURCE_NAMES if tables[s] is not None]
        lines.append(f"# sources, in merge order: {', '.join(configured) or 'none'}")
        for source in configured:
            _table(lines, config, f"fleets.{name}.{source}", tables[source])
            if source in ("redis", "prometheus"):
                from gpucon.config.credentials import describe_credentials

                lines[-1:-1] = describe_credentials(tables[source])
        for i, target in enumerate(fleet.probe_targets):
            _table(lines, config, f"fleets.{name}.probe_targets[{i}]", target)
        for i, daemon in enumerate(fleet.mps):
            _table(
                lines,
                config,
                f"fleets.{name}.mps[{i}]",
                msgspec.structs.replace(daemon, servers=()),
            )
            for j, server in enumerate(daemon.servers):
                _table(lines, config, f"fleets.{name}.mps[{i}].servers[{j}]", server)
    return lines


def run(args: argparse.Namespace) -> int:
    from gpucon.config import ConfigError, load_config

    path = Path(args.config) if getattr(args, "config", None) else None
    try:
        config = load_config(path, fleet=getattr(args, "fleet", None))
    except ConfigError as exc:
        print(f"gpucon: config error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "read_only", False) and not config.read_only:
        config = msgspec.structs.replace(
            config, read_only=True, origins={**config.origins, "read_only": "--read-only"}
        )
    from gpucon.config.credentials import credential_problems, credential_warnings

    problems = ui_problems(config) + credential_problems(config)
    for problem in problems:
        print(redact(f"gpucon: config error: {problem}"), file=sys.stderr)
    if problems:
        return 2
    for warning in credential_warnings(config):
        print(redact(f"gpucon: WARNING: {warning}"), file=sys.stderr)

    # every line passes through redact: URLs (from the file or the environment) keep their
    # user and lose their password
    print(redact("\n".join(describe_config(config)).rstrip()))
    print()
    print(redact("\n".join(source_availability(config))))
    print("\nconfig OK")
    return 0


def ui_problems(config: GpuconConfig) -> list[str]:
    """What the console would refuse at start: unknown binding ids in [keys], unknown themes.

    Binding ids come from ``gpucon.config.keys`` (no Textual import); themes from the themes.
    """
    from gpucon.config.keys import BINDING_IDS
    from gpucon.themes import THEMES, ThemeError, resolve_theme

    where = str(config.path) if config.path else "config"
    problems: list[str] = []
    known = BINDING_IDS
    for binding_id in sorted(set(config.ui.keys) - known):
        problems.append(
            f"{where}: keys.{binding_id}: unknown binding id "
            f"(expected one of: {', '.join(sorted(known))})"
        )
    try:
        resolve_theme(config.ui.theme, set(THEMES))
    except ThemeError as exc:
        problems.append(f"{where}: ui.theme: {exc}")
    return problems


def source_availability(config: GpuconConfig) -> list[str]:
    """Whether each source of the opening fleet can be built here (no IO: nothing is read)."""
    from gpucon.session.sources import UnavailableSource, build_sources

    lines = [f"# sources of fleet {config.default_fleet!r} on this machine:"]
    for source in build_sources(config.fleet):
        if isinstance(source, UnavailableSource):
            lines.append(f"#   {source.name}: {source.reason}")
        else:
            every = f"every {source.cadence_s:g}s, timeout {source.timeout_s:g}s"
            lines.append(f"#   {source.name}: ready ({every})")
        source.close()
    if len(lines) == 1:
        lines.append("#   none: this fleet names no source")
    return lines
