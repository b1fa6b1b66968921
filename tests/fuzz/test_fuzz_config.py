"""The config parser under fuzzing: mutated copies of examples/config.toml and generated
documents are either refused with a ConfigError or give a config that works where it is used."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from gpucon.config import ConfigError, GpuconConfig, ProbeTarget, load_config
from gpucon.config.keys import DEFAULT_KEYS
from gpucon.config.schema import SOURCE_TABLES, parse_document
from gpucon.model.alerts import AlertThresholds
from tests.fuzz.invariants import check_config
from tests.fuzz.strategies import edge_floats, hostile_text, mutated_bytes, toml_value

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.toml"
EXAMPLE_BYTES = EXAMPLE.read_bytes()


def load_or_refuse(path: Path) -> GpuconConfig | None:
    try:
        return load_config(path, env={})
    except ConfigError as exc:
        assert str(exc).startswith(str(path)), str(exc)
        assert "\x1b" not in str(exc)
        return None


@given(mutated_bytes(EXAMPLE_BYTES))
def test_a_mutated_example_config_is_refused_by_name_or_works(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.toml"
        path.write_bytes(data)
        config = load_or_refuse(path)
        event("refused" if config is None else "accepted")
        if config is not None:
            check_config(config)


def _fields_of(cls: type) -> list[str]:
    import dataclasses

    struct_fields: tuple[str, ...] | None = getattr(cls, "__struct_fields__", None)
    if struct_fields is not None:  # a msgspec Struct (the alert thresholds)
        return list(struct_fields)
    return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]


def _typical(name: str) -> st.SearchStrategy[Any]:
    """Values a field of that name usually holds, and values just past them."""
    if name.endswith(("_s", "_ms", "_pct", "_mib")) or name.startswith("max_"):
        return edge_floats | st.integers(min_value=-5, max_value=10**20)
    if name == "url":
        return st.sampled_from(
            ["redis://127.0.0.1:6379/0", "http://127.0.0.1:9090", "unix:///tmp/r.sock",
             "redis://h:99999/0", "http://[::1", "rediss://", "http://h:0"]
        ) | hostile_text  # fmt: skip
    if name == "rate_window":
        windows = ["1m", "30s", "1h30m", "500ms", "0s", "1", "m", "5 m"]
        return st.sampled_from(windows) | hostile_text
    return toml_value


def table_for(cls: type) -> st.SearchStrategy[dict[str, Any]]:
    names = _fields_of(cls)
    return st.dictionaries(
        st.sampled_from(names) | hostile_text,
        st.deferred(lambda: st.one_of(toml_value)),
        max_size=2,
    ).flatmap(
        lambda junk: st.fixed_dictionaries({}, optional={n: _typical(n) for n in names}).map(
            lambda good: {**good, **junk} if len(junk) < 2 else good
        )
    )


source_tables: dict[str, st.SearchStrategy[Any]] = {
    name: table_for(cls) for name, cls in SOURCE_TABLES.items()
}
fleet_table = st.fixed_dictionaries(
    {},
    optional={
        **source_tables,
        "probe_targets": st.lists(table_for(ProbeTarget), max_size=2),
    },
)
keys_table = st.dictionaries(
    st.sampled_from(sorted(DEFAULT_KEYS)) | hostile_text,
    st.sampled_from(["q", "d", "ctrl+p", "slash", "/", "?", "x", "escape", "up,k", ""])
    | hostile_text,
    max_size=3,
)
documents = st.fixed_dictionaries(
    {"fleets": st.dictionaries(st.sampled_from(["prod", "lab"]) | hostile_text, fleet_table,
                               max_size=2)},
    optional={
        "fleet": st.sampled_from(["prod", "lab"]) | hostile_text,
        "operator": hostile_text,
        "read_only": st.booleans() | toml_value,
        "ui": st.fixed_dictionaries(
            {}, optional={"refresh_s": _typical("refresh_s"), "theme": hostile_text}
        ),
        "keys": keys_table,
        "slo": st.dictionaries(hostile_text, edge_floats | toml_value, max_size=2),
        "alerts": table_for(AlertThresholds),
        "audit_path": hostile_text,
    },
)  # fmt: skip


@given(documents)
def test_a_generated_config_document_is_refused_by_name_or_works(document: dict[str, Any]) -> None:
    try:
        config = parse_document(document, Path("fuzz.toml"))
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.toml: "), str(exc)
        assert "\x1b" not in str(exc) and len(str(exc)) < 1_000
        event("refused")
        return
    event("accepted")
    if config.default_fleet in config.fleets:
        check_config(config)
