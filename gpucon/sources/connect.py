"""The one place a Redis or Prometheus client is built with its credentials and TLS settings.

``RedisAuth`` and ``HttpAuth`` hold what ``gpucon.config.credentials`` resolved from the
config (user, password or token read from a file or the environment, CA bundle, client
certificate). ``redis_client`` and ``prometheus_client`` turn them into the client libraries'
arguments, so the console's sources, the controls, the CLI's planning read and the audit
stream reader all connect the same way. A URL's own userinfo still works (``redis://u:p@h``);
a password given here wins over it. Every secret is registered with ``gpucon.redact`` so no
error that happens to quote it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucon.redact import register_secret


# dataclasses, not msgspec Structs like the model's records: a Struct's repr shows every field,
# and these keep passwords and tokens out of it (repr=False); a few are built per process
@dataclass(frozen=True, slots=True)
class TlsFiles:
    """TLS for ``rediss://`` and ``https://``: a CA bundle, a client certificate and key."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False  # no certificate check at all: loudly warned


@dataclass(frozen=True, slots=True)
class RedisAuth:
    """How to authenticate to Redis (an ACL user, or the default user's ``requirepass``)."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a traceback's locals
    tls: TlsFiles = TlsFiles()

    def __post_init__(self) -> None:
        register_secret(self.password)


@dataclass(frozen=True, slots=True)
class HttpAuth:
    """How to authenticate to Prometheus: basic auth, or a bearer token; and TLS."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    tls: TlsFiles = TlsFiles()

    def __post_init__(self) -> None:
        register_secret(self.password)
        register_secret(self.token)


def redis_kwargs(url: str, auth: RedisAuth | None) -> dict[str, Any]:
    """redis-py's ``from_url`` keyword arguments for ``auth`` (nothing for ``None``)."""
    if auth is None:
        return {}
    kwargs: dict[str, Any] = {}
    if auth.username is not None:
        kwargs["username"] = auth.username
    if auth.password is not None:
        kwargs["password"] = auth.password
    tls = auth.tls
    if url.startswith("rediss://"):
        import ssl

        if tls.insecure_skip_verify:
            kwargs["ssl_cert_reqs"] = ssl.CERT_NONE
            kwargs["ssl_check_hostname"] = False
        else:
            kwargs["ssl_cert_reqs"] = ssl.CERT_REQUIRED
        if tls.ca_file:
            kwargs["ssl_ca_certs"] = tls.ca_file
        if tls.cert_file:
            kwargs["ssl_certfile"] = tls.cert_file
        if tls.key_file:
            kwargs["ssl_keyfile"] = tls.key_file
    return kwargs


def redis_client(
    url: str,
    auth: RedisAuth | None = None,
    *,
    timeout_s: float,
    client_name: str,
    decode_responses: bool = True,
    **extra: Any,
) -> Any:
    """A synchronous ``redis.Redis`` for ``url`` with ``auth``; every IO bounded by
    ``timeout_s``. ``extra`` goes to redis-py as it is (``retry``, ``max_connections``)."""
    import redis

    return redis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        client_name=client_name,
        decode_responses=decode_responses,
        **redis_kwargs(url, auth),
        **extra,
    )


def prometheus_client(url: str, auth: HttpAuth | None, **extra: Any) -> Any:
    """A ``PrometheusConnect`` for ``url`` with basic auth or a bearer token, and TLS."""
    import requests
    from prometheus_api_client import PrometheusConnect

    auth = auth or HttpAuth()
    headers = {"Authorization": f"Bearer {auth.token}"} if auth.token else None
    basic = (auth.username or "", auth.password) if auth.password is not None else None
    session = requests.Session()
    tls = auth.tls
    session.verify = False if tls.insecure_skip_verify else (tls.ca_file or True)
    if tls.cert_file:
        session.cert = (tls.cert_file, tls.key_file) if tls.key_file else tls.cert_file
    if tls.insecure_skip_verify:
        import urllib3

        # the config check and the status line already say it, loudly; once is enough
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    return PrometheusConnect(url=url, headers=headers, auth=basic, session=session, **extra)
