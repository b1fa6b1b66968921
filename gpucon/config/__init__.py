"""Configuration: TOML at ``$XDG_CONFIG_HOME/gpucon/config.toml`` (or ``--config``).

The records below (msgspec Structs, the whole config too) are the contract other
modules build on. ``load_config`` reads the file with tomllib, validates it strictly (unknown
keys, wrong types, negative cadences, bad URLs) and applies environment overrides (see
``gpucon.config.env``). Every error is a ConfigError
whose message names the file, the key path (``fleets.prod.redis.url``) and what was expected.
A missing file is ConfigMissing, whose message says how to write one and offers ``gpucon demo``.
The effective config remembers where each value came from (``origins``: file, env or default).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from gpucon.config.mps import MpsDaemonConfig
from gpucon.model.alerts import AlertThresholds
from gpucon.redact import redact


class ConfigError(ValueError):
    """A config value is missing or wrong; the message names file, key and what was expected."""

    def __init__(self, message: str) -> None:
        # the message quotes the value it refused, which may be a URL with its password
        super().__init__(redact(message))


class ConfigMissing(ConfigError):
    """There is no config file; the message says how to write one."""

    def __init__(self, path: Path) -> None:
        # written (and masked) when read: the demo meets this on every start and never shows
        # it, and masking it compiled every redaction pattern before the first frame
        ValueError.__init__(self, path)
        self.path = path

    def __str__(self) -> str:
        return redact(missing_config_message(self.path))


class RedisConfig(msgspec.Struct, frozen=True, gc=False):
    """The Redis registry and request streams a fleet uses (``[fleets.NAME.redis]``)."""

    url: str = "redis://127.0.0.1:6379/0"
    streams: tuple[str, ...] = ("gen:queue",)
    group: str = "g1"
    cadence_s: float = 1.0
    timeout_s: float = 2.0
    client_name: str = "gpucon"
    # credentials (gpucon.config.credentials): an ACL user, its password from a file (mode
    # 0600 or stricter) or an environment variable; TLS files for rediss://
    username: str | None = None
    password_file: str | None = None
    password_env: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False


class PrometheusConfig(msgspec.Struct, frozen=True, gc=False):
    """Where to read DCGM and backend metrics (``[fleets.NAME.prometheus]``)."""

    url: str = "http://127.0.0.1:9090"
    cadence_s: float = 5.0
    timeout_s: float = 4.0
    # PromQL templates by metric family; defaults for dcgm-exporter and Triton
    # (gpucon.sources.promql.DEFAULT_QUERIES); ``{window}`` is replaced by ``rate_window``
    queries: dict[str, str] = msgspec.field(default_factory=dict)
    rate_window: str = "1m"
    # labels that name a DCGM series' host, first found wins (Kubernetes: e.g. ["node", ...])
    host_labels: tuple[str, ...] = ("Hostname", "hostname")
    # credentials (gpucon.config.credentials): basic auth (username + password) or a bearer
    # token, each from a file (mode 0600 or stricter) or an environment variable; TLS files
    username: str | None = None
    password_file: str | None = None
    password_env: str | None = None
    token_file: str | None = None
    token_env: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False


class NvmlConfig(msgspec.Struct, frozen=True, gc=False):
    """Reading this host's GPUs through NVML (``[fleets.NAME.nvml]``)."""

    host: str = ""  # the name this host has in slot ids; "" = socket.gethostname()
    cadence_s: float = 1.0
    slow_cadence_s: float = 10.0
    timeout_s: float = 2.0
    # how a re-slice creates and destroys MIG instances: "nvml", "nvidia-smi" or
    # "kubernetes" (the node's nvidia.com/mig.config label, applied by mig-manager)
    mig_executor: str = "nvml"


class LibvirtConfig(msgspec.Struct, frozen=True, gc=False):
    """Reading KVM guests through libvirt (``[fleets.NAME.libvirt]``)."""

    uri: str = "qemu:///system"
    cadence_s: float = 5.0
    timeout_s: float = 4.0


