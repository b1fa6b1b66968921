"""A real OpenSSH ``sshd`` on loopback for tests: throwaway host and user keys in a folder.

``sshd_server(folder)`` generates an ed25519 host key and a user key, writes a config that
takes only that key (no passwords, no PAM), starts ``sshd -D -e -f CONFIG`` on a free port
as the current user and yields an ``SshServer`` (port, user, key file, known_hosts file). It
stops the server when the block ends. Skips the test when ``sshd`` is not installed.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.servers import free_port, wait_until

CONFIG = """Port {port}
ListenAddress 127.0.0.1
HostKey {folder}/host_ed25519
PidFile {folder}/sshd.pid
AuthorizedKeysFile {folder}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
LogLevel ERROR
"""


@dataclass(frozen=True, slots=True)
class SshServer:
    port: int
    user: str
    key_file: Path
    known_hosts_file: Path
    folder: Path


def _sshd() -> str | None:
    return shutil.which("sshd") or next(
        (p for p in ("/usr/sbin/sshd", "/sbin/sshd") if os.access(p, os.X_OK)), None
    )


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


@contextmanager
def sshd_server(folder: Path) -> Iterator[SshServer]:
    sshd = _sshd()
    if sshd is None or shutil.which("ssh-keygen") is None:
        pytest.skip("OpenSSH's sshd is not installed here (apt-get install openssh-server)")
    folder.mkdir(parents=True, exist_ok=True)
    _keygen(folder / "host_ed25519")
    _keygen(folder / "user_ed25519")
    (folder / "authorized_keys").write_text((folder / "user_ed25519.pub").read_text())
    port = free_port()
    host_key = (folder / "host_ed25519.pub").read_text().split()
    known = folder / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    config = folder / "sshd_config"
    config.write_text(CONFIG.format(port=port, folder=folder))
    if os.geteuid() == 0:  # root's sshd wants its privilege-separation folder
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = open(folder / "sshd.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdout=log, stderr=log)
    try:
        wait_until(lambda: proc.poll() is None and _listening(port), 10.0, "sshd")
        yield SshServer(port, getpass.getuser(), folder / "user_ed25519", known, folder)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
