"""Text a command prints on a terminal: fleet text made safe to show, errors on stderr.

Only the standard library is imported at module level (``gpucon.redact`` when one is shown).
"""

from __future__ import annotations

import sys


def safe_line(text: str) -> str:
    """Fleet text on a terminal: control characters (escape sequences) shown, not obeyed;
    credentials (a URL's password in an error) masked."""
    from gpucon.redact import redact

    text = redact(text)
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def err(text: str) -> None:
    """One line on stderr, flushed (progress and refusals never mix with --json on stdout)."""
    print(text, file=sys.stderr, flush=True)
