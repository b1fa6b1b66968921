"""Which web pages may watch the wall: the checks ``gpucon serve`` makes on every request.

Browsers let any web page open a WebSocket to any address, the wall's on 127.0.0.1 included,
and read what comes back: a page on the internet, opened in a browser on the wall's machine or
network, could read the fleet through it. Two checks close that:

- **Origin**: a browser names the page that opens a WebSocket (``Origin``). The wall's own
  page has the wall's own address; any other origin is refused, unless ``--allow-origin``
  names it (a reverse proxy's public address). A client that sends no ``Origin`` is no web
  page (a script, a benchmark) and may connect.
- **Host** (DNS rebinding: a hostile name that resolves to 127.0.0.1 makes the hostile page
  same-origin with the wall): bound on loopback, the wall answers only requests addressed to
  a loopback name or address, or to a host ``--allow-origin`` names.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


def _hostname(host_header: str) -> str:
    """``example.org:8080`` -> ``example.org``; ``[::1]:8080`` -> ``::1``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_name(hostname: str) -> bool:
    if hostname in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def normal_origin(origin: str) -> str | None:
    """``https://Wall.Example.org/`` -> ``https://wall.example.org``; None if it is no origin
    (not http(s), no host)."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return f"{parts.scheme}://{parts.netloc.lower()}"


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    """``loopback_only``: the wall is bound on loopback; ``allowed``: normal origins."""

    loopback_only: bool
    allowed: frozenset[str] = frozenset()

    @classmethod
    def build(cls, *, loopback_only: bool, allow_origins: list[str]) -> OriginPolicy:
        """Raises ValueError naming an ``--allow-origin`` that is no origin."""
        allowed = set()
        for given in allow_origins:
            origin = normal_origin(given)
            if origin is None:
                raise ValueError(f"--allow-origin {given!r}: expected http(s)://HOST[:PORT]")
            allowed.add(origin)
        return cls(loopback_only, frozenset(allowed))

    def host_ok(self, host_header: str | None) -> bool:
        if not self.loopback_only:
            return True
        if not host_header:
            return False
        name = _hostname(host_header)
        if is_loopback_name(name):
            return True
        return any(urlsplit(origin).hostname == name for origin in self.allowed)

    def origin_ok(self, origin: str | None, host_header: str | None) -> bool:
        if origin is None:
            return True  # no browser page: browsers always send Origin with a WebSocket
        normal = normal_origin(origin)
        if normal is None:
            return False
        if normal in self.allowed:
            return True
        own = (host_header or "").strip().lower()
        return bool(own) and normal in (f"http://{own}", f"https://{own}")
