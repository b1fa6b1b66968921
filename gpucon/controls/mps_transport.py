"""How MPS commands reach a daemon's machine: this one (subprocess) or a VM over SSH (paramiko).

A transport runs an argument list with some environment and optional stdin, with a timeout,
and says whether a path exists and makes directories there: all ``MpsControl`` and the
restart's server steps need. ``LocalTransport`` runs the program here (no shell).
``SshTransport`` runs it on the VM through one SSH connection (``env K=V argv`` quoted with
``shlex``, since sshd accepts no environment by default); the VM's host key must be in the
configured known_hosts file (an unknown or changed key is refused, never accepted).
Every failure is an ``OSError``/``TimeoutError`` the caller names (``MpsError``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import paramiko


@dataclass(frozen=True, slots=True)
class Ran:
    """What a command did: its exit status and output."""

    returncode: int
    stdout: str
    stderr: str


class Transport(Protocol):
    """Runs commands where a daemon lives."""

    @property
    def where(self) -> str: ...

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float,
    ) -> Ran:
        """Run ``argv``; TimeoutError past ``timeout_s``, FileNotFoundError/OSError when it
        cannot be started."""
        ...

    def exists(self, path: str) -> bool: ...

    def makedirs(self, path: str) -> None: ...

    def close(self) -> None: ...


@dataclass
class LocalTransport:
    """This machine: ``subprocess.run`` with the daemon's environment added to ours."""

    runner: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
    where: str = "local"

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float,
    ) -> Ran:
        full_env = dict(os.environ)
        full_env.update(env or {})
        try:
            done = self.runner(
                list(argv),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=full_env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"no answer within {timeout_s:g}s") from exc
        return Ran(done.returncode, done.stdout or "", done.stderr or "")

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, mode=0o700, exist_ok=True)

    def close(self) -> None:
        """Nothing to close."""


def remote_command(argv: Sequence[str], env: Mapping[str, str] | None) -> str:
    """The shell line sshd runs: ``env K=V ... argv``, every word quoted."""
    words = [f"{k}={v}" for k, v in sorted((env or {}).items())]
    prefix = ["env", *words] if words else []
    return " ".join(shlex.quote(w) for w in [*prefix, *argv])


@dataclass
class SshTransport:
    """A VM over SSH (paramiko): one connection, opened on first use, reused, closed by
    ``close``; commands run one at a time on it."""

    host: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    known_hosts_file: str | None = None
    connect_timeout_s: float = 5.0
    _client: paramiko.SSHClient | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def where(self) -> str:
        user = f"{self.user}@" if self.user else ""
        return f"ssh {user}{self.host}:{self.port}"

    def _connect(self) -> paramiko.SSHClient:
        import paramiko

        if self._client is not None and self._client.get_transport() is not None:
            transport = self._client.get_transport()
            if transport is not None and transport.is_active():
                return self._client
        client = paramiko.SSHClient()
        if self.known_hosts_file:
            client.load_host_keys(self.known_hosts_file)
        # a host whose key is not known is refused: restarting the wrong machine's daemon is
        # worse than not restarting one
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                self.host,
                port=self.port,
                username=self.user,
                key_filename=self.key_file,
                timeout=self.connect_timeout_s,
                banner_timeout=self.connect_timeout_s,
                auth_timeout=self.connect_timeout_s,
                allow_agent=False,
                look_for_keys=self.key_file is None,
            )
        except (paramiko.SSHException, OSError) as exc:
            client.close()
            raise OSError(f"{self.where}: {type(exc).__name__}: {exc}") from exc
        self._client = client
        return client

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float,
    ) -> Ran:
        import paramiko

        with self._lock:
            client = self._connect()
            try:
                chan_in, chan_out, chan_err = client.exec_command(
                    remote_command(argv, env), timeout=timeout_s
                )
                if stdin is not None:
                    chan_in.write(stdin)
                chan_in.channel.shutdown_write()
                out = chan_out.read().decode(errors="replace")
                err = chan_err.read().decode(errors="replace")
                code = chan_out.channel.recv_exit_status()
            except TimeoutError:
                raise
            except paramiko.SSHException as exc:
                raise OSError(f"{self.where}: {exc}") from exc
            except OSError as exc:  # socket.timeout is TimeoutError; others: the link broke
                raise OSError(f"{self.where}: {exc}") from exc
        if code == 127:  # the remote shell's "command not found"
            raise FileNotFoundError(2, f"{argv[0]} not found on {self.where}", argv[0])
        return Ran(code, out, err)

    def exists(self, path: str) -> bool:
        return self.run(["test", "-e", path], timeout_s=self.connect_timeout_s).returncode == 0

    def makedirs(self, path: str) -> None:
        done = self.run(["mkdir", "-p", "-m", "700", path], timeout_s=self.connect_timeout_s)
        if done.returncode != 0:
            raise OSError(f"mkdir {path} on {self.where}: {done.stderr.strip()}")

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
