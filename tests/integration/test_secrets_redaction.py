"""A marker secret given in URL userinfo (the config file's Redis and Prometheus URLs, and
GPUCON_REDIS_URL) reaches none of the output channels: ``config check``, ``snapshot`` text and
JSON with the sources failing (errors quote the URL) and with a real password-protected Redis
answering, the console's status bar, alerts and notifications, and an action's audit file and
stream."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis

from gpucon.app import GpuconApp
from gpucon.commands.cli import main
from gpucon.config import load_config
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.registry import RedisRegistry
from gpucon.errors import StepFailed
from gpucon.registry import keys
from gpucon.session import open_session
from tests.helpers.secured import secured_redis
from tests.helpers.servers import free_port

pytestmark = pytest.mark.integration
MARKER = "Mk7zSecretQ9"


def write_config(tmp_path: Path, redis_url: str, prom_url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[fleets.x.redis]\nurl = "{redis_url}"\ntimeout_s = 0.5\n'
        f'[fleets.x.prometheus]\nurl = "{prom_url}"\ntimeout_s = 0.5\n'
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def closed_ports() -> tuple[int, int]:
    return free_port(), free_port()  # nothing listens there: every read is refused


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPUCON_CONFIG", "GPUCON_REDIS_URL", "GPUCON_PROMETHEUS_URL", "GPUCON_FLEET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def failing_config(tmp_path: Path, ports: tuple[int, int]) -> Path:
    return write_config(
        tmp_path,
        f"redis://ops:{MARKER}@127.0.0.1:{ports[0]}/0",
        f"http://admin:{MARKER}@127.0.0.1:{ports[1]}/",
    )


def test_config_check_shows_the_user_never_the_password(
    tmp_path: Path,
    closed_ports: tuple[int, int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = failing_config(tmp_path, closed_ports)
    assert main(["--config", str(path), "config", "check"]) == 0
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    assert f"redis://ops:***@127.0.0.1:{closed_ports[0]}/0" in out.out
    assert f"http://admin:***@127.0.0.1:{closed_ports[1]}/" in out.out

    # the environment's URL, named as where the value came from
    monkeypatch.setenv("GPUCON_REDIS_URL", f"redis://envuser:{MARKER}@127.0.0.1:1/0")
    assert main(["--config", str(path), "config", "check"]) == 0
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    assert "redis://envuser:***@127.0.0.1:1/0" in out.out and "# env GPUCON_REDIS_URL" in out.out

    # a URL the config refuses is quoted in the error without its password
    monkeypatch.setenv("GPUCON_REDIS_URL", f"http://envuser:{MARKER}@127.0.0.1:1/0")
    assert main(["--config", str(path), "config", "check"]) == 2
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err and "envuser:***@" in out.err


def test_snapshot_of_failing_sources_quotes_no_password(
    tmp_path: Path, closed_ports: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = failing_config(tmp_path, closed_ports)
    assert main(["--config", str(path), "snapshot", "--json"]) == 1  # every source down
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    doc = json.loads(out.out)
    errors = {s["name"]: s["error"] for s in doc["sources"]}
    # the errors are still there, and still say where: the user and host, not the password
    assert "ConnectionError" in errors["redis"]
    assert f"admin:***@127.0.0.1:{closed_ports[1]}" in errors["prometheus"]

    assert main(["--config", str(path), "snapshot"]) == 1
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    assert "ConnectionError" in out.out


def test_snapshot_through_a_password_protected_redis(
    tmp_path: Path, closed_ports: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    with secured_redis(tmp_path, password=f"{MARKER}-default", user_password=MARKER) as server:
        path = write_config(
            tmp_path,
            server.url(user=server.user, password=MARKER),
            f"http://admin:{MARKER}@127.0.0.1:{closed_ports[1]}/",
        )
        assert main(["--config", str(path), "snapshot", "--json"]) == 0
        out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    doc = json.loads(out.out)
    health = {s["name"]: s["health"] for s in doc["sources"]}
    assert health["redis"] != "down"  # read through the ACL user's password
    assert health["prometheus"] == "down"


async def test_console_status_alerts_and_notifications_hold_no_password(
    tmp_path: Path, closed_ports: tuple[int, int]
) -> None:
    config = load_config(failing_config(tmp_path, closed_ports), env={})
    session = open_session(config, read_only=True)
    app = GpuconApp(
        session.hub, mode="live", read_only=True, config=config, fleet_name=session.fleet_name
    )
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            for _ in range(100):  # until both sources have failed at least once
                await pilot.pause(0.1)
                latest = session.hub.latest
                statuses = latest.sources if latest is not None else {}
                if all(statuses.get(n) and statuses[n].error for n in ("redis", "prometheus")):
                    break
            else:
                raise AssertionError("the sources never reported their errors")
            await pilot.pause(0.3)
            # an error that quotes the URL, notified as a screen would
            app.screen.notify(f"cannot reach {config.fleet.redis.url}", markup=False)  # type: ignore[union-attr]
            await pilot.pause(0.1)
            shown = app.export_screenshot()
            notes = [f"{n.title} {n.message}" for n in app._notifications]
            kept = [s.error or "" for s in session.hub.latest.sources.values()]  # type: ignore[union-attr]
    finally:
        session.close()
    assert any("ConnectionError" in k for k in kept)
    assert any("ops:***@" in n for n in notes)
    for text in (shown, *notes, *kept):
        assert MARKER not in text
    await asyncio.sleep(0)


def test_audit_file_and_stream_after_a_failed_step(tmp_path: Path) -> None:
    with secured_redis(tmp_path, password=MARKER) as server:
        url = server.url(password=MARKER)
        registry = RedisRegistry.from_url(url)
        audit = AuditLog(tmp_path / "audit.jsonl", stream=registry.append_audit, fleet="x")
        failure = StepFailed("set_state", f"ConnectionError: lost {url} mid-step")
        audit.record(
            operator="ann@h",
            event="outcome",
            action="drain",
            target="b1",
            digest="d",
            status="failed",
            text=str(failure),
        )
        client = redis.Redis.from_url(url)
        stream = repr(client.xrange(keys.AUDIT))
        client.close()
        registry.close()
    written = (tmp_path / "audit.jsonl").read_text()
    assert MARKER not in str(failure) and MARKER not in written and MARKER not in stream
    assert "lost redis://:***@" in written
    assert "lost redis://:***@" in stream
