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
    port: int | None = None,  # a port a test already pointed a console at
) -> Iterator[SecuredRedis]:
    """A real redis-server on loopback that refuses anyone without a password."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
    port = port or free_port()
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
            "tls-auth-clients yes",  # the console must show its certificate,
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


def bcrypt_hash(password: str) -> str:
    """A bcrypt hash for Prometheus's ``basic_auth_users`` (libxcrypt, through the standard
    library: no extra package)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

        hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))
    if not hashed or not hashed.startswith("$2"):
        raise RuntimeError("this libc's crypt() cannot make bcrypt hashes")
    return hashed


@contextlib.contextmanager
def secured_prometheus(
    tmp_dir: Path,
    *,
    user: str,
    password: str,
    tls: tuple[Path, Path] | None = None,
    client_ca: Path | None = None,
) -> Iterator[str]:
    """A real ``prometheus`` behind basic auth (``--web.config.file``), over HTTPS when
    ``tls`` (server cert, key) is given, requiring a client certificate signed by
    ``client_ca`` when given; yields its URL (without credentials)."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise RuntimeError("prometheus is not installed (apt-get install -y prometheus)")
    port = free_port()
    config = tmp_dir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs: []\n")
    web = tmp_dir / "web.yml"
    lines = ["basic_auth_users:", f"  {user}: '{bcrypt_hash(password)}'"]
    if tls is not None:
        lines += ["tls_server_config:", f"  cert_file: {tls[0]}", f"  key_file: {tls[1]}"]
        if client_ca is not None:
            lines += [
                "  client_auth_type: RequireAndVerifyClientCert",
                f"  client_ca_file: {client_ca}",
            ]
    web.write_text("\n".join(lines) + "\n")
    log = tmp_dir / "prometheus.log"
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--web.config.file={web}",
            f"--storage.tsdb.path={tmp_dir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    def listening() -> bool:
        import socket

        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text()[-500:]}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(listening, timeout_s=30.0, what="prometheus (basic auth)")
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=5)
