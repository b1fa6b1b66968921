"""Credentials from where operators keep them: files and environment variables, never shown.

A source's ``password_file`` / ``token_file`` is read when the client is built; like ssh with
a private key, a file that its group or others may read (or write) is refused, with a message
naming the file and its mode. ``password_env`` / ``token_env`` name an environment variable.
A password given so wins over the URL's own userinfo. ``describe_credentials`` says, for
``gpucon config check``, where each credential comes from — a file's path, a variable's name,
the URL — never its value; ``credential_warnings`` names what an operator must know (TLS not
verified, a config file holding an inline password that others can read).

``redis_client_for`` is the one helper that builds a Redis client from a ``RedisConfig``.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gpucon.config import ConfigError, GpuconConfig, PrometheusConfig, RedisConfig
from gpucon.redact import register_secret

if TYPE_CHECKING:  # imported where a client's auth is built: a console checking only its
    # config's warnings at start (an NVML-only fleet) never needs the three dataclasses
    from gpucon.sources.connect import HttpAuth, RedisAuth, TlsFiles


def file_mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def secret_from_file(path_text: str, key: str) -> str:
    """The secret in ``path_text`` (one line; the trailing newline dropped); ConfigError when
    it cannot be read or when group or others may read or write it."""
    path = Path(path_text).expanduser()
    try:
        mode = file_mode(path)
        if mode & 0o077:
            raise ConfigError(
                f"{key}: {path} has mode {mode:04o}: a file holding a secret must be readable "
                f"by its owner only (chmod 600 {path}); refusing to use it"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{key}: {path}: cannot be read: {exc.strerror or exc}") from None
    secret = text.rstrip("\r\n")
    if not secret:
        raise ConfigError(f"{key}: {path} is empty")
    register_secret(secret)
    return secret


def secret_from_env(name: str, key: str, env: Mapping[str, str]) -> str:
    value = env.get(name)
    if not value:
        raise ConfigError(f"{key}: the environment variable {name} is not set (or empty)")
    register_secret(value)
    return value


def _secret(
    source: RedisConfig | PrometheusConfig, what: str, key: str, env: Mapping[str, str]
) -> str | None:
    path = getattr(source, f"{what}_file")
    if path:
        return secret_from_file(path, f"{key}.{what}_file")
    variable = getattr(source, f"{what}_env")
    if variable:
        return secret_from_env(variable, f"{key}.{what}_env", env)
    return None


def _tls(source: RedisConfig | PrometheusConfig) -> TlsFiles:
    from gpucon.sources.connect import TlsFiles

    return TlsFiles(source.ca_file, source.cert_file, source.key_file, source.insecure_skip_verify)


def _url_secret(url: str) -> None:
    """The URL's own password is a secret too: redact masks it even where no URL surrounds it."""
    with contextlib.suppress(ValueError):
        register_secret(urlsplit(url).password)


def redis_auth(
    source: RedisConfig, env: Mapping[str, str] = os.environ, key: str = "redis"
) -> RedisAuth:
    """The user, password and TLS files to reach ``source``'s Redis (ConfigError if a file
    or variable it names cannot be used)."""
    from gpucon.sources.connect import RedisAuth

    _url_secret(source.url)
    password = _secret(source, "password", key, env)
    return RedisAuth(username=source.username, password=password, tls=_tls(source))


def http_auth(
    source: PrometheusConfig, env: Mapping[str, str] = os.environ, key: str = "prometheus"
) -> HttpAuth:
    """Basic auth or a bearer token, and TLS files, to reach ``source``'s Prometheus."""
    from gpucon.sources.connect import HttpAuth

    _url_secret(source.url)
    password = _secret(source, "password", key, env)
    token = _secret(source, "token", key, env)
    return HttpAuth(username=source.username, password=password, token=token, tls=_tls(source))


def redis_client_for(
    source: RedisConfig,
    *,
    client_name: str,
    decode_responses: bool = True,
    env: Mapping[str, str] = os.environ,
    **extra: Any,
) -> Any:
    """A redis-py client for ``source``: its URL, credentials and TLS, timeouts from it."""
    from gpucon.sources.connect import redis_client

    return redis_client(
        source.url,
        redis_auth(source, env),
        timeout_s=source.timeout_s,
        client_name=client_name,
        decode_responses=decode_responses,
        **extra,
    )