class KubeConfig(msgspec.Struct, frozen=True, gc=False):
    """Reading nodes and pods from Kubernetes (``[fleets.NAME.kube]``)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None  # None: all namespaces
    timeout_s: float = 5.0


class ReadinessConfig(msgspec.Struct, frozen=True, gc=False):
    """Asking each backend ``GET {url}{path}`` (``[fleets.NAME.readiness]``); on by default
    for a fleet with a registry (Redis or Kubernetes), off with ``enabled = false``."""

    enabled: bool = True
    # half a console tick: a backend that stops answering is shown within two ticks
    cadence_s: float = 0.5
    # the whole read's deadline and each request's timeout
    timeout_s: float = 0.5
    request_timeout_s: float = 0.4
    concurrency: int = 16
    path: str = "/v2/health/ready"
    # a scheduler's ``ready_at`` in the registry older than this does not vouch for a backend
    registry_max_age_s: float = 5.0


class ProbeTarget(msgspec.Struct, frozen=True, gc=False):
    """An endpoint the load probe may send requests to, and its limits."""

    name: str
    url: str
    model: str
    max_requests: int = 200
    max_rate_per_s: float = 20.0
    max_concurrency: int = 8
    max_duration_s: float = 60.0


class FleetConfig(msgspec.Struct, frozen=True, gc=False):
    """One named fleet: which sources to read and how."""

    name: str = "default"
    redis: RedisConfig | None = None
    prometheus: PrometheusConfig | None = None
    nvml: NvmlConfig | None = None
    libvirt: LibvirtConfig | None = None
    kube: KubeConfig | None = None
    readiness: ReadinessConfig | None = None
    probe_targets: tuple[ProbeTarget, ...] = ()
    # the MPS control daemons gpucon may restart (gpucon.config.mps)
    mps: tuple[MpsDaemonConfig, ...] = ()

    def sources_named(self) -> tuple[str, ...]:
        """The sources this fleet configures, in merge-priority order."""
        order = ("nvml", "libvirt", "prometheus", "redis", "kube")
        return tuple(name for name in order if getattr(self, name) is not None)


def readiness_of(fleet: FleetConfig) -> ReadinessConfig | None:
    """The readiness checks a fleet runs: its table, else the defaults when it has a registry
    (Redis or Kubernetes) that names backends; None when off."""
    if fleet.readiness is not None:
        return fleet.readiness if fleet.readiness.enabled else None
    return ReadinessConfig() if fleet.redis is not None or fleet.kube is not None else None


class UiConfig(msgspec.Struct, frozen=True, gc=False):
    """How the console looks and answers keys (``[ui]``)."""

    refresh_s: float = 1.0
    theme: str = "gpucon-dark"
    # binding id -> key(s), e.g. {"filter": "/", "drain": "d"}
    keys: dict[str, str] = msgspec.field(default_factory=dict)


# seconds between a recording's keyframes by default: two minutes. At 512 GPUs a keyframe costs
# ~15 ms of CPU (~1 % of the console's at one a minute, half that at this); a seek decodes
# one keyframe and at most this many seconds of deltas: 27/42/70 ms (min/median/max) in a
# 1-hour 512-GPU recording, against 22/27/40 at a minute (benchmarks/RESULTS.md, tenth round)
KEYFRAME_S = 120.0


class RecordConfig(msgspec.Struct, frozen=True, gc=False):
    """Recordings (``[record]``): ``gpucon live --record``, ``gpucon record``."""

    # a keyframe (the whole fleet) this often; deltas in between. Seeking decodes one
    # keyframe and at most this many seconds of deltas (``KEYFRAME_S``, docs/recording.md)
    keyframe_s: float = KEYFRAME_S
    # the file is kept under this size and drops frames older than this, oldest first
    max_mib: float = 1024.0
    max_age_h: float = 168.0


# the tables' kind of record, ``origins`` left out of equality (which values came from where
# says nothing about what the config is); a dataclass took ~0.5 ms of every start to define
class GpuconConfig(msgspec.Struct, frozen=True):
    """The effective config: fleets, alerts, SLOs, UI, audit, and where each value came from."""

    path: Path | None = None
    fleets: dict[str, FleetConfig] = msgspec.field(
        default_factory=lambda: {"default": FleetConfig()}
    )
    default_fleet: str = "default"
    alerts: AlertThresholds = msgspec.field(default_factory=AlertThresholds)
    slo_p95_ms: dict[str, float] = msgspec.field(default_factory=dict)  # model -> p95 SLO in ms
    ui: UiConfig = msgspec.field(default_factory=UiConfig)
    record: RecordConfig = msgspec.field(default_factory=RecordConfig)
    audit_path: Path | None = None  # None: $XDG_STATE_HOME/gpucon/audit.jsonl
    operator: str | None = None  # None: user@host
    read_only: bool = False
    # key path ("fleets.prod.redis.url") -> "file", "env GPUCON_REDIS_URL", "--fleet", ...
    origins: Mapping[str, str] = msgspec.field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            getattr(self, name) == getattr(other, name)
            for name in self.__struct_fields__
            if name != "origins"
        )

    @property
    def fleet(self) -> FleetConfig:
        return self.fleets[self.default_fleet]

    def origin(self, key_path: str) -> str:
        return self.origins.get(key_path, "default")


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpucon" / "config.toml"


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpucon"


MINIMAL_EXAMPLE = """\
[fleets.local.redis]
url = "redis://127.0.0.1:6379/0"
streams = ["gen:queue"]
group = "g1"

