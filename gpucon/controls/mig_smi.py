"""The ``nvidia-smi mig`` executor: a re-slice as the commands an operator would type.

For hosts where gpucon should leave NVML calls to NVIDIA's own tool. Each method builds one
argv (``argv_*``, tested as such) and runs it with a timeout; the listings are read from
nvidia-smi's documented tables (``mig -lgi``: GPU, name, profile id, instance id,
placement start:size; ``mig -lci``: GPU, GPU instance id, name, profile id, instance id).
``nvidia-smi mig -cgi PROFILE:START`` creates a GPU instance at a placement; ``-cci`` with no
profile creates the full-size compute instance. A non-zero exit is a ``MigError`` quoting
what nvidia-smi said.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence

from gpucon.controls.mig import GpuInstance, GpuRef, MigError

Runner = Callable[[Sequence[str], float], tuple[int, str, str]]
SMI = "nvidia-smi"
TIMEOUT_S = 60.0

_LGI_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s+\|")
_LCI_ROW = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s+\|")
_CREATED_GI = re.compile(r"GPU instance ID\s+(\d+)")
_CREATED_CI = re.compile(r"compute instance ID\s+(\d+)")


def run_command(argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MigError(" ".join(argv), f"{type(exc).__name__}: {exc}") from exc
    return done.returncode, done.stdout, done.stderr


def argv_list_gi(gpu: GpuRef) -> list[str]:
    return [SMI, "mig", "-i", str(gpu.index), "-lgi"]


def argv_list_ci(gpu: GpuRef) -> list[str]:
    return [SMI, "mig", "-i", str(gpu.index), "-lci"]


def argv_destroy_ci(gpu: GpuRef, gi_id: int, ci_id: int) -> list[str]:
    return [SMI, "mig", "-i", str(gpu.index), "-gi", str(gi_id), "-ci", str(ci_id), "-dci"]


def argv_destroy_gi(gpu: GpuRef, gi_id: int) -> list[str]:
    return [SMI, "mig", "-i", str(gpu.index), "-gi", str(gi_id), "-dgi"]


def argv_create_gi(gpu: GpuRef, profile_id: int, start: int | None) -> list[str]:
    spec = str(profile_id) if start is None else f"{profile_id}:{start}"
    return [SMI, "mig", "-i", str(gpu.index), "-cgi", spec]


def argv_create_ci(gpu: GpuRef, gi_id: int) -> list[str]:
    return [SMI, "mig", "-i", str(gpu.index), "-gi", str(gi_id), "-cci"]


def argv_processes(gpu: GpuRef) -> list[str]:
    return [SMI, "-i", str(gpu.index), "--query-compute-apps=pid", "--format=csv,noheader"]


def parse_lgi(text: str, gpu_index: int) -> list[tuple[int, int, int, int]]:
    """(GPU instance id, profile id, start, size) of each row for this GPU."""
    rows = []
    for line in text.splitlines():
        m = _LGI_ROW.match(line)
        if m and int(m.group(1)) == gpu_index:
            rows.append((int(m.group(4)), int(m.group(3)), int(m.group(5)), int(m.group(6))))
    return rows


def parse_lci(text: str, gpu_index: int) -> list[tuple[int, int]]:
    """(GPU instance id, compute instance id) of each row for this GPU."""
    rows = []
    for line in text.splitlines():
        m = _LCI_ROW.match(line)
        if m and int(m.group(1)) == gpu_index:
            rows.append((int(m.group(2)), int(m.group(5))))
    return rows


class SmiMig:
    """MigExecutor through ``nvidia-smi mig`` (``runner`` runs an argv; tests give theirs)."""

    kind = "nvidia-smi"

    def __init__(self, runner: Runner = run_command, timeout_s: float = TIMEOUT_S) -> None:
        self.runner = runner
        self.timeout_s = timeout_s

    def _run(self, argv: list[str], *, empty_ok: bool = False) -> str:
        rc, out, err = self.runner(argv, self.timeout_s)
        said = (err or out).strip()
        if rc != 0 and not (empty_ok and "No " in said and "found" in said):
            raise MigError(" ".join(argv[1:]), said[:400] or f"exit {rc}")
        return out

    def instances(self, gpu: GpuRef) -> tuple[GpuInstance, ...]:
        gis = parse_lgi(self._run(argv_list_gi(gpu), empty_ok=True), gpu.index)
        cis = parse_lci(self._run(argv_list_ci(gpu), empty_ok=True), gpu.index) if gis else []
        return tuple(
            GpuInstance(gi, pid, start, size, tuple(sorted(c for g, c in cis if g == gi)))
            for gi, pid, start, size in sorted(gis, key=lambda r: r[2])
        )

    def processes(self, gpu: GpuRef) -> tuple[int, ...]:
        out = self._run(argv_processes(gpu))
        return tuple(sorted(int(x) for x in re.findall(r"^\s*(\d+)\s*$", out, re.M)))

    def destroy_ci(self, gpu: GpuRef, gi_id: int, ci_id: int) -> None:
        self._run(argv_destroy_ci(gpu, gi_id, ci_id))

    def destroy_gi(self, gpu: GpuRef, gi_id: int) -> None:
        self._run(argv_destroy_gi(gpu, gi_id))

    def create_gi(self, gpu: GpuRef, profile_id: int, start: int | None, size: int | None) -> int:
        out = self._run(argv_create_gi(gpu, profile_id, start))
        m = _CREATED_GI.search(out)
        if m is None:
            raise MigError("create GPU instance", f"no instance id in {out.strip()[:200]!r}")
        return int(m.group(1))

    def create_ci(self, gpu: GpuRef, gi_id: int) -> int:
        out = self._run(argv_create_ci(gpu, gi_id))
        m = _CREATED_CI.search(out)
        if m is None:
            raise MigError("create compute instance", f"no instance id in {out.strip()[:200]!r}")
        return int(m.group(1))
