"""``gpucon lab``: a real local stack on loopback, and the integration tests' harness.

Starts ``redis-server`` (or uses a given one), N KServe v2 backend servers registered in the
scheduler registry (a server serving several models registers one backend per model, all at
its url, as a Triton server serving several models does; each server's registration agent
writes its entries again when they are gone, as after a Redis restarted empty: ``agent``),
the reference scheduler, and
``prometheus`` scraping the backends when it is installed; writes a config TOML that
``gpucon --config`` opens. Every child runs in its own process group and ``stop`` ends them
all, whatever state the start reached.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

from gpucon.lab.processes import ManagedProcess, free_port, gpucon_argv, wait_until
from gpucon.lab.registration import BackendRecord, backend_name, register_backends

START_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class LabOptions:
    backends: int = 3
    model: str = "llm"
    # further models every server serves besides ``model`` (one backend each per server)
    more_models: tuple[str, ...] = ()
    service_ms: float = 20.0
    slots: int = 4
    weights: tuple[float, ...] = ()  # per backend; default 1.0 each
    # per backend: SMs of its slot; service time then follows the simulator's model
    sm_counts: tuple[float, ...] = ()
    directory: Path | None = None  # None: a temporary directory, removed on stop
    redis_url: str | None = None  # None: start a redis-server
    prometheus: bool = True  # when the binary is installed
    scheduler: bool = True
    stream: str = "gen:queue"
    group: str = "g1"
    scheduler_args: tuple[str, ...] = ()
    # each backend's registration agent checks its registry entry this often and writes it
    # again when it is gone (a Redis restarted empty); None: no agent
    heartbeat_s: float | None = 2.0

    def __post_init__(self) -> None:
        if not 1 <= self.backends <= 32:
            raise ValueError(f"backends: expected 1..32, got {self.backends}")
        if self.weights and len(self.weights) != self.backends:
            raise ValueError(f"weights: expected {self.backends} values, got {len(self.weights)}")
        if self.sm_counts and len(self.sm_counts) != self.backends:
            raise ValueError(
                f"sm_counts: expected {self.backends} values, got {len(self.sm_counts)}"
            )
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"models: each model once, got {', '.join(self.models)}")
        if self.sm_counts:
            from gpucon.lab.service_time import ServiceTimeModel

            for sms in self.sm_counts:
                for model in self.models:
                    ServiceTimeModel.from_sim(model, sms)  # refuses an unknown model here
        if not self.service_ms >= 0:
            raise ValueError(f"service_ms: expected >= 0, got {self.service_ms}")
        if self.heartbeat_s is not None and not 0.05 <= self.heartbeat_s <= 3600:
            raise ValueError(f"heartbeat_s: expected 0.05..3600 s, got {self.heartbeat_s}")

    @property
    def models(self) -> tuple[str, ...]:
        """Every model each backend server serves."""
        return (self.model, *self.more_models)


@dataclass(frozen=True, slots=True)
class LabBackend:
    """One registered backend: one model on one server (servers may serve several)."""

    name: str
    url: str
    slot: str
    weight: float
    model: str


@dataclass
class LabStack:
    options: LabOptions
    directory: Path = field(init=False)
    redis_url: str = ""
    prometheus_url: str | None = None
    config_path: Path | None = None
    backends: list[LabBackend] = field(default_factory=list)
    processes: list[ManagedProcess] = field(default_factory=list)
    _own_dir: bool = False

    def __post_init__(self) -> None:
        if self.options.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="gpucon-lab-"))
            self._own_dir = True
        else:
            self.directory = self.options.directory
            self.directory.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> LabStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- start ----------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._start_redis()
            self._start_backends()
            self._register()
            if self.options.scheduler:
                self._start_scheduler()
            if self.options.prometheus and shutil.which("prometheus"):
                self._start_prometheus()
            self.config_path = self._write_config()
        except BaseException:
            self.stop()
            raise

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.directory / f"{name}.log")
        self.processes.append(proc)
        proc.start()
        return proc

    def _wait(self, proc: ManagedProcess, check: object, what: str) -> None:
        def up() -> bool:
            if not proc.alive():
                raise RuntimeError(f"{what} exited; log:\n{proc.log_tail()}")
            return bool(check() if callable(check) else check)

        try:
            wait_until(up, START_TIMEOUT_S, what)
        except TimeoutError as exc:
            raise RuntimeError(f"{exc}; log:\n{proc.log_tail()}") from None

    def _start_redis(self) -> None:
        if self.options.redis_url:
            self.redis_url = self.options.redis_url
            return
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        port = free_port()
        data = self.directory / "redis"
        data.mkdir(exist_ok=True)
        argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                "--appendonly", "no", "--dir", str(data), "--protected-mode", "yes"]  # fmt: skip
        proc = self._spawn("redis", argv)
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0)
        try:
            self._wait(proc, client.ping, "redis-server")
        finally:
            client.close()

    def _start_backends(self) -> None:
        o = self.options
        started: list[tuple[ManagedProcess, list[LabBackend]]] = []
        for i in range(o.backends):
            name, port = f"lab-b{i}", free_port()
            weight = o.weights[i] if o.weights else 1.0
            timing = (
                ["--sms", repr(o.sm_counts[i])]
                if o.sm_counts
                else ["--service-ms", repr(o.service_ms), "--slots", str(o.slots)]
            )
            # with SM counts: MIG slices, three to an A100; without: whole GPUs
            slot = f"lab/gpu{i // 3}/gi{i % 3 + 1}" if o.sm_counts else f"lab/gpu{i}"
            agent = (
                []
                if o.heartbeat_s is None
                else ["--register", self.redis_url, "--slot", slot, "--weight", repr(weight),
                      "--heartbeat", repr(o.heartbeat_s)]
            )  # fmt: skip
            argv = gpucon_argv(
                "backend", "--port", str(port), "--name", name,
                "--model", ",".join(o.models), *timing, "--seed", str(i), *agent,
            )  # fmt: skip
            proc = self._spawn(name, argv)
            url = f"http://127.0.0.1:{port}"
            served = [
                LabBackend(backend_name(name, m, len(o.models)), url, slot, weight, m)
                for m in o.models
            ]
            started.append((proc, served))
        with httpx.Client(timeout=1.0) as http:
            for proc, served in started:
                ready = f"{served[0].url}/v2/health/ready"
                self._wait(proc, lambda u=ready: http.get(u).status_code == 200, proc.name)
                self.backends.extend(served)

    def _register(self) -> None:
        client = redis.Redis.from_url(self.redis_url)
        try:
            records = [
                BackendRecord(b.name, b.url, b.model, b.slot, b.weight) for b in self.backends
            ]
            register_backends(client, records)
        finally:
            client.close()

    def _start_scheduler(self) -> None:
        o = self.options
        argv = gpucon_argv(
            "scheduler", "--redis", self.redis_url, "--stream", o.stream, "--group", o.group,
            "--consumer", "lab-scheduler", *o.scheduler_args,
        )  # fmt: skip
        proc = self._spawn("scheduler", argv)
        client = redis.Redis.from_url(self.redis_url, decode_responses=True)

        def group_exists() -> bool:
            groups = client.xinfo_groups(o.stream)
            return any(g["name"] == o.group for g in groups)

        try:
            self._wait(proc, group_exists, "scheduler")
        finally:
            client.close()

    def _start_prometheus(self) -> None:
        binary = shutil.which("prometheus")
        assert binary is not None
        port = free_port()
        # one target per server, however many models it serves
        targets = list(dict.fromkeys(b.url.removeprefix("http://") for b in self.backends))
        config = self.directory / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: triton\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        argv = [binary, f"--config.file={config}", f"--storage.tsdb.path={self.directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]  # fmt: skip
        proc = self._spawn("prometheus", argv)
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=1.0) as http:
            self._wait(proc, lambda: http.get(f"{url}/-/ready").status_code == 200, "prometheus")
        self.prometheus_url = url

    def _write_config(self) -> Path:
        o = self.options
        lines = [
            "# written by gpucon lab: the local stack on loopback",
            'fleet = "lab"',
            f"audit_path = {json.dumps(str(self.directory / 'audit.jsonl'))}",
            "",
            "[fleets.lab.redis]",
            f"url = {json.dumps(self.redis_url)}",
            f"streams = [{json.dumps(o.stream)}]",
            f"group = {json.dumps(o.group)}",
        ]
        if self.prometheus_url:
            lines += ["", "[fleets.lab.prometheus]", f"url = {json.dumps(self.prometheus_url)}"]
        for b in self.backends:
            lines += [
                "",
                "[[fleets.lab.probe_targets]]",
                f"name = {json.dumps(b.name)}",
                f"url = {json.dumps(b.url)}",
                f"model = {json.dumps(b.model)}",
            ]
        path = self.directory / "config.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    # --- stop -----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every process started, newest first (scheduler before backends and Redis)."""
        for proc in reversed(self.processes):
            proc.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def describe(self) -> list[str]:
        lines = [f"redis       {self.redis_url}"]
        per_server = len(self.options.models)
        for i, b in enumerate(self.backends):
            sms = self.options.sm_counts[i // per_server] if self.options.sm_counts else None
            shown = f", {sms:g} SMs" if sms is not None else ""
            lines.append(f"backend     {b.name:<10} {b.url}  {b.model}{shown}, weight {b.weight:g}")
        if self.options.scheduler:
            lines.append(f"scheduler   stream {self.options.stream}, group {self.options.group}")
        if self.prometheus_url:
            lines.append(f"prometheus  {self.prometheus_url}")
        elif self.options.prometheus:
            lines.append("prometheus  not started: the prometheus binary is not installed")
        else:
            lines.append("prometheus  not started (--no-prometheus)")
        lines.append(f"config      {self.config_path}")
        lines.append(f"logs        {self.directory}")
        return lines
