"""Credentials taken out of any text before it is kept or shown: the one place that does it.

gpucon's output goes to NOC walls, snapshots, audit logs and streams that many people read.
``redact(text)`` replaces, anywhere in ``text`` (URLs embedded in error messages included):

- a URL's userinfo password: ``redis://ops:S3cret@host:6379/0`` → ``redis://ops:***@host:6379/0``
  (the user name stays: it says which account was used, and is no secret);
- the value of a token-like parameter (``?token=…``, ``&access_token=…``, ``password=…``, …);
- ``user:password@host`` without a scheme (``host='ops:pw@10.0.0.1'`` in a library's error);
- an ``Authorization: Bearer …`` / ``Basic …`` credential;
- any value registered with ``register_secret`` (a password read from a file or the
  environment): client libraries quote hosts and arguments in ways no pattern foresees
  (``host='ops:pw@10.0.0.1'``), so the values themselves are looked for too.

A leaf module (standard library only), below every other layer, so each can use it.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

MASK = "***"

_PARAM_NAMES = (
    "password|passwd|pwd|pass|token|access_token|refresh_token|id_token|auth_token|api_token"
    "|apikey|api_key|key|secret|client_secret|secret_key|access_key|auth|authorization"
    "|signature|sig|x-amz-signature|x-goog-signature|credential|credentials|session_token"
)


class _Patterns:
    """The masking patterns, compiled on first use: compiling them took a few milliseconds of
    every start, before anything needed masking."""

    def __init__(self) -> None:
        # scheme://userinfo@ : the userinfo runs up to the last "@" before the host part ends
        self.url_userinfo = re.compile(
            r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<netloc>[^\s/?#\"'<>]*)"
        )
        # user:password@host without a scheme, as client libraries quote a host (host='ops:pw@h')
        self.bare_userinfo = re.compile(
            r"(?<![\w/:.%+-])(?P<user>[A-Za-z_][A-Za-z0-9._%+-]*):(?P<password>[^\s@/'\"<>]+)@(?=[A-Za-z0-9\[])"
        )
        # in a query string: ?NAME=VALUE / &NAME=VALUE / ;NAME=VALUE
        self.query_param = re.compile(
            rf"(?P<lead>[?&;](?:{_PARAM_NAMES}))=(?P<value>[^&;#\s\"'<>]*)", re.IGNORECASE
        )
        # outside a query string (a library's repr of its arguments): password='x', token=x
        self.bare_param = re.compile(
            r"(?P<lead>\b(?:password|passwd|secret|client_secret|token|access_token|api_key|apikey"
            r"|bearer_token|auth_token))(?P<sep>\s*=\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^\s,;)&'\"\\]+)",
            re.IGNORECASE,
        )
        self.auth_header = re.compile(
            r"(?P<lead>\bBearer\s+|\bAuthorization['\"]?\s*[:=]\s*['\"]?(?:[A-Za-z]+\s+)?)"
            r"(?P<value>[A-Za-z0-9._~+/=-]+)",
            re.IGNORECASE,
        )


@functools.cache
def _patterns() -> _Patterns:
    return _Patterns()


_secrets: set[str] = set()
_secrets_lock = threading.Lock()
# secrets shorter than this are not searched for: "ab" would mask half the words on screen
MIN_SECRET_LEN = 4


def register_secret(value: str | None) -> None:
    """Remember ``value`` (a password or token read from a file or the environment) so that
    ``redact`` masks it wherever it appears."""
    if value and len(value) >= MIN_SECRET_LEN:
        with _secrets_lock:
            _secrets.add(value)


def _userinfo(match: re.Match[str]) -> str:
    netloc = match.group("netloc")
    if "@" not in netloc:
        return match.group(0)
    userinfo, _, host = netloc.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    return f"{match.group('scheme')}{user}{':' + MASK if colon else ''}@{host}"


def redact(text: str) -> str:
    """``text`` with every credential it holds replaced by ``***`` (see the module's doc)."""
    if not text:
        return text
    with _secrets_lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:  # the longest first: one secret may contain another
        if secret in text:
            text = text.replace(secret, MASK)
    patterns = _patterns()
    if "://" in text:
        text = patterns.url_userinfo.sub(_userinfo, text)
    if "@" in text:
        text = patterns.bare_userinfo.sub(lambda m: f"{m.group('user')}:{MASK}@", text)
    if "=" in text:
        text = patterns.query_param.sub(lambda m: f"{m.group('lead')}={MASK}", text)
        text = patterns.bare_param.sub(lambda m: f"{m.group('lead')}{m.group('sep')}{MASK}", text)
    return patterns.auth_header.sub(lambda m: f"{m.group('lead')}{MASK}", text)


def redact_tree(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with every string in it redacted; keys
    too. For documents about to be dumped: redacting the dumped text could eat a quote."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_tree(k): redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v) for v in value]
    return value


def redact_optional(text: str | None) -> str | None:
    """``redact`` for a value that may be absent."""
    return None if text is None else redact(text)
