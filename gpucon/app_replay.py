"""The replay's keys in the console (``gpucon replay``): play/pause, step, seek, next alert,
speed, and the banner that shows the recorded time on whichever screen is up.

``ReplayKeys`` is a part of ``gpucon.app.GpuconApp``: its bindings (``REPLAY_BINDINGS``, in
the app's own list) exist only when the app has a replay (``check_action``); in any other
console they are absent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.app import App
from textual.binding import Binding

if TYPE_CHECKING:
    from gpucon.recording.replay import Timeline

    _App = App[int]
else:  # a mixin of the app: App is its other base there
    _App = object


class ReplayControls(Protocol):
    """What the replay keys need of a replay feed (gpucon.recording.replay.ReplayFeed)."""

    @property
    def timeline(self) -> Timeline: ...

    def toggle_pause(self) -> None: ...

    def step(self, frames: int = 1) -> None: ...

    def seek_by(self, seconds: float) -> None: ...

    def next_alert(self, step: int = 1) -> None: ...

    def set_speed(self, speed: float) -> None: ...


REPLAY_BINDINGS = [
    Binding("space", "replay_pause", "Play/pause", id="replay_pause"),
    Binding("full_stop", "replay_step(1)", "Step", show=False, id="replay_step"),
    Binding("comma", "replay_step(-1)", "Step back", show=False, id="replay_step_back"),
    Binding("right_square_bracket", "replay_seek(10)", "+10s", id="replay_forward"),
    Binding("left_square_bracket", "replay_seek(-10)", "-10s", id="replay_back"),
    Binding("right_curly_bracket", "replay_seek(60)", "+1min", show=False, id="replay_forward_min"),
    Binding("left_curly_bracket", "replay_seek(-60)", "-1min", show=False, id="replay_back_min"),
    Binding("n", "replay_alert(1)", "Next alert", id="replay_next_alert"),
    Binding("N", "replay_alert(-1)", "Prev alert", show=False, id="replay_prev_alert"),
    Binding("x", "replay_speed", "Speed", id="replay_speed"),
]


class ReplayKeys(_App):
    """The replay key actions, and the banner's text of which key does what."""

    replay: ReplayControls | None
    keys: dict[str, str]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The replay keys exist only in a replay."""
        if action.startswith("replay_"):
            return self.replay is not None
        return True

    def show_timeline(self) -> None:
        """The banner on the screen that is up (mounted there on first need): recorded time."""
        if self.replay is None:
            return
        from gpucon.widgets.replay_banner import ReplayBanner

        screen = self.screen
        banners = screen.query(ReplayBanner)
        if banners:
            banner = banners.first()
        else:
            banner = ReplayBanner()
            screen.mount(banner)
        banner.show_timeline(self.replay.timeline, self._replay_keys())

    def _replay_keys(self) -> str:
        shown = [
            (("replay_pause",), "play/pause"),
            (("replay_step_back", "replay_step"), "step"),
            (("replay_back", "replay_forward"), "∓10s"),
            (("replay_back_min", "replay_forward_min"), "∓1min"),
            (("replay_prev_alert", "replay_next_alert"), "alert"),
            (("replay_speed",), "speed ×1/×10/×60"),
        ]
        keys = {b.id: b.key for b in self.BINDINGS if isinstance(b, Binding) and b.id}
        parts = []
        for ids, what in shown:
            labels = [_key_label(self.keys.get(i) or keys.get(i, "")) for i in ids]
            parts.append(f"{' '.join(labels)} {what}")
        return " · ".join(parts)

    def action_replay_pause(self) -> None:
        if self.replay is not None:
            self.replay.toggle_pause()

    def action_replay_step(self, frames: int) -> None:
        if self.replay is not None:
            self.replay.step(frames)

    def action_replay_seek(self, seconds: float) -> None:
        if self.replay is not None:
            self.replay.seek_by(seconds)

    def action_replay_alert(self, step: int) -> None:
        if self.replay is not None:
            self.replay.next_alert(step)

    def action_replay_speed(self) -> None:
        if self.replay is None:
            return
        from gpucon.recording.replay import SPEEDS

        speed = self.replay.timeline.speed
        later = [s for s in SPEEDS if s > speed]
        self.replay.set_speed(later[0] if later else SPEEDS[0])


_KEY_LABELS = {
    "space": "space",
    "full_stop": ".",
    "comma": ",",
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "right_curly_bracket": "}",
    "left_curly_bracket": "{",
}


def _key_label(key: str) -> str:
    return "/".join(_KEY_LABELS.get(k.strip(), k.strip()) for k in key.split(","))
