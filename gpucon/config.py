"""Configuration: TOML at ``$XDG_CONFIG_HOME/gpucon/config.toml`` (or ``--config``).

OWNER NOTE (skeleton): the dataclasses below are the contract other modules build on.
``load_config`` does the strict validation; every error names the file, the key and what was
expected (ConfigError).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from gpucon.model.alerts import AlertThresholds


class ConfigError(ValueError):
    """A config value is missing or wrong; the message names file, key and what was expected."""


@dataclass(frozen=True, slots=True)
class RedisConfig:
    url: str = "redis://127.0.0.1:6379/0"
    streams: tuple[str, ...] = ("gen:queue",)
    group: str = "g1"
    cadence_s: float = 1.0
    timeout_s: float = 2.0
    client_name: str = "gpucon"


@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    url: str = "http://127.0.0.1:9090"
    cadence_s: float = 5.0
    timeout_s: float = 4.0
    # PromQL templates by metric family; defaults for dcgm-exporter and Triton
    queries: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NvmlConfig:
    host: str = ""  # the name this host has in slot ids; "" = socket.gethostname()
    cadence_s: float = 1.0
    slow_cadence_s: float = 10.0
    timeout_s: float = 2.0


@dataclass(frozen=True, slots=True)
class LibvirtConfig:
    uri: str = "qemu:///system"
    cadence_s: float = 5.0
    timeout_s: float = 4.0


@dataclass(frozen=True, slots=True)
class KubeConfig:
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None  # None: all namespaces
    timeout_s: float = 5.0


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    name: str
    url: str
    model: str
    max_requests: int = 200
    max_rate_per_s: float = 20.0
    max_concurrency: int = 8
    max_duration_s: float = 60.0


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """One named fleet: which sources to read and how."""

    name: str = "default"
    redis: RedisConfig | None = None
    prometheus: PrometheusConfig | None = None
    nvml: NvmlConfig | None = None
    libvirt: LibvirtConfig | None = None
    kube: KubeConfig | None = None
    probe_targets: tuple[ProbeTarget, ...] = ()


@dataclass(frozen=True, slots=True)
class UiConfig:
    refresh_s: float = 1.0
    theme: str = "gpucon-dark"
    # binding id -> key(s), e.g. {"filter": "/", "drain": "d"}
    keys: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuconConfig:
    path: Path | None = None
    fleets: dict[str, FleetConfig] = field(default_factory=lambda: {"default": FleetConfig()})
    default_fleet: str = "default"
    alerts: AlertThresholds = field(default_factory=AlertThresholds)
    slo_p95_ms: dict[str, float] = field(default_factory=dict)  # model -> p95 SLO in ms
    ui: UiConfig = field(default_factory=UiConfig)
    audit_path: Path | None = None  # None: $XDG_STATE_HOME/gpucon/audit.jsonl
    operator: str | None = None  # None: user@host

    @property
    def fleet(self) -> FleetConfig:
        return self.fleets[self.default_fleet]


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpucon" / "config.toml"


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpucon"
