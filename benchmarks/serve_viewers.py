"""What each browser watching ``gpucon serve`` costs: CPU, memory, Redis and Prometheus reads.

Run: ``.venv/bin/python -m benchmarks.serve_viewers [--seconds 30] [--viewers 1 4 8] [--write]``.

A live fleet on loopback (the round-trips benchmark's): a ``redis-server`` with a registry of
56 backends and two request streams, a ``prometheus`` scraping dcgm-exporter and Triton series
for 8 GPUs (32 slots), and an HTTP server answering every backend's KServe readiness check
(``GET {url}/v2/health/ready``; the backends' URLs point at it). The config reads Redis every
1 s, Prometheus every 5 s, readiness every 0.5 s (the defaults). ``gpucon serve`` runs on it;
N viewers connect as WebSocket clients speaking textual-serve's protocol (the browser's
``resize`` message, then every output frame read as it comes), each at 177×45 cells. After
every viewer has drawn its first frame and 3 s more, for ``--seconds``:

- CPU: user+system time of the server and of every console process under it (/proc), as
  CPU-seconds per minute;
- memory: each console's resident set (VmRSS), and the server's;
- Redis: commands executed (INFO commandstats, less this script's own INFO), per second;
- Prometheus: instant queries answered (its own ``prometheus_http_requests_total``), per s;
- readiness: checks the backends' server answered, per second;
- bytes sent to the browsers, per second and viewer;
- first frame: from opening the WebSocket to the frame with the READ-ONLY badge (the page's
  own load, HTML and textual.js, comes on top: headless Chromium's figure, when it is installed,
  is the median of 3 loads to the drawn wall, measured with Selenium).

``--write`` records the table in benchmarks/RESULTS.md under the section below.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import aiohttp
import httpx
import redis

from benchmarks.results_file import write_section
from benchmarks.round_trips import exposition, fill_redis, query_requests
from gpucon.registry import keys
from tests.helpers.prometheus import MetricsExporter, prometheus_server
from tests.helpers.servers import free_port, redis_server, wait_until

SECTION = "## The wall in a browser: cost per viewer"
GPUS = 8
CLK = os.sysconf("SC_CLK_TCK")
PAGE = 1024 * 1024


@dataclass(frozen=True)
class Row:
    viewers: int
    first_frame_s: float  # median over the viewers
    cpu_total: float  # CPU-s per minute, server and consoles
    cpu_server: float
    rss_console_mib: float  # mean per console
    rss_server_mib: float
    redis_per_s: float
    prom_per_s: float
    ready_per_s: float
    bytes_per_s_viewer: float


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime, stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(p) for p in out.stdout.split()]


class ReadyBackends:
    """One loopback HTTP server answering every backend's readiness check, counting them."""

    def __init__(self) -> None:
        counter = self

        class Handler(BaseHTTPRequestHandler):
            # keep-alive, as a KServe backend (Triton, the lab's) answers
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                counter.checks += 1
                ready = self.path.endswith("/v2/health/ready")
                self.send_response(200 if ready else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.checks = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ReadyBackends:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def point_backends_here(self, redis_url: str) -> None:
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        names: set[str] = client.smembers(keys.BACKENDS)  # type: ignore[assignment]
        for name in names:
            client.hset(keys.backend_key(name), "url", f"http://127.0.0.1:{self.port}/{name}")
        client.close()


def redis_calls(client: redis.Redis) -> int:
    stats: dict[str, dict[str, int]] = client.info("commandstats")  # type: ignore[assignment]
    return sum(int(v["calls"]) for v in stats.values())


class Viewer:
    """One browser, as textual-serve's page speaks to it."""

    def __init__(self) -> None:
        self.bytes = 0
        self.first_frame_s: float | None = None
        self.drawn = asyncio.Event()

    async def watch(self, session: aiohttp.ClientSession, url: str, stop: asyncio.Event) -> None:
        started = time.monotonic()
        seen = b""
        async with session.ws_connect(f"{url}ws?width=177&height=45") as ws:
            await ws.send_json(["resize", {"width": 177, "height": 45}])
            while not stop.is_set():
                try:
                    message = await ws.receive(timeout=0.5)
                except TimeoutError:
                    continue
                if message.type is not aiohttp.WSMsgType.BINARY:
                    if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                        raise RuntimeError(f"viewer closed: {ws.close_code} {message.extra}")
                    continue
                self.bytes += len(message.data)
                if self.first_frame_s is None:
                    seen = seen[-64:] + message.data
                    if b"READ-ONLY" in seen:
                        self.first_frame_s = time.monotonic() - started
                        self.drawn.set()


async def measure(
    url: str,
    server_pid: int,
    count: int,
    seconds: float,
    rc: redis.Redis,
    prom: str,
    backends: ReadyBackends,
) -> Row:
    stop = asyncio.Event()
    viewers = [Viewer() for _ in range(count)]
    async with aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(v.watch(session, url, stop)) for v in viewers]
        await asyncio.wait_for(asyncio.gather(*(v.drawn.wait() for v in viewers)), 60)
        await asyncio.sleep(3.0)  # past start-up
        consoles = children(server_pid)
        assert len(consoles) == count, (consoles, count)
        pids = [server_pid, *consoles]
        cpu0 = {p: cpu_s(p) for p in pids}
        redis0, prom0, ready0 = redis_calls(rc), query_requests(prom), backends.checks
        bytes0 = sum(v.bytes for v in viewers)
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        elapsed = time.monotonic() - t0
        cpu1 = {p: cpu_s(p) for p in pids}
        redis1, prom1 = redis_calls(rc) - 1, query_requests(prom)  # less our own INFO
        ready1 = backends.checks
        sent = sum(v.bytes for v in viewers) - bytes0
        rss = [rss_mib(p) for p in consoles]
        rss_server = rss_mib(server_pid)
        stop.set()
        await asyncio.gather(*tasks)
    per_min = 60.0 / elapsed
    first = [v.first_frame_s for v in viewers if v.first_frame_s is not None]
    return Row(
        viewers=count,
        first_frame_s=statistics.median(first),
        cpu_total=sum(cpu1[p] - cpu0[p] for p in pids) * per_min,
        cpu_server=(cpu1[server_pid] - cpu0[server_pid]) * per_min,
        rss_console_mib=statistics.mean(rss),
        rss_server_mib=rss_server,
        redis_per_s=(redis1 - redis0) / elapsed,
        prom_per_s=(prom1 - prom0) / elapsed,
        ready_per_s=(ready1 - ready0) / elapsed,
        bytes_per_s_viewer=sent / elapsed / count,
    )


