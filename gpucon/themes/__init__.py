"""Textual themes (dark, light, high-contrast NOC) and app variables for hot, breach, stale.

The app registers ``THEMES`` and answers ``get_theme_variable_defaults`` with
``VARIABLE_DEFAULTS``; ``gpucon.tcss`` uses ``$util-hot``, ``$latency-breach`` and ``$stale``.
A user theme is a TOML file with Theme's fields (``name``, ``primary``, ... and
``[variables]``); ``resolve_theme`` names what is wrong when one cannot be used.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from textual.theme import Theme

CSS_PATH = Path(__file__).with_name("gpucon.tcss")
# the NOC wall's rules: read after CSS_PATH by a --noc console only (others never parse them)
NOC_CSS_PATH = Path(__file__).with_name("noc.tcss")

VARIABLE_DEFAULTS: dict[str, str] = {
    "util-hot": "#f0a030",
    "latency-breach": "#ff5555",
    "stale": "#8a8a8a",
    "ok": "#50c878",
}

THEMES: dict[str, Theme] = {
    t.name: t
    for t in (
        Theme(
            name="gpucon-dark",
            primary="#4aa8ff",
            secondary="#8fbcbb",
            accent="#ffb454",
            warning="#f0a030",
            error="#ff5555",
            success="#50c878",
            foreground="#d8dee9",
            background="#10141a",
            surface="#161c24",
            panel="#1e2631",
            dark=True,
            variables={"util-hot": "#f0a030", "latency-breach": "#ff5f5f", "stale": "#7d8590"},
        ),
        Theme(
            name="gpucon-light",
            primary="#0b5cad",
            secondary="#3b6e6a",
            accent="#a35200",
            warning="#9a5b00",
            error="#c0141b",
            success="#1d7a3a",
            foreground="#1a1f26",
            background="#f7f7f4",
            surface="#ecece6",
            panel="#dfe3e8",
            dark=False,
            variables={"util-hot": "#a35200", "latency-breach": "#c0141b", "stale": "#7a7a7a"},
        ),
        Theme(
            name="gpucon-noc",
            primary="#00d7ff",
            secondary="#ffffff",
            accent="#ffff00",
            warning="#ffd700",
            error="#ff3030",
            success="#00ff5f",
            foreground="#ffffff",
            background="#000000",
            surface="#000000",
            panel="#1c1c1c",
            dark=True,
            variables={
                "util-hot": "#ffd700",
                "latency-breach": "#ff3030",
                "stale": "#ff87ff",
                "ok": "#00ff5f",
            },
        ),
    )
}


class ThemeError(ValueError):
    """A theme name or file that cannot be used; the message says why."""


COLOUR_FIELDS = (
    *("primary", "secondary", "warning", "error", "success", "accent"),
    *("foreground", "background", "surface", "panel", "boost"),
)
MAX_VARIABLE_CHARS = 200


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:59]}…"


def _check_theme_data(path: Path, data: dict[str, object]) -> None:
    """Every colour a string that parses as one, every variable a short string and our own
    variables colours: ThemeError names the field, the value and what was expected."""
    from textual.color import Color, ColorParseError

    def colour(key: str, value: object) -> None:
        if not isinstance(value, str):
            raise ThemeError(
                f"theme file {path}: {key}: expected a colour string such as '#4aa8ff', "
                f"got {_shown(value)}"
            )
        try:
            Color.parse(value)
        except ColorParseError:
            raise ThemeError(
                f"theme file {path}: {key}: expected a colour such as '#4aa8ff' or "
                f"'rgb(74,168,255)', got {_shown(value)}"
            ) from None

    for key in ("name", "primary"):
        if not isinstance(data.get(key), str):
            raise ThemeError(f"theme file {path}: {key!r} must be a string")
    for key in COLOUR_FIELDS:
        if data.get(key) is not None:
            colour(key, data[key])
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeError(f"theme file {path}: variables: expected a table, got {_shown(variables)}")
    for name, value in variables.items():
        if name in VARIABLE_DEFAULTS:
            colour(f"variables.{name}", value)
        elif not isinstance(value, str) or len(value) > MAX_VARIABLE_CHARS:
            raise ThemeError(
                f"theme file {path}: variables.{name}: expected a string of at most "
                f"{MAX_VARIABLE_CHARS} characters (a colour or a style), got {_shown(value)}"
            )


def _check_stylesheet(path: Path, theme: Theme) -> None:
    """Parse gpucon's stylesheet with the theme's variables, as the app will: a value the
    checks above let through but CSS refuses is named here, not as a traceback at start."""
    from textual.css.stylesheet import Stylesheet

    variables = {**theme.to_color_system().generate(), **VARIABLE_DEFAULTS, **theme.variables}
    sheet = Stylesheet(variables=variables)
    sheet.read_all([CSS_PATH, NOC_CSS_PATH])
    try:
        sheet.parse()
    except Exception:  # StylesheetParseError, TokenError, ...: Textual's own wording is noise
        names = ", ".join(sorted(theme.variables)) or "none"
        raise ThemeError(
            f"theme file {path}: variables ({names}): gpucon's stylesheet cannot use them "
            f"(expected colours such as '#4aa8ff' or styles such as 'bold')"
        ) from None


def load_theme_file(path: Path) -> Theme:
    """A Theme from a TOML file; ThemeError names the file and the field that is wrong."""
    import tomllib  # only a theme file needs it: not imported for the first frame

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ThemeError(f"theme file {path}: {exc}") from exc
    known = {f.name for f in fields(Theme)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ThemeError(f"theme file {path}: unknown field {_shown(unknown[0])}")
    _check_theme_data(path, data)
    try:
        theme = Theme(**data)
        theme.to_color_system().generate()  # a bad colour fails here, not at paint time
    except Exception as exc:
        raise ThemeError(f"theme file {path}: {exc}") from exc
    _check_stylesheet(path, theme)
    return theme


def resolve_theme(name_or_path: str, available: set[str]) -> Theme | str:
    """A registered theme's name, or a Theme loaded from a ``.toml`` path."""
    if name_or_path in available:
        return name_or_path
    if name_or_path.endswith(".toml"):
        return load_theme_file(Path(name_or_path).expanduser())
    raise ThemeError(f"unknown theme {name_or_path!r} (known: {', '.join(sorted(available))})")
