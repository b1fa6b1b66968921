"""Environment overrides of the config, applied over the file (and named in ``origins``).

| variable | overrides |
|---|---|
| ``GPUCON_CONFIG`` | the config file's path (when ``--config`` is not given) |
| ``GPUCON_FLEET`` | which fleet to open (``--fleet`` wins over it) |
| ``GPUCON_READ_ONLY`` | ``1``/``true``/``yes`` or ``0``/``false``/``no`` |
| ``GPUCON_OPERATOR`` | the operator's name in the audit log |
| ``GPUCON_AUDIT_PATH`` | the JSONL audit file |
| ``GPUCON_THEME`` | ``ui.theme`` |
| ``GPUCON_REFRESH_S`` | ``ui.refresh_s`` |
| ``GPUCON_REDIS_URL`` | the selected fleet's ``redis.url`` (adds a Redis source if it had none) |
| ``GPUCON_REDIS_STREAMS`` | the selected fleet's ``redis.streams``, comma-separated |
| ``GPUCON_PROMETHEUS_URL`` | the selected fleet's ``prometheus.url`` (adds the source if absent) |
| ``GPUCON_LIBVIRT_URI`` | the selected fleet's ``libvirt.uri`` (adds the source if absent) |
| ``GPUCON_KUBE_CONTEXT`` | the selected fleet's ``kube.context`` (adds the source if absent) |

Values are validated like the file's; an error names the variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from msgspec.structs import replace

from gpucon.config import (
    FleetConfig,
    GpuconConfig,
    KubeConfig,
    LibvirtConfig,
    PrometheusConfig,
    RedisConfig,
)

SOURCE_VARIABLES = (
    "GPUCON_REDIS_URL",
    "GPUCON_PROMETHEUS_URL",
    "GPUCON_LIBVIRT_URI",
    "GPUCON_KUBE_CONTEXT",
)
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def env_names_a_source(env: Mapping[str, str]) -> bool:
    return any(env.get(name) for name in SOURCE_VARIABLES)


def apply_env(config: GpuconConfig, env: Mapping[str, str]) -> GpuconConfig:
    """``config`` with the GPUCON_* variables of ``env`` applied."""
    from gpucon.config.checks import URL_SCHEMES, Checker

    origins = dict(config.origins)
    changes: dict[str, object] = {}

    def take(variable: str) -> tuple[Checker, str] | None:
        value = env.get(variable)
        if value is None or value == "":
            return None
        return Checker(config.path, variable), value

    if got := take("GPUCON_FLEET"):
        changes["default_fleet"] = got[0].name(got[1], "fleet")
        origins["fleet"] = "env GPUCON_FLEET"
    if got := take("GPUCON_READ_ONLY"):
        word = got[1].strip().lower()
        if word not in TRUE_WORDS + FALSE_WORDS:
            got[0].fail("read_only", "1/true/yes or 0/false/no", got[1])
        changes["read_only"] = word in TRUE_WORDS
        origins["read_only"] = "env GPUCON_READ_ONLY"
    if got := take("GPUCON_OPERATOR"):
        changes["operator"] = got[0].string(got[1], "operator")
        origins["operator"] = "env GPUCON_OPERATOR"
    if got := take("GPUCON_AUDIT_PATH"):
        changes["audit_path"] = Path(got[0].string(got[1], "audit_path")).expanduser()
        origins["audit_path"] = "env GPUCON_AUDIT_PATH"
    ui = config.ui
    if got := take("GPUCON_THEME"):
        ui = replace(ui, theme=got[0].string(got[1], "ui.theme"))
        origins["ui.theme"] = "env GPUCON_THEME"
    if got := take("GPUCON_REFRESH_S"):
        try:
            seconds = float(got[1])
        except ValueError:
            got[0].fail("ui.refresh_s", "a number of seconds", got[1])
        ui = replace(ui, refresh_s=got[0].number(seconds, "ui.refresh_s"))
        origins["ui.refresh_s"] = "env GPUCON_REFRESH_S"
    changes["ui"] = ui
    config = replace(config, **changes)

    name = config.default_fleet
    fleet = config.fleets.get(name)
    if fleet is None:
        if not env_names_a_source(env):
            return replace(config, origins=origins)
        fleet = FleetConfig(name=name)
    prefix = f"fleets.{name}"
    if got := take("GPUCON_REDIS_URL"):
        url = got[0].url(got[1], "redis.url", URL_SCHEMES[RedisConfig])
        fleet = replace(fleet, redis=replace(fleet.redis or RedisConfig(), url=url))
        origins[f"{prefix}.redis.url"] = "env GPUCON_REDIS_URL"
    if got := take("GPUCON_REDIS_STREAMS"):
        streams = tuple(s.strip() for s in got[1].split(",") if s.strip())
        if not streams:
            got[0].fail("redis.streams", "comma-separated stream names", got[1])
        fleet = replace(fleet, redis=replace(fleet.redis or RedisConfig(), streams=streams))
        origins[f"{prefix}.redis.streams"] = "env GPUCON_REDIS_STREAMS"
    if got := take("GPUCON_PROMETHEUS_URL"):
        url = got[0].url(got[1], "prometheus.url", URL_SCHEMES[PrometheusConfig])
        prom = replace(fleet.prometheus or PrometheusConfig(), url=url)
        fleet = replace(fleet, prometheus=prom)
        origins[f"{prefix}.prometheus.url"] = "env GPUCON_PROMETHEUS_URL"
    if got := take("GPUCON_LIBVIRT_URI"):
        uri = got[1].strip()
        if "://" not in uri:
            got[0].fail("libvirt.uri", "a libvirt URI such as qemu:///system", uri)
        fleet = replace(fleet, libvirt=replace(fleet.libvirt or LibvirtConfig(), uri=uri))
        origins[f"{prefix}.libvirt.uri"] = "env GPUCON_LIBVIRT_URI"
    if got := take("GPUCON_KUBE_CONTEXT"):
        context = got[0].string(got[1], "kube.context")
        fleet = replace(fleet, kube=replace(fleet.kube or KubeConfig(), context=context))
        origins[f"{prefix}.kube.context"] = "env GPUCON_KUBE_CONTEXT"
    fleets = {**config.fleets, name: fleet}
    return replace(config, fleets=fleets, origins=origins)
