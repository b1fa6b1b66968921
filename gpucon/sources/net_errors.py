"""A failed HTTP request said the way an on-call engineer needs it: what went wrong, in words.

requests wraps urllib3, which wraps the socket's error, and its text is the whole chain:
``ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=9090): Max retries exceeded with
url: /api/v1/query?query=%7B__name__... (Caused by ReadTimeoutError(...Read timed out. (read
timeout=3.92)))``. Shown in an alert or the status bar, the first 60 characters are the pool's
host and port, and what happened is cut off. ``network_cause`` walks the chain for what
happened: ``read timed out after 3.9s``, ``connection refused``, ``connect timed out after
2.0s``, ``name not resolved``, ``connection reset``, ``connection closed``; an error it does not
know is ``describe_error``'s ``Type: first line``.
"""

from __future__ import annotations

import re
import socket

from gpucon.sources.base import describe_error

_TIMEOUT = re.compile(r"(read|connect) timeout=([0-9.]+)")
_MAX_CHAIN = 8  # exceptions walked through causes, contexts, args and urllib3's ``reason``


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the errors it wraps, outermost first."""
    seen: list[BaseException] = []
    todo: list[object] = [exc]
    while todo and len(seen) < _MAX_CHAIN:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or any(item is s for s in seen):
            continue
        seen.append(item)
        todo.extend((getattr(item, "reason", None), item.__cause__, item.__context__))
        todo.extend(item.args)
    return seen


def network_cause(exc: BaseException) -> str:
    """What went wrong with an HTTP request, in words (see the module's docstring)."""
    chain = _chain(exc)
    names = " ".join(type(e).__name__ for e in chain)
    text = " ".join(str(e) for e in chain)
    timeout = _TIMEOUT.search(text)
    after = f" after {float(timeout.group(2)):.1f}s" if timeout else ""
    if "ConnectTimeout" in names:
        return f"connect timed out{after}"
    if "ReadTimeout" in names or "Read timed out" in text:
        return f"read timed out{after}"
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text:
        return "connection refused"
    if any(isinstance(e, socket.gaierror) for e in chain) or "NameResolution" in names:
        return "name not resolved"
    if any(isinstance(e, ConnectionResetError) for e in chain) or "reset by peer" in text:
        return "connection reset"
    if "RemoteDisconnected" in names or "closed connection" in text:
        return "connection closed without an answer"
    if isinstance(exc, TimeoutError) or "Timeout" in names:
        return f"timed out{after}"
    return describe_error(exc)
