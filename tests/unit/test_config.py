"""Config: loading, strict validation with errors that name file and key, env overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.config import (
    ConfigError,
    ConfigMissing,
    GpuconConfig,
    KubeConfig,
    PrometheusConfig,
    RedisConfig,
    load_config,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None, **kw: str) -> GpuconConfig:
    return load_config(write(tmp_path, text), env or {}, **kw)


def error(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text, env)
    return str(info.value)


def test_example_config_covers_every_source() -> None:
    config = load_config(EXAMPLE, {})
    assert config.default_fleet == "prod"
    prod, vms = config.fleets["prod"], config.fleets["vms"]
    assert prod.redis is not None and prod.redis.streams == ("gen:queue", "gen:queue:llm")
    assert prod.prometheus is not None and "pending" in prod.prometheus.queries
    assert prod.nvml is not None and prod.kube is not None
    assert prod.readiness is not None and prod.readiness.concurrency == 16
    assert prod.kube.namespace == "inference"
    assert vms.libvirt is not None and vms.libvirt.uri == "qemu:///system"
    assert prod.probe_targets[0].name == "sdxl-a"
    assert config.slo_p95_ms == {"sdxl": 2500.0, "llama-8b": 800.0}
    assert config.ui.keys["drain"] == "d"
    assert config.alerts.queue_wait_ms == 20.0
    assert config.alerts.mem_full_warn_s == 1800.0 and config.alerts.mem_trend_rises == 3
    assert config.origin("alerts.noisy_min_r") == "file"
    assert config.audit_path is not None and "~" not in str(config.audit_path)
    assert config.origin("fleets.prod.redis.url") == "file"
    assert config.origin("fleets.prod.redis.cadence_s") == "file"
    assert config.origin("fleets.vms.redis.cadence_s") == "default"


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, "[fleets.lab.redis]\n")
    assert config.default_fleet == "lab"
    assert config.origin("fleet") == "first fleet in the file"
    assert config.fleet.redis == RedisConfig()
    assert config.fleet.prometheus is None


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("[fleets.p.redis]\nurl = 'http://x'\n", "fleets.p.redis.url", "redis:// or rediss://"),
        ("[fleets.p.redis]\nurl = 'redis://h:port'\n", "fleets.p.redis.url", "URL"),
        ("[fleets.p.redis]\ncadence_s = -1\n", "fleets.p.redis.cadence_s", "from 0.001 to"),
        ("[fleets.p.redis]\ncadence_s = 0\n", "fleets.p.redis.cadence_s", "from 0.001 to"),
        ("[fleets.p.redis]\ntimeout_s = '2'\n", "fleets.p.redis.timeout_s", "a number"),
        ("[fleets.p.redis]\nstreams = 'q'\n", "fleets.p.redis.streams", "array of strings"),
        ("[fleets.p.redis]\nstreams = [1]\n", "fleets.p.redis.streams[0]", "a string"),
        ("[fleets.p.redis]\nurl_typo = 'x'\n", "fleets.p.redis.url_typo", "known keys"),
        ("[fleets.p.prometheus]\nurl = 'ftp://x'\n", "fleets.p.prometheus.url", "http://"),
        ("[fleets.p.prometheus]\ntimeout_s = nan\n", "fleets.p.prometheus.timeout_s", "finite"),
        ("[fleets.p.prometheus.queries]\nbogus = 'up'\n", "fleets.p.prometheus.queries.bogus",
         "known metric family"),
        ("[fleets.p.libvirt]\nuri = 'system'\n", "fleets.p.libvirt.uri", "libvirt URI"),
        ("[fleets.p.nvml]\nslow_cadence_s = true\n", "fleets.p.nvml.slow_cadence_s", "a number"),
        ("[fleets.p.gpus]\n", "fleets.p.gpus", "known keys"),
        ("[fleets.p.redis]\n[[fleets.p.probe_targets]]\nname = 'a'\nurl = 'http://h:1'\n",
         "fleets.p.probe_targets[0].model", "a value"),
        ("[fleets.p.redis]\n[[fleets.p.probe_targets]]\nname='a'\nurl='http://h:1'\nmodel='m'\n"
         "max_requests = 1.5\n", "fleets.p.probe_targets[0].max_requests", "an integer"),
        ("[fleets.p.redis]\n[slo]\nsdxl = -5\n", "slo.sdxl", "greater than 0"),
        ("[fleets.p.redis]\n[alerts]\nhot_activity_pct = 'hot'\n", "alerts.hot_activity_pct",
         "a number"),
        ("[fleets.p.redis]\n[alerts]\nnope = 1\n", "alerts.nope", "known keys"),
        ("[fleets.p.redis]\n[alerts]\nnoisy_min_r = 1.5\n", "alerts.noisy_min_r", "at most 1"),
        ("[fleets.p.redis]\n[alerts]\nmem_trend_rises = 0\n", "alerts.mem_trend_rises",
         "greater than 0"),
        ("[fleets.p.redis]\n[alerts]\nmem_full_crit_s = 0\n", "alerts.mem_full_crit_s",
         "from 0.001 to 86,400"),
        ("[fleets.p.redis]\n[keys]\ndrain = 4\n", "keys.drain", "a string"),
        ("[fleets.p.redis]\n[ui]\nrefresh_s = -1\n", "ui.refresh_s", "from 0.05 to 86,400"),
        ("[fleets.p.redis]\n[ui]\nkeys = {}\n", "ui.keys", "known keys"),
        ("read_only = 'yes'\n[fleets.p.redis]\n", "read_only", "true or false"),
        ("colour = 'red'\n[fleets.p.redis]\n", "colour", "known keys"),
        ("fleets = 3\n", "fleets", "a table"),
        ("operator = 'x'\n", "fleets", "at least one"),
        ("[fleets.'bad name'.redis]\n", "fleets.bad name", "a name of letters"),
        ("[fleets.p.readiness]\npath = 'v2/ready'\n", "fleets.p.readiness.path", "starting with /"),
        ("[fleets.p.readiness]\nconcurrency = 0\n", "fleets.p.readiness.concurrency",
         "greater than 0"),
        ("[fleets.p.readiness]\nenabled = 1\n", "fleets.p.readiness.enabled", "true or false"),
    ],
)  # fmt: skip
def test_errors_name_file_key_and_expectation(
    tmp_path: Path, text: str, key: str, expected: str
) -> None:
    message = error(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'config.toml'}: {key}")
    assert expected in message


def test_unknown_fleet_is_refused(tmp_path: Path) -> None:
    message = error(tmp_path, "fleet = 'staging'\n[fleets.prod.redis]\n")
    assert "fleet: expected one of the configured fleets (prod), got 'staging'" in message


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    message = error(tmp_path, "[fleets.p.redis\n")
    assert message.startswith(str(tmp_path / "config.toml"))
    assert "not valid TOML" in message


def test_missing_config_says_how_to_write_one_and_offers_the_demo(tmp_path: Path) -> None:
    with pytest.raises(ConfigMissing) as info:
        load_config(None, {"XDG_CONFIG_HOME": str(tmp_path)})
    message = str(info.value)
    assert str(tmp_path / "gpucon" / "config.toml") in message
    assert "[fleets.local.redis]" in message
    assert "gpucon demo" in message


def test_xdg_and_gpucon_config_paths(tmp_path: Path) -> None:
    (tmp_path / "gpucon").mkdir()
    (tmp_path / "gpucon" / "config.toml").write_text("[fleets.xdg.redis]\n")
    assert load_config(None, {"XDG_CONFIG_HOME": str(tmp_path)}).default_fleet == "xdg"
    other = write(tmp_path, "[fleets.other.redis]\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "GPUCON_CONFIG": str(other)}
    assert load_config(None, env).default_fleet == "other"


def test_env_overrides_win_and_are_named(tmp_path: Path) -> None:
    text = "[fleets.a.redis]\n[fleets.b.nvml]\n"
    env = {
        "GPUCON_FLEET": "b",
        "GPUCON_REDIS_URL": "redis://10.1.1.1:6380/2",
        "GPUCON_REDIS_STREAMS": "q1, q2",
        "GPUCON_PROMETHEUS_URL": "http://prom:9090",
        "GPUCON_READ_ONLY": "yes",
        "GPUCON_REFRESH_S": "2.5",
        "GPUCON_OPERATOR": "bob",
        "GPUCON_KUBE_CONTEXT": "lab",
    }
    config = load(tmp_path, text, env)
    assert config.default_fleet == "b"
    fleet = config.fleet
    assert fleet.redis == RedisConfig(url="redis://10.1.1.1:6380/2", streams=("q1", "q2"))
    assert fleet.prometheus == PrometheusConfig(url="http://prom:9090")
    assert fleet.kube == KubeConfig(context="lab")
    assert fleet.nvml is not None
    assert config.fleets["a"].redis == RedisConfig()  # other fleets untouched
    assert (config.read_only, config.ui.refresh_s, config.operator) == (True, 2.5, "bob")
    assert config.origin("fleet") == "env GPUCON_FLEET"
    assert config.origin("fleets.b.redis.url") == "env GPUCON_REDIS_URL"


def test_cli_fleet_wins_over_env(tmp_path: Path) -> None:
    config = load(
        tmp_path, "[fleets.a.redis]\n[fleets.b.redis]\n", {"GPUCON_FLEET": "a"}, fleet="b"
    )
    assert (config.default_fleet, config.origin("fleet")) == ("b", "--fleet")


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("GPUCON_REDIS_URL", "localhost:6379", "redis:// or rediss://"),
        ("GPUCON_PROMETHEUS_URL", "prom:9090", "http://"),
        ("GPUCON_READ_ONLY", "maybe", "1/true/yes"),
        ("GPUCON_REFRESH_S", "fast", "a number of seconds"),
        ("GPUCON_REFRESH_S", "-1", "from 0.05 to 86,400"),
        ("GPUCON_LIBVIRT_URI", "system", "libvirt URI"),
    ],
)
def test_bad_env_values_name_the_variable(
    tmp_path: Path, variable: str, value: str, expected: str
) -> None:
    message = error(tmp_path, "[fleets.a.redis]\n", {variable: value})
    assert message.startswith(f"environment {variable}")
    assert expected in message


def test_env_alone_is_enough_without_a_file(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "GPUCON_REDIS_URL": "redis://127.0.0.1:1/0"}
    config = load_config(None, env)
    assert config.path is None
    assert config.fleet.redis is not None and config.fleet.redis.url == "redis://127.0.0.1:1/0"


def test_two_configs_are_equal_whatever_their_values_came_from(tmp_path: Path) -> None:
    """Equality compares what the config is, not where each value came from (``origins``)."""
    text = '[fleets.a.redis]\nurl = "redis://127.0.0.1:6379/0"\n'
    from_file = load(tmp_path, text)
    from_env = load(tmp_path, text, {"GPUCON_REFRESH_S": "1"})  # the default, said again
    assert from_file.origins != from_env.origins
    assert from_file == from_env
    assert from_file != load(tmp_path, text, {"GPUCON_REFRESH_S": "2"})
    assert from_file != "not a config"