def describe_credentials(source: RedisConfig | PrometheusConfig) -> list[str]:
    """Where ``source``'s credentials come from, as comment lines; never their values."""
    lines: list[str] = []
    try:
        parts = urlsplit(source.url)
        url_user, url_password = parts.username, parts.password
    except ValueError:
        url_user = url_password = None
    user = source.username or url_user
    if user:
        lines.append(f"# user {user!r} (from {'username' if source.username else 'the URL'})")
    for what in ("password", "token"):
        path = getattr(source, f"{what}_file", None)
        variable = getattr(source, f"{what}_env", None)
        if path:
            lines.append(f"# {what} from file {path}{_mode_note(Path(path))}")
        elif variable:
            state = "set" if os.environ.get(variable) else "NOT SET"
            lines.append(f"# {what} from environment variable {variable} ({state})")
        elif what == "password" and url_password is not None:
            lines.append("# password from the URL (inline: prefer password_file or password_env)")
    if not lines:
        lines.append("# no credentials")
    tls_scheme = source.url.startswith(("rediss://", "https://"))
    for name in ("ca_file", "cert_file", "key_file"):
        path = getattr(source, name)
        if path:
            note = "" if tls_scheme else " (unused: the URL is not rediss:// or https://)"
            lines.append(f"# TLS {name} {path}{note}")
    if source.insecure_skip_verify:
        lines.append(f"# WARNING: {INSECURE_TEXT}")
    return lines


INSECURE_TEXT = (
    "insecure_skip_verify = true: the server's TLS certificate is NOT checked; anyone on the "
    "path can read and change what gpucon reads and writes, credentials included"
)


def _mode_note(path: Path) -> str:
    try:
        mode = file_mode(path.expanduser())
    except OSError as exc:
        return f" (cannot be read: {exc.strerror or exc})"
    if mode & 0o077:
        return f" (REFUSED: mode {mode:04o}, readable by others: chmod 600 {path})"
    return f" (mode {mode:04o})"


def credential_problems(config: GpuconConfig, env: Mapping[str, str] = os.environ) -> list[str]:
    """What stops the opening fleet's credentials from being used (a file too open, missing,
    a variable not set), as messages naming the file or variable."""
    problems: list[str] = []
    fleet = config.fleet
    prefix = f"fleets.{fleet.name}"
    if fleet.redis is not None:
        try:
            redis_auth(fleet.redis, env, f"{prefix}.redis")
        except ConfigError as exc:
            problems.append(str(exc))
    if fleet.prometheus is not None:
        try:
            http_auth(fleet.prometheus, env, f"{prefix}.prometheus")
        except ConfigError as exc:
            problems.append(str(exc))
    return problems


def credential_warnings(config: GpuconConfig) -> list[str]:
    """Warnings for the operator (config check and the console's start): TLS not verified,
    and a config file holding an inline password that its group or others can read."""
    warnings: list[str] = []
    fleet = config.fleet
    for name, source in (("redis", fleet.redis), ("prometheus", fleet.prometheus)):
        if source is not None and source.insecure_skip_verify:
            warnings.append(f"fleets.{fleet.name}.{name}: {INSECURE_TEXT}")
    path = config.path
    if path is not None and _file_has_inline_secret(config):
        try:
            mode = file_mode(path)
        except OSError:
            mode = 0
        if mode & 0o077:
            warnings.append(
                f"{path} holds a password inline and has mode {mode:04o}: its group or others "
                f"can read it (chmod 600 {path}, or move the password to password_file)"
            )
    return warnings


def _file_has_inline_secret(config: GpuconConfig) -> bool:
    for fleet in config.fleets.values():
        for key, source in (("redis", fleet.redis), ("prometheus", fleet.prometheus)):
            if source is None or config.origin(f"fleets.{fleet.name}.{key}.url") != "file":
                continue
            try:
                if urlsplit(source.url).password:
                    return True
            except ValueError:
                continue
    return False
