"""Environment overrides and theme files under fuzzing: any GPUCON_* values, any theme
document (generated, or a bundled theme mutated) is refused by name or works."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from gpucon.config import ConfigError, FleetConfig, GpuconConfig, RedisConfig
from gpucon.config.env import apply_env
from gpucon.themes import THEMES, ThemeError, load_theme_file
from tests.fuzz.invariants import check_config
from tests.fuzz.strategies import hostile_text, mutated_bytes, number_text

VARIABLES = (
    *("GPUCON_FLEET", "GPUCON_READ_ONLY", "GPUCON_OPERATOR", "GPUCON_AUDIT_PATH"),
    *("GPUCON_THEME", "GPUCON_REFRESH_S", "GPUCON_REDIS_URL", "GPUCON_REDIS_STREAMS"),
    *("GPUCON_PROMETHEUS_URL", "GPUCON_LIBVIRT_URI", "GPUCON_KUBE_CONTEXT"),
)
env_value = st.one_of(
    hostile_text,
    number_text,
    st.sampled_from(["1", "no", "default", "redis://127.0.0.1:1/0", "http://h:9090", "a,b"]),
    st.sampled_from(["qemu:///system", "redis://h:99999999/0", "http://[::1"]),
).filter(lambda v: "\x00" not in v)  # no environment can hold a NUL


@given(st.dictionaries(st.sampled_from(VARIABLES), env_value, max_size=6))
def test_any_environment_is_refused_by_name_or_works(env: dict[str, str]) -> None:
    base = GpuconConfig(fleets={"default": FleetConfig(redis=RedisConfig())})
    try:
        config = apply_env(base, env)
    except ConfigError as exc:
        assert str(exc).startswith("environment GPUCON_"), str(exc)
        assert "\x1b" not in str(exc) and len(str(exc)) < 1_000
        event("refused")
        return
    event("accepted")
    if config.default_fleet in config.fleets:
        check_config(config)


def toml_text(value: Any) -> str:
    """A TOML value for a scalar (JSON's string and number syntax is TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return json.dumps(value)


def theme_toml(data: dict[str, Any]) -> str:
    lines = [f"{json.dumps(k)} = {toml_text(v)}" for k, v in data.items() if k != "variables"]
    variables = data.get("variables")
    if isinstance(variables, dict):
        lines.append("[variables]")
        lines += [f"{json.dumps(k)} = {toml_text(v)}" for k, v in variables.items()]
    return "\n".join(lines) + "\n"


colour = st.one_of(
    st.sampled_from(["#4aa8ff", "#fff", "red", "rgb(1,2,3)", "hsl(20,50%,50%)", "ansi_red"]),
    st.sampled_from(["#12345", "zzz", "", "#4aa8ff 50%", "bold", "rgb(999,0,0)", "$primary"]),
    hostile_text,
    st.integers(-5, 300),
    st.floats(),
    st.booleans(),
)
theme_documents = st.fixed_dictionaries(
    {"name": st.just("fuzzed") | hostile_text | st.integers(), "primary": colour},
    optional={
        **{k: colour for k in ("secondary", "accent", "warning", "error", "background")},
        "dark": st.booleans() | colour,
        "luminosity_spread": st.floats() | colour,
        "variables": st.dictionaries(
            st.sampled_from(["util-hot", "latency-breach", "stale", "ok", "footer-foreground"])
            | hostile_text,
            colour,
            max_size=4,
        ),
        "unknown": colour,
    },
)


def load_or_refuse(text: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "theme.toml"
        path.write_bytes(text)
        try:
            theme = load_theme_file(path)
        except ThemeError as exc:
            assert str(exc).startswith(f"theme file {path}"), str(exc)
            event("refused")
            return
        event("accepted")
        theme.to_color_system().generate()


@given(theme_documents)
def test_a_generated_theme_file_is_refused_by_name_or_works(data: dict[str, Any]) -> None:
    load_or_refuse(theme_toml(data).encode("utf-8", "surrogatepass"))


BUNDLED = theme_toml(
    {
        "name": "copy",
        **{
            k: getattr(THEMES["gpucon-dark"], k)
            for k in ("primary", "secondary", "accent", "warning", "error", "background")
        },
        "variables": dict(THEMES["gpucon-dark"].variables),
    }
).encode()


@given(mutated_bytes(BUNDLED))
def test_a_mutated_bundled_theme_is_refused_by_name_or_works(data: bytes) -> None:
    load_or_refuse(data)
