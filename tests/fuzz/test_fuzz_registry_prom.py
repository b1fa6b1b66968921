"""The registry hash parser and the Prometheus parsers under fuzzing: any field values, any
sample dicts give values and problems, never an exception, and never a number a later read
cannot use (NaN, infinity, a time beyond any calendar)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from gpucon.errors import format_ts
from gpucon.registry.heartbeat import parse_heartbeats
from gpucon.registry.parse import parse_backend, parse_ready, parse_record
from gpucon.registry.read import live_fields
from gpucon.sources.problems import Problems
from gpucon.sources.prom_parse import parse_dcgm
from gpucon.sources.prom_triton import parse_triton
from gpucon.sources.prom_up import parse_up
from gpucon.sources.promql import DEFAULT_QUERIES
from tests.fuzz.strategies import hostile_text, number_text

REGISTRY_FIELDS = (
    *("state", "weight", "inflight", "ready", "ready_at", "slot", "url", "model"),
    *("owner", "reason", "pod", "node", "weight_before_drain"),
)
field_text = st.one_of(
    number_text,
    st.sampled_from(["active", "draining", "drained", "down", "1", "0", "true", "h/gpu0/gi1"]),
    st.sampled_from(["vm:x", "h/gpu", "/gpu0", "h/gpu0/gi", "h/gpu99999999999999999999"]),
    st.integers(min_value=4_000, max_value=6_000).map(lambda n: "9" * n),
)
registry_hash = st.dictionaries(st.sampled_from(REGISTRY_FIELDS) | hostile_text, field_text)


def check_number(value: float | None, *, minimum: float = 0.0) -> None:
    assert value is None or (math.isfinite(value) and value >= minimum), value


@given(hostile_text, registry_hash)
def test_any_registry_hash_reads_as_a_backend_and_problems(
    name: str, fields: dict[str, str]
) -> None:
    backend, problems = parse_backend(name, fields)
    record, record_problems = parse_record(name, fields)
    event("with problems" if problems else "clean")
    assert backend.name == name and record.backend == backend
    assert all(isinstance(p, str) for p in (*problems, *record_problems))
    check_number(backend.weight)
    check_number(record.weight_before_drain)
    check_number(backend.ready_at)
    if backend.ready_at is not None:
        format_ts(backend.ready_at)  # a time the audit and the detail can print
    assert backend.inflight is None or backend.inflight >= 0


json_value: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | hostile_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=8,
)


@given(st.one_of(hostile_text, st.none(), json_value.map(json.dumps)))
def test_any_ready_document_reads(raw: str | None) -> None:
    verdicts, problems = parse_ready(raw)
    for name, entry in verdicts.items():
        backend, _ = parse_backend(name, {"state": "active", **live_fields(None, entry)})
        check_number(backend.ready_at)
        check_number(backend.ready_since)
    assert all(isinstance(p, str) for p in problems)


@given(st.dictionaries(hostile_text, st.one_of(hostile_text, json_value.map(json.dumps))))
def test_any_schedulers_hash_reads(raw: dict[str, str]) -> None:
    newest, problems = parse_heartbeats(raw)
    assert all(isinstance(p, str) for p in problems)
    if newest is not None:
        check_number(newest.at)
        assert math.isfinite(newest.every_s) and newest.every_s > 0
        assert newest.scheduler in raw
    assert parse_heartbeats({"s": '{"at": 1e400, "every_s": 1}'})[0] is None
    assert parse_heartbeats({"s": '{"at": ' + "9" * 400 + ', "every_s": 1}'})[0] is None


LABELS = (
    *("Hostname", "hostname", "gpu", "UUID", "GPU_I_ID", "GPU_I_PROFILE", "modelName"),
    *("__name__", "dcgm_field", "backend", "instance", "model", "version", "quantile"),
    *("reason", "job"),
)
label_value = st.one_of(
    st.sampled_from(["h1", "0", "1", "7", "GPU-1", "0.95", "0.5", "m", "10.0.0.1:8002", ""]),
    st.integers(min_value=0, max_value=3),  # a label that is not text
    number_text,
    json_value,
)
sample_number = st.one_of(
    number_text,
    st.integers(min_value=10**308, max_value=10**400),  # beyond any float
    json_value,
)
series = st.fixed_dictionaries(
    {},
    optional={
        "metric": st.dictionaries(st.sampled_from(LABELS) | hostile_text, label_value, max_size=6)
        | json_value,
        "value": st.one_of(
            st.tuples(st.floats() | st.integers(), sample_number).map(list),
            json_value,
        ),
    },
)
series_lists = st.lists(series | json_value, max_size=6)
families = st.sampled_from(sorted(DEFAULT_QUERIES)) | hostile_text


@given(st.dictionaries(families, series_lists, max_size=4))
def test_any_dcgm_result_parses_to_finite_values(results: dict[str, list[Any]]) -> None:
    problems = Problems()
    gpus, slots = parse_dcgm(results, problems)
    event("gpus" if gpus else "no gpu")
    for gpu in gpus:
        for f in ("util_pct", "mem_used_mib", "mem_total_mib", "temperature_c", "power_w"):
            value = getattr(gpu, f)
            assert value is None or math.isfinite(value), (f, value)
    for slot in slots:
        assert isinstance(slot.id, str)


@given(st.dictionaries(families, series_lists, max_size=4), st.none() | st.floats(0.1, 3600))
def test_any_triton_result_parses_to_finite_values(
    results: dict[str, list[Any]], window: float | None
) -> None:
    problems = Problems()
    stats = parse_triton(results, problems, window)
    event("stats" if stats else "no stats")
    for s in stats:
        for f in ("req_per_s", "p50_ms", "p95_ms", "p99_ms", "error_rate", "queue_ms"):
            value = getattr(s, f)
            assert value is None or math.isfinite(value), (f, value)


@given(series_lists)
def test_any_up_result_parses(series_list: list[Any]) -> None:
    problems = Problems()
    targets = parse_up(series_list, problems)
    event("targets" if targets else "no target")
    assert all(isinstance(t.instance, str) and t.instance for t in targets)