[fleets.local.prometheus]
url = "http://127.0.0.1:9090"

[fleets.local.nvml]
"""


def missing_config_message(path: Path) -> str:
    return (
        f"no gpucon config at {path}.\n"
        f"Write one there (or pass --config PATH, or set GPUCON_CONFIG), for example:\n\n"
        f"{MINIMAL_EXAMPLE}\n"
        f"examples/config.toml in the source tree covers every source and setting.\n"
        f"To look around without any setup, run: gpucon demo"
    )


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] = os.environ,
    *,
    fleet: str | None = None,
) -> GpuconConfig:
    """Read, validate and override the config; ``fleet`` (``--fleet``) picks the fleet.

    ``path`` None: ``$GPUCON_CONFIG``, else ``$XDG_CONFIG_HOME/gpucon/config.toml``. With no
    file, environment variables that name a source (GPUCON_REDIS_URL, ...) are enough;
    otherwise ConfigMissing is raised.
    """
    from gpucon.config.env import apply_env, env_names_a_source

    if path is None:
        path = Path(env["GPUCON_CONFIG"]) if env.get("GPUCON_CONFIG") else default_config_path(env)
    path = path.expanduser()
    if path.is_file():
        import tomllib  # only a config file needs it (the demo runs without one)

        from gpucon.config.schema import parse_document

        try:
            with path.open("rb") as fh:
                document: dict[str, Any] = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: expected UTF-8 text, got byte 0x{exc.object[exc.start]:02x} "
                f"at offset {exc.start}"
            ) from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
        config = parse_document(document, path)
    elif path.exists():
        raise ConfigError(f"{path}: expected a file, found something else (a directory?)")
    elif env_names_a_source(env):
        config = GpuconConfig(path=None, fleets={"default": FleetConfig()}, origins={})
    else:
        raise ConfigMissing(path)
    config = apply_env(config, env)
    if fleet is not None:
        origins = dict(config.origins)
        origins["fleet"] = "--fleet"
        config = msgspec.structs.replace(config, default_fleet=fleet, origins=origins)
    if config.default_fleet not in config.fleets:
        known = ", ".join(sorted(config.fleets)) or "none"
        where = config.origin("fleet")
        raise ConfigError(
            f"{config.path or '(no file)'}: fleet: expected one of the configured fleets "
            f"({known}), got {config.default_fleet!r} (from {where})"
        )
    return config
