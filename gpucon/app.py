"""The gpucon App: wiring only. Snapshots in, screens out; the fleet screen runs the actions.

``GpuconApp`` is built the same way by the console command (``gpucon.commands.console``) and
by the tests: give it a feed (the Hub, or anything with ``latest``/``start``/``stop``). The hub
calls back from its own thread; each snapshot becomes one replaceable message, applied inside
``batch_update``.
In read-only and NOC modes ``controls`` is always None and no action binding is registered.
The fleet screen plans and applies actions through ``gpucon.screens.action_runner``.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from rich.text import Text
from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.screen import Screen

from gpucon.app_input import key_noticing
from gpucon.app_palette import fleet_commands
from gpucon.app_replay import REPLAY_BINDINGS, ReplayControls, ReplayKeys
from gpucon.messages import SnapshotArrived
from gpucon.model.snapshot import Snapshot
from gpucon.redact import redact
from gpucon.screens.fleet import ActionFleetScreen, FleetScreen
from gpucon.themes import CSS_PATH, NOC_CSS_PATH, THEMES, VARIABLE_DEFAULTS, resolve_theme

if TYPE_CHECKING:  # not imported for the first frame: the write side is built a second later
    from pathlib import Path

    from textual.timer import Timer

    from gpucon.config import GpuconConfig
    from gpucon.controls.base import Controls
    from gpucon.recording.status import RecordingStatus
    from gpucon.widgets.tick_prep import TickPrep

# how long the hub's thread holds its tick after a key (the key's answer is drawn well within)
KEY_HOLD_S = 0.15
# the longest a snapshot waits to be shown while keys are answered (a burst of typing)
SNAPSHOT_HOLD_S = 0.6
ACTIONS = ("drain", "undrain", "rebalance", "probe", "audit")
# what a read-only console may still open: the audit screen only reads
READ_ONLY_ACTIONS = ("audit",)


class SnapshotFeed(Protocol):
    """What the app needs of the hub."""

    @property
    def latest(self) -> Snapshot | None: ...

    def start(self, on_snapshot: Callable[[Snapshot], None]) -> None: ...

    def stop(self) -> None: ...


@runtime_checkable
class ShowsSnapshot(Protocol):
    """A screen that shows fleet data (the fleet and detail screens)."""

    def show_snapshot(self, snapshot: Snapshot) -> None: ...


class GpuconApp(ReplayKeys, App[int]):
    CSS_PATH = CSS_PATH
    TITLE = "gpucon"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("t", "next_theme", "Theme", show=False, id="theme"),
        Binding(
            "ctrl+p",
            "command_palette",
            "Commands",
            show=False,
            priority=True,
            id="command_palette",
        ),
        *REPLAY_BINDINGS,
    ]

    def __init__(
        self,
        feed: SnapshotFeed,
        *,
        mode: str = "demo",
        read_only: bool = False,
        noc: bool = False,
        theme: str | None = None,
        keys: Mapping[str, str] | None = None,
        controls: Controls | None = None,
        controls_factory: Callable[[], Controls] | None = None,
        clock: Callable[[], float] = time.time,
        autostart: bool = True,
        fleet_name: str = "",
        default_slo_ms: float = 2500.0,
        page_s: float = 10.0,
        config: GpuconConfig | None = None,
        replay: ReplayControls | None = None,
        audit_file: Path | None = None,
        recording: Callable[[], RecordingStatus] | None = None,
    ) -> None:
        # Textual's own __init__ works out the CSS variables of its default theme, which
        # gpucon replaces a moment later: not worked out at all until gpucon's theme is set
        self._theme_chosen = False
        # the NOC wall's own rules only on the wall: every rule is parsed and matched against
        # the screen's widgets before the first frame
        super().__init__(css_path=[CSS_PATH, NOC_CSS_PATH] if noc else None)
        # ``--record``: the recording's state for the status bar's REC badge
        self.recording = recording
        self.feed = feed
        # ``gpucon replay``: the timeline the replay keys move (None in any other console)
        self.replay = replay
        # the audit records to show instead of this console's file (a replay's, copied out)
        self.audit_file = audit_file
        # the GpuconConfig the console runs on (None in the demo): the actions flow reads its
        # probe targets and the audit stream's Redis from it
        self.config = config
        self.mode = mode
        self.noc = noc
        self.read_only = read_only or noc
        # read-only is enforced where writes happen: no controls object exists at all, and a
        # factory for one is dropped unseen
        self._controls = None if self.read_only else controls
        self._controls_factory = None if self.read_only else controls_factory
        self.clock = clock
        self.autostart = autostart
        self.fleet_name = fleet_name
        self.default_slo_ms = default_slo_ms
        self.page_s = page_s
        self.keys = dict(keys or {})
        self.snapshot: Snapshot | None = feed.latest
        self.startup_problems: list[str] = []
        # called once the first frame is drawn (the launcher turns the garbage collector back
        # on there: gpucon.commands.console)
        self.after_first_frame: list[Callable[[], object]] = []
        # the fleet screen's: what showing a snapshot reads, worked out on the hub's thread
        self.tick_prep: TickPrep | None = None
        self._key_hold: Timer | None = None
        self._last_key_at = float("-inf")  # time.monotonic() of the last key
        self._gc_held = False  # the collector waits while a key is answered
        # the hub thread's SnapshotArrived the UI has not taken yet (``_from_hub_thread``)
        self._on_its_way: SnapshotArrived | None = None
        self._on_its_way_lock = threading.Lock()
        # the newest snapshot that came while a key was answered, and since when one waits
        self._held_snapshot: tuple[float, Snapshot] | None = None
        for t in THEMES.values():
            self.register_theme(t)
        self._theme_chosen = True
        self._set_theme(theme or ("gpucon-noc" if noc else "gpucon-dark"))

    @property
    def controls(self) -> Controls | None:
        """The write side, or None (read-only, or it could not be built).

        Built from ``controls_factory`` on first use; the app asks for it a second after it
        starts, so the factory's imports never delay the first screen of data.
        """
        factory, self._controls_factory = self._controls_factory, None
        if factory is not None and not self.read_only:
            try:
                self._controls = factory()
            except Exception as exc:  # no registry, audit file not writable, ...
                self._controls = None
                self.notify(f"actions are off: {exc}", severity="warning", markup=False)
        return self._controls

    @property
    def badges(self) -> tuple[str, ...]:
        badges = [self.mode.upper()]
        if self.noc:
            badges.append("NOC")
        if self.read_only:
            badges.append("READ-ONLY")
        fleet = self.config.fleet if self.config is not None and self.mode != "demo" else None
        if fleet is not None and any(
            s is not None and s.insecure_skip_verify for s in (fleet.redis, fleet.prometheus)
        ):
            badges.append("TLS UNVERIFIED")  # insecure_skip_verify: said on every screen
        return tuple(badges)

    def _set_theme(self, name: str) -> None:
        try:
            resolved = resolve_theme(name, set(self.available_themes))
            if not isinstance(resolved, str):
                self.register_theme(resolved)
                resolved = resolved.name
            if self.is_running:
                self.theme = resolved
            else:
                self._set_initial_theme(resolved)
        except Exception as exc:  # ThemeError, or a theme Textual refuses
            fallback = "gpucon-noc" if self.noc else "gpucon-dark"
            self.startup_problems.append(f"{exc}; using {fallback}")
            self.theme = fallback

    def _set_initial_theme(self, name: str) -> None:
        """Set the theme before the app runs without re-parsing every stylesheet.

        Assigning ``theme`` queues a full CSS re-parse (about 10 ms, a tenth of the start-up
        budget); before the first parse it is enough to give the stylesheet the theme's
        variables. Textual applies the theme's classes when the app starts (``init`` watcher).
        """
        self.set_reactive(App.theme, name)
        self.stylesheet.set_variables(self.get_css_variables())

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VARIABLE_DEFAULTS)

    def get_css_variables(self) -> dict[str, str]:
        if not self._theme_chosen:  # asked by App.__init__: its theme is about to be replaced
            return {}
        return super().get_css_variables()

    # -- start and stop --------------------------------------------------------------------

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, telling the app of each key on its input thread
        (``app_input``): the hub holds back from then on, not from when the key is taken."""
        return key_noticing(super().get_driver_class(), self._key_coming)

    def _key_coming(self) -> None:
        """On the terminal's input thread: a key was read; the UI will answer it."""
        self._last_key_at = time.monotonic()
        idle = self._ui_idle
        if idle is not None:
            idle.clear()

    def get_default_screen(self) -> Screen[Any]:
        """The fleet screen is the app's first screen: composed with the app, so the very
        first frame Textual draws already shows it (a screen pushed from ``on_mount`` is
        drawn inside the app's start-up batch, which Textual discards, and appears only on
        the terminal's first resize event, ~100 ms later)."""
        screen_class = FleetScreen if self.read_only else ActionFleetScreen
        return screen_class(
            badges=self.badges,
            fleet_name=self.fleet_name,
            clock=self.clock,
            noc=self.noc,
            page_s=self.page_s,
            default_slo_ms=self.default_slo_ms,
            recording=self.recording,
        )

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notification (screens' included: they come here) with credentials masked:
        an error a notification quotes may hold a URL with its password."""
        super().notify(
            redact(message), title=redact(title), severity=severity, timeout=timeout, markup=markup
        )

    def _fatal_error(self) -> None:
        """Textual's crash report, with credentials masked: it shows every frame's local
        variables, and a URL with its password may be one of them. Rendered as Textual
        renders it, then masked (``gpucon.redact``) before it is kept for the terminal."""
        import io

        import rich
        from rich.console import Console
        from rich.text import Text
        from rich.traceback import Traceback

        self.bell()
        report = Traceback(show_locals=True, width=None, locals_max_length=5, suppress=[rich])
        # plain text: colour codes inside a URL would hide it from the patterns
        buffer = io.StringIO()
        Console(file=buffer, width=self.console.width, color_system=None).print(report)
        self._exit_renderables.append(Text(redact(buffer.getvalue())))
        self._close_messages_no_wait()

    def on_mount(self) -> None:
        if self.replay is not None:  # a screen pushed while paused gets its banner too
            self.set_interval(0.5, self.show_timeline)
        unknown = sorted(set(self.keys) - known_binding_ids()) if self.keys else []
        if unknown:
            self.startup_problems.append(f"[keys]: unknown binding id {unknown[0]!r}")
        self.set_keymap({k: v for k, v in self.keys.items() if k not in unknown})
        for problem in self.startup_problems:
            self.notify(problem, title="gpucon", severity="warning", markup=False)
        if self._controls_factory is not None:
            # a second in: well after the first frame is on the terminal (the demo's controls
            # import the probe's HTTP client), well before anyone can press an action key;
            # an action pressed sooner builds them on the spot
            self.set_timer(1.0, lambda: self.controls)
        if self.autostart:
            # after the first frame: the reader threads are not needed to draw it (the demo's
            # first snapshot is already in; a live one arrives a tick later either way)
            self.call_after_refresh(self.feed.start, self._from_hub_thread)
        for callback in self.after_first_frame:
            self.call_after_refresh(callback)

    def _from_hub_thread(self, snapshot: Snapshot) -> None:
        """On the hub's thread: work out what showing ``snapshot`` reads of the whole fleet
        (``widgets.tick_prep``), then hand it to the UI thread, which applies it."""
        prep = self.tick_prep
        if prep is not None:
            # a key being answered goes first: the preparation waits before each step
            # (``Hub.ui_gate``; a feed without one, a replay's, never holds a key)
            make_gate = getattr(self.feed, "ui_gate", None)
            gate = make_gate() if callable(make_gate) else _go_on
            # a failure here must not end the hub's thread: the UI thread then works the
            # same out itself, and shows whatever went wrong
            with contextlib.suppress(Exception):
                prep.prepare(snapshot, gate)
        # one snapshot waits for the UI at most: when the UI falls behind (a loaded machine)
        # the newer one takes the place of the one waiting. Textual's queue has no bound and
        # skips a replaced message only when it is taken: at 2,048 GPUs each waiting tick
        # held ~3 MiB of fleet, and the process kept the peak (a 15 s stall: +47 MiB RSS)
        with self._on_its_way_lock:
            waiting = self._on_its_way
            if waiting is not None:  # the UI takes it later: it shows this one instead
                waiting.snapshot = snapshot
                return
            message = self._on_its_way = SnapshotArrived(snapshot)
        self.post_message(message)

    @property
    def _ui_idle(self) -> threading.Event | None:
        """The feed's "UI is idle" event (``Hub.ui_idle``), where it has one."""
        idle = getattr(self.feed, "ui_idle", None)
        return idle if isinstance(idle, threading.Event) else None

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self._answering_key()
        await super().on_event(event)

    def _answering_key(self) -> None:
        """A key came: for ``KEY_HOLD_S`` the hub's thread holds its tick (between phases)
        and the cyclic garbage collector waits, so the key's handler and frame have the
        interpreter to themselves. Python runs one thread at a time and the hub's tick is
        Python: sharing, a key's 30 ms took 60 to 200 ms at 2,048 GPUs; and a young
        collection there walks every entity made since the last one (40 to 140 ms measured).
        The hub never waits more than ``hub.UI_WAIT_S`` a tick; the collector runs when the
        hold ends."""
        self._last_key_at = time.monotonic()
        idle = self._ui_idle
        if idle is not None:
            idle.clear()
        if gc.isenabled():  # the launcher keeps it off until the first frame: left so
            gc.disable()
            self._gc_held = True
        if self._key_hold is not None:
            self._key_hold.stop()
        self._key_hold = self.set_timer(KEY_HOLD_S, self._key_answered, name="key-hold")

    def _key_answered(self) -> None:
        self._key_hold = None
        if self._gc_held:
            self._gc_held = False
            gc.enable()
        idle = self._ui_idle
        if idle is not None:
            idle.set()
        held, self._held_snapshot = self._held_snapshot, None
        if held is not None and self.is_running:
            self.show_snapshot(held[1])

    def key_within(self, seconds: float) -> bool:
        """A key came less than ``seconds`` ago (any thread may ask: the console's
        collector waits for a pause in the typing, ``gc_pace.collect_unless``)."""
        return time.monotonic() - self._last_key_at < seconds

    def _answering_a_key(self) -> bool:
        """A key is being answered (its hold runs) or was read and is on its way, and the
        feed is a hub (``ui_idle``): a replay's snapshots are what its keys ask for."""
        idle = self._ui_idle
        return idle is not None and not idle.is_set()

    def on_unmount(self) -> None:
        if self._key_hold is not None:
            self._key_hold.stop()
            self._key_answered()
        if self.autostart:
            self.feed.stop()

    # -- snapshots -------------------------------------------------------------------------

    def on_snapshot_arrived(self, message: SnapshotArrived) -> None:
        with self._on_its_way_lock:  # the hub's next snapshot is posted anew
            self._on_its_way = None
            snapshot = message.snapshot
        # a key being answered goes first: its frame is drawn, then the snapshot shown (when
        # the key's hold ends); one held longer than SNAPSHOT_HOLD_S (a burst of typing) is
        # shown all the same
        now = time.monotonic()
        held = self._held_snapshot
        since = now if held is None else held[0]
        if self._answering_a_key() and now - since < SNAPSHOT_HOLD_S:
            self._held_snapshot = (since, snapshot)
            return
        self._held_snapshot = None
        self.show_snapshot(snapshot)

    def show_snapshot(self, snapshot: Snapshot) -> None:
        """Apply one snapshot to every screen that shows fleet data, in one batch."""
        self.snapshot = snapshot
        with self.batch_update():
            for screen in self.screen_stack:
                if isinstance(screen, ShowsSnapshot) and screen.is_mounted:
                    screen.show_snapshot(snapshot)
            if self.replay is not None:
                self.show_timeline()

    # -- navigation and actions ------------------------------------------------------------

    def open_detail(self, slot_id: str) -> None:
        from gpucon.screens.detail import DetailScreen  # not needed for the first frame

        self.push_screen(
            DetailScreen(slot_id, badges=self.badges, default_slo_ms=self.default_slo_ms)
        )

    def action_help(self) -> None:
        from gpucon.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        rows: list[tuple[str, str, str]] = []
        seen: set[str] = set()
        for active in self.screen.active_bindings.values():
            b = active.binding
            # bindings without an id are Textual's own (scrolling, focus); ctrl+q quits too
            if not b.description or not (b.id or b.action == "quit") or b.key in seen:
                continue
            seen.add(b.key)
            rows.append((self.get_key_display(b), b.id or "", b.description))
        note = "READ-ONLY: no action can write; action keys do not exist." if self.read_only else ""
        self.push_screen(HelpScreen(rows, note, self._column_help()))

    def _column_help(self) -> Text:
        """The columns' meanings, with TREND's span and REQ/S's window as this console runs."""
        from gpucon.screens.help import column_help

        fleet = next((s for s in self.screen_stack if isinstance(s, FleetScreen)), None)
        trend = ""
        if fleet is not None:
            width = fleet.table.trend_width
            refresh = getattr(self.feed, "refresh_s", None)
            if width:
                trend = f"the last {width} samples"
                if isinstance(refresh, int | float) and refresh > 0:
                    trend += f" (one per {refresh:g} s refresh: {width * refresh:g} s)"
        window = self.snapshot.rate_window if self.snapshot is not None else None
        return column_help(trend, window or "")

    def action_next_theme(self) -> None:
        names = list(THEMES)
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]

    def open_audit(self) -> None:
        """The audit log: this console's file, and the fleet's stream where Redis is set up.
        It only reads, so it opens in every mode."""
        from gpucon.screens.actions_flow import audit_path, audit_stream
        from gpucon.screens.audit import AuditScreen

        if self.audit_file is not None:
            self.push_screen(AuditScreen(self.audit_file, stream=None))
            return
        controls = self.controls
        self.push_screen(
            AuditScreen(
                audit_path(self.mode, controls, self.config),
                stream=audit_stream(self.mode, controls, self.config),
            )
        )

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # Textual's own "Keys" panel would list the keys a second time: ours (help) explains
        # the columns too
        yield from (c for c in super().get_system_commands(screen) if c.title != "Keys")
        fleet = next((s for s in self.screen_stack if isinstance(s, FleetScreen)), None)
        if fleet is not None:
            yield from fleet_commands(fleet, ACTIONS, self.action_help)


def _go_on() -> None:
    """A gate that never waits."""


def known_binding_ids() -> set[str]:
    """Every binding id a user may remap in ``[keys]``."""
    from gpucon.screens.audit import AuditScreen
    from gpucon.screens.detail import DetailScreen
    from gpucon.screens.help import HelpScreen
    from gpucon.screens.plan import PlanScreen
    from gpucon.screens.progress import ProgressScreen
    from gpucon.screens.reslice_prompt import ReslicePrompt
    from gpucon.widgets.panels import AlertsPanel
    from gpucon.widgets.slot_table import SlotTable

    ids: set[str] = set()
    screens = (DetailScreen, HelpScreen, PlanScreen, ProgressScreen, AuditScreen, ReslicePrompt)
    for cls in (GpuconApp, FleetScreen, ActionFleetScreen, SlotTable, AlertsPanel, *screens):
        for b in cls.BINDINGS:
            if isinstance(b, Binding) and b.id:
                ids.add(b.id)
    return ids
