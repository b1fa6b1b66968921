"""How GPU health and Kubernetes node state read on screen, as short strings and Text lines.

Pure (no widget state): the GPU panel, the slot detail and ``gpucon snapshot`` all use these,
so the three say the same thing the same way. A value no source reports is "n/a"; an XID
that is watched but never seen is "none"; one nobody watches is "n/a".
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from gpucon.model.fleet import Gpu, NodeInfo
from gpucon.model.xid import xid_meaning
from gpucon.widgets import fmt
from gpucon.widgets.safe_text import safe

POWER_HIGH_PCT = 98.0
HOT_C = 85.0


def gpu_label(gpu: Gpu) -> str:
    return f"{gpu.host}/gpu{gpu.index}"


def temperature(gpu: Gpu) -> str:
    return fmt.NA if gpu.temperature_c is None else f"{gpu.temperature_c:.0f}°C"


def power(gpu: Gpu) -> str:
    """``690/700W``: drawn over the enforced limit (``312W`` when the limit is unknown)."""
    if gpu.power_w is None:
        return fmt.NA
    if gpu.power_limit_w is None:
        return f"{gpu.power_w:.0f}W"
    return f"{gpu.power_w:.0f}/{gpu.power_limit_w:.0f}W"


def xid(gpu: Gpu, now: float, long: bool = False) -> str:
    """``79 3m`` (code, how long ago), ``none`` when watched and none seen, else ``n/a``."""
    if gpu.xid_last:
        ago = "" if gpu.xid_at is None else f" {fmt.since(max(0.0, now - gpu.xid_at))}"
        if not long:
            return f"{gpu.xid_last}{ago}"
        meaning = xid_meaning(gpu.xid_last)
        when = f", {ago.strip()} ago" if ago else ""
        return f"XID {gpu.xid_last}{f' ({meaning})' if meaning else ''}{when}"
    return "none" if gpu.xid_watched or gpu.xid_last == 0 else fmt.NA


def clock_flags(gpu: Gpu) -> list[str]:
    """Why the clocks are held down: ``THERM`` (thermal slowdown), ``PCAP`` (power cap)."""
    flags = []
    if gpu.thermal_slowdown:
        flags.append("THERM")
    if gpu.power_capped:
        flags.append("PCAP")
    return flags


def clocks(gpu: Gpu) -> str:
    if gpu.thermal_slowdown is None and gpu.power_capped is None:
        return fmt.NA
    held = [
        what
        for what, on in (
            ("thermal slowdown", gpu.thermal_slowdown),
            ("power cap", gpu.power_capped),
        )
        if on
    ]
    return "held down by " + " and ".join(held) if held else "not held down"


def gpu_trouble(gpu: Gpu) -> int:
    """How much a GPU needs looking at (sort key: worst first)."""
    score = 0
    if gpu.xid_last:
        score += 4
    if gpu.thermal_slowdown:
        score += 2
    pct = gpu.power_pct
    if gpu.power_capped or (pct is not None and pct >= POWER_HIGH_PCT):
        score += 1
    return score


def gpu_line(gpu: Gpu, now: float, styles: Mapping[str, str], name_width: int = 18) -> Text:
    """``host/gpu0      61°C  312/400W  55% none``, then THERM / PCAP flags."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append_text(safe(gpu_label(gpu), name_width))
    line.pad_right(name_width - line.cell_len)
    hot = gpu.temperature_c is not None and gpu.temperature_c >= HOT_C
    line.append(f" {temperature(gpu):>5}", styles["warn"] if hot else "")
    pct = gpu.power_pct
    at_limit = gpu.power_capped or (pct is not None and pct >= POWER_HIGH_PCT)
    line.append(f" {power(gpu):>9}", styles["warn"] if at_limit else "")
    line.append(f" {fmt.pct(gpu.util_pct):>4}")
    shown = xid(gpu, now)
    line.append(f" {shown:<7}", styles["crit"] if gpu.xid_last else "dim")
    for flag in clock_flags(gpu):
        line.append(f" {flag}", styles["warn"])
    return line


def node_state(
    node: NodeInfo, pending_since: float | None, now: float, unseen: bool = False
) -> str:
    """``success``, ``pending 5m`` (since this console saw it become pending), ``pending
    ≥5m`` (``unseen``: pending already at this console's first look, so at least that long;
    plain ``pending`` under 2 s), ``failed`` or n/a."""
    state = node.mig_config_state
    if not state:
        return fmt.NA
    if state == "pending" and pending_since is not None:
        elapsed = max(0.0, now - pending_since)
        if not unseen:
            return f"pending {fmt.since(elapsed)}"
        return "pending" if elapsed < 2 else f"pending ≥{fmt.since(elapsed)}"
    return state


def node_line(
    node: NodeInfo,
    pending_since: float | None,
    now: float,
    styles: Mapping[str, str],
    name_width: int = 18,
    unseen: bool = False,
) -> Text:
    """``node-a  all-1g.10gb  success  sched`` (or ``CORDONED``); ``unseen``: as
    ``node_state``."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append_text(safe(node.name, name_width))
    line.pad_right(name_width - line.cell_len)
    line.append(" ")
    config = safe(node.mig_config or fmt.NA, 14, "" if node.mig_config else "dim")
    line.append_text(config)
    line.pad_right(name_width + 16 - line.cell_len)
    state = node_state(node, pending_since, now, unseen)
    style = {"failed": styles["crit"], "pending": styles["warn"], "success": ""}.get(
        node.mig_config_state or "", "dim"
    )
    line.append_text(safe(state, 12, style))
    line.pad_right(name_width + 29 - line.cell_len)
    if node.unschedulable:
        line.append(" CORDONED", styles["warn"])
    else:
        line.append(" sched", "dim")
    return line