def browser_load_s(url: str, repeat: int = 3) -> float | None:
    """Median seconds from asking headless Chromium for the page to the wall drawn."""
    from tests.helpers.browser import MISSING, browser

    if MISSING is not None:
        return None
    times = []
    with browser() as page:
        for _ in range(repeat):
            page.open("about:blank")
            started = time.monotonic()
            page.open(url)
            page.wait_for(lambda t: "READ-ONLY" in t and "BACKEND" in t, what="the wall")
            times.append(time.monotonic() - started)
    return statistics.median(times)


def config_file(directory: Path, redis_url: str, prom_url: str, readiness: bool = True) -> Path:
    path = directory / "config.toml"
    path.write_text(
        "[fleets.bench.redis]\n"
        f'url = "{redis_url}"\n'
        'streams = ["gen:queue", "gen:queue:llm"]\n'
        "[fleets.bench.prometheus]\n"
        f'url = "{prom_url}"\n'
        'rate_window = "4s"\n'
        + ("" if readiness else "[fleets.bench.readiness]\nenabled = false\n")
    )
    return path


def run(
    seconds: float, counts: list[int], *, readiness: bool = True, in_browser: bool = True
) -> tuple[list[Row], float | None]:
    rows: list[Row] = []
    load = None
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "redis").mkdir()
        (tmp / "prom").mkdir()
        with (
            redis_server(tmp / "redis") as redis_url,
            MetricsExporter(exposition(GPUS)) as exporter,
            prometheus_server(tmp / "prom", [exporter.address], scrape_interval_s=2.0) as prom,
            ReadyBackends() as backends,
        ):
            fill_redis(redis_url, GPUS)
            backends.point_backends_here(redis_url)
            port = free_port()
            url = f"http://127.0.0.1:{port}/"
            argv = [sys.executable, "-m", "gpucon.commands.cli", "serve", "--port", str(port)]
            config = config_file(tmp, redis_url, prom, readiness)
            argv += ["--config", str(config), "--max-viewers"]
            argv += [str(max(counts))]
            log = (tmp / "serve.log").open("wb")
            server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            rc = redis.Redis.from_url(redis_url)
            try:
                wait_until(lambda: httpx.get(url, timeout=1).status_code == 200, 20, "serve")
                for count in counts:
                    row = measure(url, server.pid, count, seconds, rc, prom, backends)
                    rows.append(asyncio.run(row))
                    wait_until(lambda: children(server.pid) == [], 15, "consoles to exit")
                    print(format_row(rows[-1]), flush=True)
                load = browser_load_s(url) if in_browser else None
            finally:
                rc.close()
                server.terminate()
                server.wait(timeout=20)
                log.close()
    return rows, load


