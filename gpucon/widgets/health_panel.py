"""The fleet screen's GPU and node panel: each GPU's temperature, power against its limit,
utilisation, last XID and clock slowdowns; each Kubernetes node's MIG config, its state and
whether it is cordoned. Troubled GPUs and nodes come first; only what fits is built. With no
GPU and no node to show, the panel is one line that says so (class ``-empty``).
"""

from __future__ import annotations

from typing import TypeVar

from rich.text import Text

from gpucon.model.snapshot import Snapshot
from gpucon.widgets.health_text import gpu_line, node_line
from gpucon.widgets.text_panel import TextPanel
from gpucon.widgets.tick_prep import gpus_worst_first

GPU_HEADER = f"{'GPU':<18} {'TEMP':>5} {'POWER':>9} {'UTIL':>4} XID"
NODE_HEADER = f"{'NODE':<18} {'MIG CONFIG':<15}{'STATE':<13} SCHED"
_NODE_TROUBLE = {"failed": 0, "pending": 1}
NO_GPU_SOURCE = "GPUs: no GPU source reports any (NVML, DCGM or libvirt)"
T = TypeVar("T")


def _fit(items: list[T], lines: int) -> tuple[list[T], int]:
    """The items that fit ``lines`` lines, keeping one for "… and N more" when some don't."""
    if len(items) <= lines:
        return items, 0
    keep = max(0, lines - 1)
    return items[:keep], len(items) - keep


class HealthPanel(TextPanel):
    """GPUs (worst first) and, when Kubernetes reports them, nodes (troubled first)."""

    snapshot: Snapshot | None = None

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        styles = {
            "crit": self.theme_style("latency-breach"),
            "warn": self.theme_style("util-hot"),
        }
        now = snapshot.taken_at
        # nothing to show (a lab, a fleet read only through Triton and Redis): one line, not an
        # empty panel's worth of rows
        empty = not snapshot.gpus and not snapshot.nodes
        self.set_class(empty, "-empty")
        if empty:
            self.show_text(Text(NO_GPU_SOURCE, style="dim", no_wrap=True, overflow="ellipsis"))
            return
        room = max(2, (self.size.height or 8))
        nodes = sorted(
            snapshot.nodes.values(),
            key=lambda n: (
                _NODE_TROUBLE.get(n.mig_config_state or "", 2),
                not n.unschedulable,
                n.name,
            ),
        )
        # nodes get up to half the room when there are any (a header and at least one line)
        node_room = 0 if not nodes else min(len(nodes) + 1, max(2, room // 2))
        gpu_room = room - node_room
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(GPU_HEADER + "\n", style="bold")
        gpus = gpus_worst_first(snapshot.gpus)
        if not gpus:  # nodes, but no GPU source
            text.append("no GPUs reported\n", style="dim")
        shown, hidden = _fit(gpus, gpu_room - 1)
        for gpu in shown:
            text.append_text(gpu_line(gpu, now, styles))
            text.append("\n")
        if hidden:
            text.append(f"… and {hidden} more GPUs\n", style="dim")
        if nodes:
            text.append(NODE_HEADER + "\n", style="bold")
            listed, unlisted = _fit(nodes, node_room - 1)
            for node in listed:
                since = snapshot.mig_pending_since.get(node.name)
                unseen = node.name in snapshot.mig_pending_unseen
                text.append_text(node_line(node, since, now, styles, unseen=unseen))
                text.append("\n")
            if unlisted:
                text.append(f"… and {unlisted} more nodes", style="dim")
        text.rstrip()
        self.show_text(text)

    def on_resize(self) -> None:
        if self.snapshot is not None:
            self.show_snapshot(self.snapshot)
