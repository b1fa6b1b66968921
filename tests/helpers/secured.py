"""Servers that ask for credentials: a real ``redis-server`` with ``requirepass`` and an ACL
user (optionally a TLS listener too), for the tests of reading through credentials."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.servers import free_port, wait_until


@dataclass(frozen=True)
class SecuredRedis:
    port: int
    password: str  # the default user's (requirepass)
    user: str  # an ACL user with every right
    user_password: str
    tls_port: int | None = None

    def url(self, *, user: str = "", password: str = "", scheme: str = "redis") -> str:
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        port = self.tls_port if scheme == "rediss" else self.port
        return f"{scheme}://{auth}127.0.0.1:{port}/0"


@contextlib.contextmanager
def secured_redis(
    tmp_dir: Path,
    *,
    password: str,
    user: str = "ops",
    user_password: str = "",
    tls: tuple[Path, Path, Path] | None = None,  # (ca, server cert, server key)
) -> Iterator[SecuredRedis]:
    """A real redis-server on loopback that refuses anyone without a password."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
    port = free_port()
    lines = [
        "bind 127.0.0.1",
        f"port {port}",
        'save ""',
        "appendonly no",
        f"dir {tmp_dir}",
        f"requirepass {password}",
        f"user {user} on >{user_password or password + '-acl'} ~* &* +@all",
    ]
    tls_port = None
    if tls is not None:
        tls_port = free_port()
        ca, cert, key = tls
        lines += [
            f"tls-port {tls_port}",
            f"tls-cert-file {cert}",
            f"tls-key-file {key}",
            f"tls-ca-cert-file {ca}",
            "tls-auth-clients optional",
        ]
    conf = tmp_dir / "redis-secured.conf"
    conf.write_text("\n".join(lines) + "\n")
    conf.chmod(0o600)
    proc = subprocess.Popen(
        [binary, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=0.5)
    try:
        wait_until(lambda: bool(client.ping()), what="redis-server (requirepass)")
        yield SecuredRedis(port, password, user, user_password or password + "-acl", tls_port)
    finally:
        client.close()
        proc.kill()
        proc.wait(timeout=5)
