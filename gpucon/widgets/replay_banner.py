"""The replay banner: the recorded time, where it is in the recording, paused or playing, speed.

Docked at the top of whichever screen is up in ``gpucon replay`` (the app mounts one on each
screen), so the recorded time is always visible: a replay must never pass for the live fleet.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from gpucon.recording.replay import Timeline


def clock_text(t: float) -> str:
    """A recorded time as people read it: local date and time with the zone."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t))


def _offset(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def banner_text(timeline: Timeline, keys: str = "") -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(" REPLAY ", style="reverse bold")
    text.append(" ")
    if timeline.position is None:
        text.append("an empty recording", style="bold")
        return text
    text.append(clock_text(timeline.position), style="bold")
    state = "⏸ paused" if timeline.paused else f"▶ ×{timeline.speed:g}"
    text.append(f"  {state}  ", style="bold")
    if timeline.start is not None and timeline.end is not None:
        text.append(
            f"{_offset(timeline.position - timeline.start)} / "
            f"{_offset(timeline.end - timeline.start)}",
            style="dim",
        )
    if keys:
        text.append(f"  {keys}", style="dim")
    return text


class ReplayBanner(Static):
    """One line at the top of the screen: the replay's recorded time and state."""

    DEFAULT_CSS = """
    ReplayBanner {
        dock: top;
        height: 1;
        width: 100%;
    }
    """

    def show_timeline(self, timeline: Timeline, keys: str = "") -> None:
        self.update(banner_text(timeline, keys))
