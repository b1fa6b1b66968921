"""What an accepted value must allow: the checks every fuzz test runs on what was not refused,
so that a value accepted once cannot break a read later (a 1e18 s timeout once passed the
schema and then made every read fail with OverflowError)."""

from __future__ import annotations

import dataclasses
import datetime
import math
import time

import msgspec

from gpucon.config import GpuconConfig
from gpucon.config.checks import number_range
from gpucon.config.keys import key_collisions


def check_seconds(seconds: float) -> None:
    """A duration a clock, a deadline and a socket timeout can all take."""
    assert math.isfinite(seconds) and seconds > 0, seconds
    datetime.datetime.fromtimestamp(time.time() + seconds, datetime.UTC)
    datetime.timedelta(seconds=seconds)
    assert time.monotonic() + seconds > time.monotonic()


def check_numbers(obj: object, where: str) -> None:
    """Every float field of record ``obj`` (a dataclass or a msgspec Struct) finite and within
    its field's stated range."""
    names = getattr(obj, "__struct_fields__", None) or [
        f.name
        for f in dataclasses.fields(obj)  # type: ignore[arg-type]
    ]
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, float):
            low, high, above = number_range(name)
            ok = (value > low if above else value >= low) and value <= high
            assert math.isfinite(value) and ok, f"{where}.{name} = {value!r}"
            if name.endswith("_s"):
                check_seconds(value)
        if isinstance(value, int) and not isinstance(value, bool):
            assert 0 < value <= 1_000_000, f"{where}.{name} = {value!r}"


def check_config(config: GpuconConfig) -> None:
    """An accepted config: numbers in range, sources that can be built, a printable check."""
    from gpucon.commands.config_check import describe_config
    from gpucon.session.sources import UnavailableSource, build_sources

    check_numbers(config.ui, "ui")
    check_numbers(config.alerts, "alerts")
    for model, ms in config.slo_p95_ms.items():
        assert math.isfinite(ms) and 0 < ms <= 3_600_000, (model, ms)
    assert key_collisions(config.ui.keys) == []
    for name, fleet in config.fleets.items():
        for source in ("redis", "prometheus", "nvml", "libvirt", "kube", "readiness"):
            table = getattr(fleet, source)
            if table is not None:
                check_numbers(table, f"fleets.{name}.{source}")
        for target in fleet.probe_targets:
            check_numbers(target, f"fleets.{name}.probe_targets")
        if fleet.redis is not None:
            import redis

            client = redis.Redis.from_url(
                fleet.redis.url,
                socket_timeout=fleet.redis.timeout_s,
                socket_connect_timeout=fleet.redis.timeout_s,
            )
            client.close()
        # the sources that build without IO (Redis, Prometheus, readiness) must build
        light = msgspec.structs.replace(fleet, nvml=None, libvirt=None, kube=None)
        for built in build_sources(light):
            assert not isinstance(built, UnavailableSource), built.reason
            check_seconds(built.timeout_s)
            built.close()
    assert describe_config(config)
