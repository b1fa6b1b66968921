"""Hypothesis profiles for the fuzzing suite: ``ci`` (the default) keeps the whole run inside
about a minute of CI time; ``long`` (``HYPOTHESIS_PROFILE=long``) runs many more cases on
demand. No example database: a CI run starts clean and a failure prints its own reproducer."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # the machine is shared: a slow example is not a bug
    "database": None,
    "suppress_health_check": (HealthCheck.too_slow, HealthCheck.filter_too_much),
    "print_blob": True,
}
settings.register_profile("ci", max_examples=300, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("long", max_examples=5_000, **_COMMON)  # type: ignore[arg-type]
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
