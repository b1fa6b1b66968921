"""The binding ids a config's ``[keys]`` table may remap, and their default keys, known without
importing the UI; ``key_collisions`` names a remap that would shadow another binding.

``gpucon config check`` and the console's start validate ``[keys]`` against these; a UI test
keeps them equal to the screens' actual BINDINGS, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping

# where a binding is live: the app's own bindings are live on every screen
APP = "app"
# the replay's timeline keys: live on every screen of ``gpucon replay``, and nowhere else
REPLAY = "replay"
# binding id -> (where, its default keys as the BINDINGS write them)
DEFAULT_KEYS: dict[str, tuple[str, str]] = {
    # the console (GpuconApp)
    "quit": (APP, "q"),
    "help": (APP, "question_mark"),
    "theme": (APP, "t"),
    "command_palette": (APP, "ctrl+p"),
    # the replay's timeline (bound by the app, live only in ``gpucon replay``, where no action
    # key exists: they share no screen with drain and the other actions)
    "replay_pause": (REPLAY, "space"),
    "replay_step": (REPLAY, "full_stop"),
    "replay_step_back": (REPLAY, "comma"),
    "replay_forward": (REPLAY, "right_square_bracket"),
    "replay_back": (REPLAY, "left_square_bracket"),
    "replay_forward_min": (REPLAY, "right_curly_bracket"),
    "replay_back_min": (REPLAY, "left_curly_bracket"),
    "replay_next_alert": (REPLAY, "n"),
    "replay_prev_alert": (REPLAY, "N"),
    "replay_speed": (REPLAY, "x"),
    # the fleet screen and its table (actions are bound only when the console may write)
    "sort": ("fleet", "s"),
    "sort_reverse": ("fleet", "S"),
    "filter": ("fleet", "slash"),
    "clear_filter": ("fleet", "escape"),
    "audit": ("fleet", "A"),
    "drain": ("fleet", "d"),
    "undrain": ("fleet", "u"),
    "rebalance": ("fleet", "b"),
    "probe": ("fleet", "p"),
    "reslice": ("fleet", "X"),
    "mps_restart": ("fleet", "m"),
    "cursor_up": ("fleet", "up,k"),
    "cursor_down": ("fleet", "down,j"),
    "page_up": ("fleet", "pageup"),
    "page_down": ("fleet", "pagedown"),
    "first_row": ("fleet", "home"),
    "last_row": ("fleet", "end"),
    "open_detail": ("fleet", "enter"),
    "pause": ("fleet", "z"),
    # the alerts list on the fleet screen
    "focus_alerts": ("fleet", "exclamation_mark"),
    "goto_alert": ("fleet", "g"),
    "alert_up": ("fleet", "up,k"),
    "alert_down": ("fleet", "down,j"),
    "alert_jump": ("fleet", "enter"),
    # the detail, help, plan, progress and audit screens
    "back": ("detail", "escape,q"),
    "close_help": ("help", "escape,q,question_mark"),
    "cancel_plan": ("plan", "escape"),
    "plan_up": ("plan", "up"),
    "plan_down": ("plan", "down"),
    "plan_page_up": ("plan", "pageup"),
    "plan_page_down": ("plan", "pagedown"),
    "close_progress": ("progress", "escape"),
    "cancel_reslice": ("reslice", "escape"),
    "close_audit": ("audit", "escape,q"),
    "reload_audit": ("audit", "r"),
}

BINDING_IDS: frozenset[str] = frozenset(DEFAULT_KEYS)

# characters a user may write for a key, as Textual names them
_KEY_NAMES = {
    "?": "question_mark",
    "/": "slash",
    " ": "space",
    "\t": "tab",
    "+": "plus",
    "-": "minus",
    ",": "comma",
    ".": "full_stop",
    "[": "left_square_bracket",
    "]": "right_square_bracket",
    "{": "left_curly_bracket",
    "}": "right_curly_bracket",
    ":": "colon",
    ";": "semicolon",
    "=": "equals_sign",
    "!": "exclamation_mark",
    "*": "asterisk",
    "#": "number_sign",
    "\\": "backslash",
}


def _keys(spec: str) -> set[str]:
    names = set()
    for part in spec.split(","):
        key = part if part == " " else part.strip()
        if key:
            names.add(_KEY_NAMES.get(key, key))
    return names


def key_collisions(remap: Mapping[str, str]) -> list[str]:
    """One line per remap in ``remap`` (binding id -> keys) that gives a key to two bindings
    live on the same screen, naming both; pairs that share a key by default (a screen's
    ``q`` closing it before the app's quit) are by design and not named."""
    effective = {
        binding: (where, _keys(remap.get(binding, default)))
        for binding, (where, default) in DEFAULT_KEYS.items()
    }
    problems: list[str] = []
    for binding in sorted(remap):
        if binding not in DEFAULT_KEYS:
            continue  # an unknown id is named by its own check
        where, keys = effective[binding]
        for other, (other_where, other_keys) in sorted(effective.items()):
            if other == binding or not (where == other_where or APP in (where, other_where)):
                continue
            shared = keys & other_keys
            by_default = _keys(DEFAULT_KEYS[binding][1]) & _keys(DEFAULT_KEYS[other][1])
            if shared - by_default and not (other in remap and other < binding):
                screen = other_where if where == APP else where
                place = "every screen" if screen == APP else f"the {screen} screen"
                both = ", ".join(sorted(shared - by_default))
                problems.append(
                    f"keys.{binding} = {remap[binding]!r} collides with {other} "
                    f"({remap.get(other, DEFAULT_KEYS[other][1])!r}) on {place}: "
                    f"both would answer {both}"
                )
    return problems
