"""``gpucon scheduler``, ``gpucon backend`` and ``gpucon lab``: the lab's command lines.

Only the standard library is imported at module level (the parser is built for every gpucon
command); the services are imported inside ``run``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
import time

from gpucon.redact import redact


def add_arguments(parser: argparse.ArgumentParser, command_name: str) -> None:
    if command_name == "scheduler":
        parser.add_argument("--redis", metavar="URL", required=True, help="Redis URL")
        parser.add_argument("--stream", default="gen:queue", help="request stream (gen:queue)")
        parser.add_argument("--group", default="g1", help="consumer group (g1)")
        parser.add_argument("--consumer", default=None, help="consumer name (default host-pid)")
        parser.add_argument(
            "--concurrency", type=int, default=32, help="requests in flight at most (32)"
        )
        parser.add_argument(
            "--request-timeout", type=float, default=10.0, metavar="S",
            help="seconds a backend may take to answer one request (10)",
        )  # fmt: skip
        parser.add_argument(
            "--claim-min-idle-ms", type=int, default=30_000, metavar="MS",
            help="claim entries pending longer than this (XAUTOCLAIM)",
        )  # fmt: skip
        parser.add_argument(
            "--claim-interval", type=float, default=1.0, metavar="S",
            help="seconds between XAUTOCLAIM sweeps for abandoned entries (1)",
        )  # fmt: skip
    elif command_name == "backend":
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
        parser.add_argument("--port", type=int, required=True, help="port to listen on")
        parser.add_argument("--name", required=True, help="backend name (as registered)")
        parser.add_argument(
            "--model", default="llm", help="model it serves; several: comma-separated (a,b)"
        )
        parser.add_argument(
            "--service-ms", type=float, default=20.0, help="base service time, ms (20)"
        )
        parser.add_argument(
            "--sms", type=float, default=None,
            help="SMs of its slot: service time, slowdown and slots from the simulator's model",
        )  # fmt: skip
        parser.add_argument(
            "--slowdown",
            type=float,
            default=0.15,
            help="service time added per co-running request, relative (0.15)",
        )
        parser.add_argument("--slots", type=int, default=4, help="requests computing at once (4)")
        parser.add_argument(
            "--jitter", type=float, default=0.05, help="relative jitter of the service time (0.05)"
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="jitter seed (default: not reproducible)"
        )
        parser.add_argument(
            "--register", metavar="URL", default=None,
            help="Redis URL of the scheduler registry: keep this backend registered there "
            "(a heartbeat writes its entry again whenever it is gone)",
        )  # fmt: skip
        parser.add_argument("--slot", default=None, help="with --register: its slot id")
        parser.add_argument(
            "--weight", type=float, default=1.0, help="with --register: its weight (1)"
        )
        parser.add_argument(
            "--heartbeat", type=float, default=2.0, metavar="S",
            help="with --register: seconds between registry checks (2)",
        )  # fmt: skip
    elif command_name == "lab":
        parser.add_argument("--backends", type=int, default=3, help="backend servers (1-32)")
        parser.add_argument(
            "--rate", type=float, default=10.0, help="traffic, requests/s (0: none)"
        )
        parser.add_argument("--duration", type=float, default=600.0, help="traffic, seconds")
        parser.add_argument("--count", type=int, default=100_000, help="traffic, max requests")
        parser.add_argument(
            "--model", default="bert-base",
            help="model the backends serve (the simulator's: bert-base, resnet50, sd15, sdxl); "
            "several, comma-separated (sd15,sdxl): each server serves them all, each model "
            "registered as its own backend",
        )  # fmt: skip
        parser.add_argument(
            "--service-ms", type=float, default=None,
            help="fixed service time (default: the simulator's model on A100 3g/2g/1g slices)",
        )  # fmt: skip
        parser.add_argument("--dir", default=None, help="lab directory (default: a temp dir)")
        parser.add_argument(
            "--heartbeat", type=float, default=2.0, metavar="S",
            help="seconds between each backend's registry checks: one whose entry is gone "
            "(Redis restarted empty) registers again (2; 0: never)",
        )  # fmt: skip
        parser.add_argument("--no-prometheus", action="store_true", help="do not start it")


def model_list(text: str) -> tuple[str, ...]:
    """``a,b`` -> ("a", "b"): the models one server serves (at least one, no repeats)."""
    models = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    if not models:
        raise ValueError(f"--model: expected a model name or a comma-separated list, got {text!r}")
    return models


def _stop_event_on_signals(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def run(args: argparse.Namespace) -> int:
    try:
        if args.command == "scheduler":
            return asyncio.run(_run_scheduler(args))
        if args.command == "backend":
            return asyncio.run(_run_backend(args))
        if args.command == "lab":
            return _run_lab(args)
    except ValueError as exc:  # bad arguments: the message names the field
        print(redact(f"gpucon {args.command}: {exc}"), file=sys.stderr)
        return 2
    print(f"gpucon: unknown lab command {args.command!r}", file=sys.stderr)
    return 2


async def _run_scheduler(args: argparse.Namespace) -> int:
    import logging

    from gpucon.lab.scheduler import Scheduler, SchedulerConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    fields: dict[str, object] = {
        "redis_url": args.redis,
        "stream": args.stream,
        "group": args.group,
        "concurrency": args.concurrency,
        "request_timeout_s": args.request_timeout,
        "claim_min_idle_ms": args.claim_min_idle_ms,
        "claim_interval_s": args.claim_interval,
    }
    if args.consumer:
        fields["consumer"] = args.consumer
    config = SchedulerConfig(**fields)  # type: ignore[arg-type]
    scheduler = Scheduler(config)
    stop = _stop_event_on_signals(asyncio.get_running_loop())

    async def report() -> None:
        while not stop.is_set():
            await asyncio.sleep(5.0)
            logging.getLogger("gpucon.scheduler").info(
                "answered %d failed %d dispatched %s",
                scheduler.answered, scheduler.failed, dict(scheduler.dispatched),
            )  # fmt: skip

    reporter = asyncio.create_task(report())
    print(f"scheduler: {config.consumer} reading {config.stream} as group {config.group}",
          flush=True)  # fmt: skip
    try:
        await scheduler.run(stop)
    finally:
        reporter.cancel()
    print(f"scheduler: stopped after {scheduler.answered} answers", flush=True)
    return 0


async def _run_backend(args: argparse.Namespace) -> int:
    from gpucon.lab.backend_server import BackendServer
    from gpucon.lab.service_time import ServiceTimeModel

    models = model_list(args.model)
    if args.sms is not None:
        services = {m: ServiceTimeModel.from_sim(m, args.sms) for m in models}
    else:
        fixed = ServiceTimeModel(args.service_ms, args.slowdown, args.slots, args.jitter)
        services = dict.fromkeys(models, fixed)
    first, *more = models
    server = BackendServer(
        args.name,
        first,
        services[first],
        more_models={m: services[m] for m in more},
        host=args.host,
        port=args.port,
        seed=args.seed,
    )
    loop = asyncio.get_running_loop()
    stop = _stop_event_on_signals(loop)

    def toggle_ready() -> None:
        server.ready = not server.ready

    loop.add_signal_handler(signal.SIGUSR1, toggle_ready)
    await server.start()
    print(f"backend {args.name}: serving {', '.join(models)} on {server.url}", flush=True)
    agent = None
    if args.register:
        agent = asyncio.create_task(_registration_agent(args, models, server.url, stop))
    await stop.wait()
    if agent is not None:
        await agent
    await server.close()
    return 0


async def _registration_agent(
    args: argparse.Namespace, models: tuple[str, ...], url: str, stop: asyncio.Event
) -> None:
    import logging

    from gpucon.lab.agent import RegistrationAgent
    from gpucon.lab.registration import BackendRecord, backend_name

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    slot = args.slot or f"{args.name}/gpu0"
    records = [
        BackendRecord(backend_name(args.name, m, len(models)), url, m, slot, args.weight)
        for m in models
    ]
    await RegistrationAgent(args.register, records, args.heartbeat).run(stop)


def _run_lab(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gpucon.lab.exits import watch_exits
    from gpucon.lab.lab import LabOptions, LabStack

    # A100 MIG slices 3g.40gb, 2g.20gb, 1g.10gb (42, 28, 14 SMs), in turn
    sms = (
        ()
        if args.service_ms is not None
        else tuple((42, 28, 14)[i % 3] for i in range(args.backends))
    )
    first, *more = model_list(args.model)
    options = LabOptions(
        backends=args.backends,
        model=first,
        more_models=tuple(more),
        service_ms=args.service_ms if args.service_ms is not None else 20.0,
        sm_counts=sms,
        directory=Path(args.dir) if args.dir else None,
        prometheus=not args.no_prometheus,
        heartbeat_s=args.heartbeat if args.heartbeat > 0 else None,
    )
    if args.rate < 0 or args.duration <= 0 or args.count < 1:
        print("gpucon lab: --rate must be >= 0, --duration > 0, --count >= 1", file=sys.stderr)
        return 2
    stack = LabStack(options)
    stopping = {"now": False}
    stopped = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if stopping["now"]:
            return  # a second signal must not interrupt the cleanup
        stopping["now"] = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        stack.start()
        print("gpucon lab: started", flush=True)
        for line in stack.describe():
            print(f"  {redact(line)}", flush=True)
        print(f"open it with: gpucon --config {stack.config_path}", flush=True)
        print("Ctrl-C stops everything the lab started.", flush=True)
        watch_exits(stack.processes, lambda line: print(line, flush=True), stopped)
        asyncio.run(_lab_traffic(stack, args))
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stopping["now"] = True
        stopped.set()  # what the lab stops now is not news
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C twice: still clean up
        stack.stop()
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("gpucon lab: stopped everything it started", flush=True)
    return 0


async def _lab_traffic(stack: object, args: argparse.Namespace) -> None:
    import redis.asyncio as aioredis

    from gpucon.lab.lab import LabStack
    from gpucon.lab.traffic import TrafficSpec, generate
    from gpucon.lab.traffic_control import TypedRate, read_lines

    assert isinstance(stack, LabStack)
    # several models: the rate and the count are shared evenly between them
    models = stack.options.models
    specs = [
        TrafficSpec(
            stream=stack.options.stream,
            model=model,
            rate_per_s=args.rate / len(models),
            max_count=max(1, args.count // len(models)),
            max_duration_s=args.duration,
        )
        for model in models
    ]
    typed = TypedRate(args.rate, len(models), asyncio.get_running_loop())
    read_lines(sys.stdin, typed.apply_soon)
    client = aioredis.Redis.from_url(stack.redis_url)
    try:
        state = f"{args.rate:g} req/s" if args.rate > 0 else "paused (--rate 0)"
        print(f"traffic: {state} for at most {args.duration:g} s; type `rate N` or "
              "`spike N SECONDS` here to change it", flush=True)  # fmt: skip
        pairs = zip(specs, typed.controls, strict=True)
        sent = await asyncio.gather(*(generate(client, s, control=c) for s, c in pairs))
        typed.ended = True
        print(f"traffic: done, {sum(len(ids) for ids in sent)} requests sent", flush=True)
    finally:
        await client.aclose()
