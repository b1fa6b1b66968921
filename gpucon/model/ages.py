"""The one way gpucon writes how long ago something was (a leaf: the widgets import it without
the model's records)."""

from __future__ import annotations


def fmt_elapsed(seconds: float) -> str:
    """How long ago, the one way gpucon writes it everywhere (an alert's start and text, a
    source's age in the status bar, a stale cell's ``·15s``, an XID's, a pending MIG
    change's): ``<2s`` (fresh), whole seconds below 10 s (``5s``), then 5 s steps (``15s``),
    whole minutes, hours, days (floored). So the status bar's ``DOWN 5s`` and the alert's
    ``5s`` are one outage; past 10 s the text changes every 5 s at most, so a steady screen
    is not rewritten each second for a digit nobody acts on."""
    if seconds < 2:
        return "<2s"
    if seconds < 10:
        return f"{int(seconds)}s"
    if seconds < 60:
        return f"{int(seconds // 5) * 5}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 172_800:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86_400)}d"