HEADER = (
    "| viewers | first frame | CPU-s/min, all | of which server | CPU-s/min per viewer "
    "| RSS per console | server RSS | Redis cmds/s | Prometheus queries/s | readiness checks/s "
    "| B/s per viewer |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def format_row(r: Row) -> str:
    return (
        f"| {r.viewers} | {r.first_frame_s * 1000:.0f} ms | {r.cpu_total:.2f} | "
        f"{r.cpu_server:.2f} | {r.cpu_total / r.viewers:.2f} | {r.rss_console_mib:.0f} MiB | "
        f"{r.rss_server_mib:.0f} MiB | {r.redis_per_s:.1f} | {r.prom_per_s:.2f} | "
        f"{r.ready_per_s:.0f} | "
        f"{r.bytes_per_s_viewer:,.0f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--viewers", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    print(HEADER)
    rows, load = run(args.seconds, args.viewers)
    browser = f"{load:.2f} s" if load is not None else "not measured (no chromium)"
    print(f"headless Chromium, page asked for to wall drawn (median of 3): {browser}")
    (quiet,), _ = run(args.seconds, [1], readiness=False, in_browser=False)
    print(f"1 viewer, readiness checks off: {format_row(quiet)}")
    one = rows[0]
    readiness_share = one.cpu_total - quiet.cpu_total
    if args.write:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        load_avg = os.getloadavg()[0]
        text = (
            f"{SECTION}\n\n"
            f"Machine: {platform.node()}, {os.cpu_count()} cores (shared), Python "
            f"{platform.python_version()}; {when}, load average {load_avg:.1f} at the end. "
            f"`python -m benchmarks.serve_viewers --seconds {args.seconds:.0f} --write`: "
            f"`gpucon serve` on a live fleet on loopback (redis-server: 56 backends, 2 "
            f"streams, read every 1 s; Prometheus: 8 GPUs, 32 slots, read every 5 s; each "
            f"backend's readiness checked every 0.5 s against one loopback HTTP server), viewers "
            f"as WebSocket clients speaking textual-serve's protocol at 177x45 cells, measured "
            f"for {args.seconds:.0f} s after all drew their first frame.\n\n"
            f"{HEADER}\n" + "\n".join(format_row(r) for r in rows) + "\n\n"
            f"Page load in headless Chromium (page asked for to the wall drawn, median of 3): "
            f"{browser}.\n\n"
            f"The same with the readiness checks off (`[fleets.NAME.readiness] enabled = false`), "
            f"one viewer:\n\n{HEADER}\n{format_row(quiet)}\n\n"
            f"Each viewer is a whole console, the same process a terminal runs for `gpucon live "
            f"--noc`, with its own reads of every source; the server itself costs next to "
            f"nothing ({rows[-1].cpu_server:.2f} CPU-s/min with "
            f"{rows[-1].viewers} viewers). Here {readiness_share:.1f} of the first row's "
            f"{one.cpu_total:.1f} CPU-s/min are the readiness checks (each backend every 0.5 s, "
            f"a new connection each). Reads grow linearly with viewers: Redis "
            f"{one.redis_per_s:.0f} commands/s, Prometheus {one.prom_per_s:.1f} queries/s and "
            f"{one.ready_per_s:.0f} readiness checks/s per viewer (56 backends every 0.5 s "
            f"would be 112/s: fewer means the checks ran late). Where the machine runs out "
            f"of CPU the consoles fall behind their cadences (the per-viewer rates drop), which "
            f"is what `--max-viewers` (default 4) guards against.\n"
        )
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
