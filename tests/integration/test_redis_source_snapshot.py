"""``gpucon snapshot`` on a config naming a real redis-server: JSON shape, text, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from gpucon.commands.cli import main
from gpucon.registry import keys
from tests.helpers.servers import free_port

pytestmark = pytest.mark.integration

KEYS = ["taken_at", "seq", "fleet", "rate_window", "gpus", "slots", "backends", "queues",
        "latency", "nodes", "liveness", "sources", "alerts"]  # fmt: skip


def config_file(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[fleets.lab.redis]\nurl = "{url}"\nstreams = ["gen:queue"]\n')
    return path


def test_snapshot_json_has_a_stable_shape(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = redis.Redis.from_url(redis_url)
    r.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    r.xadd("gen:queue", {"p": "1"})
    r.sadd(keys.BACKENDS, "b1")
    r.hset(keys.backend_key("b1"), mapping={"slot": "h/gpu0", "state": "draining", "weight": "0",
                                         "url": "http://h:8000", "model": "sdxl"})  # fmt: skip
    r.close()
    assert main(["snapshot", "--json", "--config", str(config_file(tmp_path, redis_url))]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == KEYS
    assert doc["fleet"] == "lab"
    (backend,) = doc["backends"]
    assert (backend["name"], backend["state"], backend["weight"]) == ("b1", "draining", 0.0)
    (queue,) = doc["queues"]
    assert (queue["stream"], queue["length"], queue["lag"]) == ("gen:queue", 1, 1)
    sources = {s["name"]: s["health"] for s in doc["sources"]}
    assert sources == {"redis": "ok", "readiness": "ok"}  # readiness checks: on beside redis
    (liveness,) = doc["liveness"]  # its url names no server that answers
    assert (liveness["name"], liveness["serving"], liveness["http_ready"]) == ("b1", False, False)
    # the text view lists a backend even when no source reports its slot
    assert main(["snapshot", "--config", str(config_file(tmp_path, redis_url))]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("b1 "))
    assert row.split()[:4] == ["b1", "h/gpu0", "draining", "0"]


def test_snapshot_text_and_down_source_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"
    assert main(["snapshot", "--config", str(config_file(tmp_path, down))]) == 1
    out = capsys.readouterr().out
    assert "source redis" in out and "down" in out and "ConnectionError" in out
    # as JSON: a source never read is stale (it said "stale": false beside "health": "down")
    assert main(["snapshot", "--json", "--config", str(config_file(tmp_path, down))]) == 1
    sources = {s["name"]: s for s in json.loads(capsys.readouterr().out)["sources"]}
    assert sources["redis"]["health"] == "down" and sources["redis"]["age_s"] is None
    assert sources["redis"]["stale"] is True


def test_snapshot_config_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[fleets.lab.redis]\nurl = "http://nope"\n')
    assert main(["snapshot", "--config", str(path)]) == 2
    assert "fleets.lab.redis.url" in capsys.readouterr().err


def test_snapshot_text_holds_a_backend_without_a_model_slo_to_the_default(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The P95/SLO column says the SLO the console and the alerts use: ``[alerts]
    default_slo_p95_ms`` when the model has none, and a p95 no source reports is n/a."""
    r = redis.Redis.from_url(redis_url)
    r.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    r.sadd(keys.BACKENDS, "b1")
    r.hset(keys.backend_key("b1"), mapping={"slot": "h/gpu0", "state": "active", "weight": "1",
                                         "url": "http://h:8000", "model": "bert"})  # fmt: skip
    r.close()
    path = config_file(tmp_path, redis_url)
    path.write_text(path.read_text() + "\n[alerts]\ndefault_slo_p95_ms = 1800\n")
    assert main(["snapshot", "--config", str(path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("b1 "))
    assert row.split()[:6] == ["b1", "h/gpu0", "active", "1", "n/a", "n/a/1800"]
