"""Credentials from files and the environment, and TLS, against real servers: a redis-server
with ``requirepass``, an ACL user and a TLS listener (a throwaway CA, client certificates
required), and a Prometheus behind basic auth, over HTTP and HTTPS. Files that others may
read are refused (naming file and mode); the secrets are never printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trustme

from gpucon.commands.cli import main
from gpucon.config import ConfigError, load_config
from gpucon.config.credentials import secret_from_file
from gpucon.model.fleet import Health
from gpucon.session import _live_planning_view, open_session
from gpucon.session.sources import build_sources
from tests.helpers.secured import secured_prometheus, secured_redis

pytestmark = pytest.mark.integration
MARKER = "Cred7zMarkerQ4"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPUCON_CONFIG", "GPUCON_REDIS_URL", "GPUCON_PROMETHEUS_URL", "GPUCON_FLEET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def secret_file(tmp_path: Path, name: str, value: str, mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(value + "\n")
    path.chmod(mode)
    return path


def write_config(tmp_path: Path, body: str, mode: int = 0o600) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(body)
    path.chmod(mode)
    return path


def read(config_path: Path, source: str) -> tuple[Health, str | None]:
    config = load_config(config_path, env={})
    (built,) = [s for s in build_sources(config.fleet) if s.name == source]
    try:
        reading = built.read()
    finally:
        built.close()
    return reading.health, reading.error


def test_a_secret_file_others_can_read_is_refused(tmp_path: Path) -> None:
    loose = secret_file(tmp_path, "pw", MARKER, mode=0o640)
    with pytest.raises(ConfigError) as refused:
        secret_from_file(str(loose), "fleets.x.redis.password_file")
    text = str(refused.value)
    assert str(loose) in text and "0640" in text and "chmod 600" in text
    assert MARKER not in text
    assert secret_from_file(str(secret_file(tmp_path, "ok", MARKER)), "k") == MARKER


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('password_file = "/a"\npassword_env = "B"', "redis.password_env"),
        ('password_env = "not a name"', "redis.password_env"),
    ],
)
def test_config_refuses_ambiguous_credentials(tmp_path: Path, table: str, key: str) -> None:
    path = write_config(tmp_path, f'[fleets.x.redis]\nurl = "redis://h/0"\n{table}\n')
    with pytest.raises(ConfigError, match=key):
        load_config(path, env={})
    path = write_config(
        tmp_path,
        '[fleets.x.prometheus]\nurl = "http://h"\nusername = "u"\ntoken_env = "T"\n',
    )
    with pytest.raises(ConfigError, match="token_file: expected a token or a username"):
        load_config(path, env={})


def test_requirepass_through_password_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with secured_redis(tmp_path, password=MARKER) as server:
        bare = f'[fleets.x.redis]\nurl = "{server.url()}"\ntimeout_s = 1.0\n'
        health, error = read(write_config(tmp_path, bare), "redis")
        assert health is Health.DOWN and error is not None and "Authentication" in error

        pw = secret_file(tmp_path, "redis.pw", MARKER)
        path = write_config(tmp_path, bare + f'password_file = "{pw}"\n')
        assert read(path, "redis")[0] is not Health.DOWN

        assert main(["--config", str(path), "snapshot", "--json"]) == 0
        out = capsys.readouterr()
        assert MARKER not in out.out + out.err
        health_of = {s["name"]: s["health"] for s in json.loads(out.out)["sources"]}
        assert health_of["redis"] != "down"
        assert main(["--config", str(path), "config", "check"]) == 0
        out = capsys.readouterr()
        assert f"# password from file {pw} (mode 0600)" in out.out
        assert MARKER not in out.out + out.err

        pw.chmod(0o644)  # now others can read it: refused, by config check and by the source
        assert main(["--config", str(path), "config", "check"]) == 2
        err = capsys.readouterr().err
        assert f"{pw} has mode 0644" in err and MARKER not in err
        health, error = read(path, "redis")
        assert health is Health.DOWN and error is not None and "mode 0644" in error


def test_acl_user_through_password_env_for_every_redis_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with secured_redis(tmp_path, password=f"{MARKER}-default", user_password=MARKER) as server:
        path = write_config(
            tmp_path,
            f'[fleets.x.redis]\nurl = "{server.url()}"\ntimeout_s = 1.0\n'
            f'username = "{server.user}"\npassword_env = "GPUCON_TEST_REDIS_PW"\n',
        )
        monkeypatch.setenv("GPUCON_TEST_REDIS_PW", MARKER)
        config = load_config(path, env={"GPUCON_TEST_REDIS_PW": MARKER})
        session = open_session(config, read_only=False)
        try:
            # the console's source, the controls (registry writes) and the CLI's planning read
            session.hub.poll_once()
            status = session.hub.tick().sources["redis"]
            assert status.health is not Health.DOWN, status.error
            controls = session.controls()
            assert controls.registry.version() == 0
            client = controls.registry.client  # type: ignore[attr-defined]
            assert client.acl_whoami() == server.user  # as the ACL user, not the default one
            _, version = _live_planning_view(session, full=False)
            assert version == 0
            from gpucon.screens.actions_flow import audit_stream

            stream = audit_stream("live", None, config)
            assert stream is not None and stream.read(10) == []
            stream.close()
        finally:
            session.close()

        monkeypatch.delenv("GPUCON_TEST_REDIS_PW")
        health, error = read(path, "redis")
        assert health is Health.DOWN and error is not None
        assert "GPUCON_TEST_REDIS_PW is not set" in error


def make_tls(tmp_path: Path) -> dict[str, Path]:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("gpucon-console")
    files = {
        "ca": tmp_path / "ca.pem",
        "server_cert": tmp_path / "server.pem",
        "server_key": tmp_path / "server.key",
        "client_cert": tmp_path / "client.pem",
        "client_key": tmp_path / "client.key",
    }
    ca.cert_pem.write_to_path(str(files["ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["server_cert"]))
    server.private_key_pem.write_to_path(str(files["server_key"]))
    client.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    client.private_key_pem.write_to_path(str(files["client_key"]))
    for path in files.values():
        path.chmod(0o600)
    return files


def test_rediss_with_a_test_ca_and_a_client_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tls = make_tls(tmp_path)
    pw = secret_file(tmp_path, "redis.pw", MARKER)
    with secured_redis(
        tmp_path,
        password=MARKER,
        tls=(tls["ca"], tls["server_cert"], tls["server_key"]),
    ) as server:
        base = (
            f'[fleets.x.redis]\nurl = "{server.url(scheme="rediss")}"\ntimeout_s = 2.0\n'
            f'password_file = "{pw}"\n'
            f'cert_file = "{tls["client_cert"]}"\nkey_file = "{tls["client_key"]}"\n'
        )
        health, error = read(write_config(tmp_path, base + f'ca_file = "{tls["ca"]}"\n'), "redis")
        assert health is not Health.DOWN, error
        # the system's CAs do not know the test CA: refused
        health, error = read(write_config(tmp_path, base), "redis")
        assert health is Health.DOWN and error is not None and "certificate" in error.lower()
        # unless told not to check, which is said loudly
        path = write_config(tmp_path, base + "insecure_skip_verify = true\n")
        assert read(path, "redis")[0] is not Health.DOWN
        assert main(["--config", str(path), "config", "check"]) == 0
        out = capsys.readouterr()
        assert "WARNING: fleets.x.redis: insecure_skip_verify = true" in out.err
        assert MARKER not in out.out + out.err


@pytest.mark.parametrize("https", [False, True])
def test_prometheus_behind_basic_auth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, https: bool
) -> None:
    tls = make_tls(tmp_path)
    pw = secret_file(tmp_path, "prom.pw", MARKER)
    with secured_prometheus(
        tmp_path,
        user="grafana",
        password=MARKER,
        tls=(tls["server_cert"], tls["server_key"]) if https else None,
        client_ca=tls["ca"] if https else None,
    ) as url:
        base = f'[fleets.x.prometheus]\nurl = "{url}"\ntimeout_s = 2.0\n'
        if https:
            # without the client certificate the TLS handshake itself is refused
            only_ca = base + f'ca_file = "{tls["ca"]}"\nusername = "grafana"\n'
            only_ca += f'password_file = "{pw}"\n'
            health, error = read(write_config(tmp_path, only_ca), "prometheus")
            assert health is Health.DOWN and error is not None, error
            base += f'ca_file = "{tls["ca"]}"\n'
            base += f'cert_file = "{tls["client_cert"]}"\nkey_file = "{tls["client_key"]}"\n'
        health, error = read(write_config(tmp_path, base), "prometheus")
        assert health is not Health.OK and error is not None and "401" in error, error

        with_file = base + f'username = "grafana"\npassword_file = "{pw}"\n'
        health, error = read(write_config(tmp_path, with_file), "prometheus")
        assert health is not Health.DOWN, error
        assert error is None or "401" not in error

        monkeypatch.setenv("GPUCON_TEST_PROM_PW", "wrong-password")
        with_env = base + 'username = "grafana"\npassword_env = "GPUCON_TEST_PROM_PW"\n'
        health, error = read(write_config(tmp_path, with_env), "prometheus")
        assert health is not Health.OK and error is not None and "401" in error, error


def test_inline_password_in_a_config_others_can_read_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = f'[fleets.x.redis]\nurl = "redis://ops:{MARKER}@127.0.0.1:1/0"\n'
    path = write_config(tmp_path, body, mode=0o644)
    assert main(["--config", str(path), "config", "check"]) == 0
    out = capsys.readouterr()
    assert f"{path} holds a password inline and has mode 0644" in out.err
    assert MARKER not in out.out + out.err
    path.chmod(0o600)
    assert main(["--config", str(path), "config", "check"]) == 0
    assert "holds a password inline" not in capsys.readouterr().err


class BearerGate:
    """Stands in for the reverse proxy that guards a Prometheus with bearer tokens (Prometheus
    itself takes only basic auth): answers the query API with an empty vector when the
    ``Authorization`` header carries the token, 401 otherwise; counts what it saw."""

    def __init__(self, token: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        gate = self
        self.seen: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                said = self.headers.get("Authorization", "")
                gate.seen.append(said)
                ok = said == f"Bearer {token}"
                body = (
                    b'{"status":"success","data":{"resultType":"vector","result":[]}}'
                    if ok
                    else b"Unauthorized\n"
                )
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_prometheus_bearer_token_from_a_file(tmp_path: Path) -> None:
    gate = BearerGate(MARKER)
    try:
        token = secret_file(tmp_path, "prom.token", MARKER)
        path = write_config(
            tmp_path,
            f'[fleets.x.prometheus]\nurl = "{gate.url}"\ntimeout_s = 2.0\ntoken_file = "{token}"\n',
        )
        health, error = read(path, "prometheus")
        assert health is Health.OK, error
        assert gate.seen and set(gate.seen) == {f"Bearer {MARKER}"}
        token.write_text("not-the-token\n")
        health, error = read(path, "prometheus")
        assert health is not Health.OK and error is not None and "401" in error
        assert MARKER not in error
    finally:
        gate.close()


async def test_console_badges_unverified_tls(tmp_path: Path) -> None:
    from gpucon.app import GpuconApp
    from tests.ui.rig import StaticFeed

    path = write_config(
        tmp_path,
        '[fleets.x.redis]\nurl = "rediss://127.0.0.1:1/0"\ninsecure_skip_verify = true\n',
    )
    config = load_config(path, env={})
    app = GpuconApp(StaticFeed(None), mode="live", read_only=True, config=config, autostart=False)
    assert "TLS UNVERIFIED" in app.badges
    from gpucon.config.credentials import credential_warnings

    assert any("insecure_skip_verify" in w for w in credential_warnings(config))
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause(0.2)
        assert "TLS&#160;UNVERIFIED" in app.export_screenshot()


def test_console_start_warns_of_an_inline_password_others_can_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console says it at start (a notification), as ``config check`` does."""
    from gpucon.app import GpuconApp

    built: list[GpuconApp] = []
    monkeypatch.setattr(GpuconApp, "run", lambda self, *a, **k: built.append(self))
    path = write_config(
        tmp_path,
        f'[fleets.x.redis]\nurl = "redis://ops:{MARKER}@127.0.0.1:1/0"\n'
        "insecure_skip_verify = true\n",
        mode=0o604,
    )
    assert main(["--read-only", "--config", str(path)]) == 0
    problems = built[0].startup_problems
    assert any(f"{path} holds a password inline and has mode 0604" in p for p in problems)
    assert any("insecure_skip_verify" in p for p in problems)
    assert all(MARKER not in p for p in problems)


async def test_probe_through_the_queue_uses_the_fleets_credentials(tmp_path: Path) -> None:
    import redis

    from gpucon.controls.probe_live import QueueSender
    from gpucon.sources.connect import RedisAuth

    with secured_redis(tmp_path, password=f"{MARKER}-d", user_password=MARKER) as server:
        # no scheduler answers: the request is queued, then the wait for a reply times out
        anonymous = QueueSender(server.url(), "gen:queue", "m", timeout_s=0.2)
        assert await anonymous.send(0) == "redis: AuthenticationError"
        await anonymous.aclose()
        auth = RedisAuth(username=server.user, password=MARKER)
        sender = QueueSender(server.url(), "gen:queue", "m", timeout_s=0.2, auth=auth)
        assert await sender.send(1) == "timeout"
        await sender.aclose()
        client = redis.Redis.from_url(server.url(user=server.user, password=MARKER))
        assert client.xlen("gen:queue") == 1
        client.close()
