"""The config checker resolves only the field types a table sets (``checks.field_type``): each
must be the type ``typing.get_type_hints`` gives, and each field's required flag msgspec's."""

from __future__ import annotations

import typing

import msgspec
import pytest

from gpucon.config import (
    FleetConfig,
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
from gpucon.config.checks import _fields, field_type
from gpucon.config.mps import MpsDaemonConfig, MpsServerConfig
from gpucon.model.alert_base import AlertThresholds

TABLES = (
    *(RedisConfig, PrometheusConfig, NvmlConfig, LibvirtConfig, KubeConfig, ReadinessConfig),
    *(ProbeTarget, FleetConfig, UiConfig, RecordConfig, MpsServerConfig, MpsDaemonConfig),
    AlertThresholds,
)


@pytest.mark.parametrize("cls", TABLES, ids=lambda c: c.__name__)
def test_each_field_type_is_the_one_typing_resolves(cls: type) -> None:
    hints = typing.get_type_hints(cls)
    for name, _ in _fields(cls):
        resolved = field_type(cls, name)
        assert resolved == hints[name], (cls.__name__, name)
        assert type(resolved) is type(hints[name])


@pytest.mark.parametrize("cls", TABLES, ids=lambda c: c.__name__)
def test_required_fields_are_msgspecs(cls: type) -> None:
    expected = [(f.name, f.required) for f in msgspec.structs.fields(cls)]  # type: ignore[arg-type]
    assert _fields(cls) == expected


def test_an_unknown_field_is_named() -> None:
    with pytest.raises(TypeError, match="no field 'nope'"):
        field_type(NvmlConfig, "nope")
