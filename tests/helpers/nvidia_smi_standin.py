"""A STAND-IN for the ``nvidia-smi mig`` commands a re-slice runs, over the NVML stand-in.

``NvidiaSmiStandIn(nvml_standin)`` is a runner for ``gpucon.controls.mig_smi.SmiMig``: it reads
each argv as nvidia-smi would (``mig -i N -lgi``, ``-lci``, ``-gi G -ci C -dci``, ``-gi G -dgi``,
``-cgi PROFILE:START``, ``-gi G -cci``, ``--query-compute-apps=pid``), applies it to the NVML
stand-in (so the same placement and occupancy rules refuse it) and answers in nvidia-smi's
documented output forms, exit status non-zero with its message when refused. It keeps every
argv it was given. Not nvidia-smi: no binary is run.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucon.controls.mig import GpuRef, MigError, NvmlMig
from tests.helpers.nvml_mig_standin import NvmlMigStandIn

_RULE = "+" + "-" * 55 + "+"


class NvidiaSmiStandIn:
    def __init__(self, nvml: NvmlMigStandIn, host: str = "h", index: int = 0) -> None:
        self.nvml = nvml
        self.mig = NvmlMig(nvml)
        self.gpu = GpuRef(host, index, nvml.uuid)
        self.argvs: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        args = list(argv)
        self.argvs.append(args)
        try:
            return 0, self._answer(args[1:]), ""
        except MigError as exc:
            return 1, "", f"Unable to do {' '.join(args[1:])}: {exc}\n"

    def _opt(self, args: list[str], flag: str) -> int:
        return int(args[args.index(flag) + 1])

    def _answer(self, args: list[str]) -> str:
        if any(a.startswith("--query-compute-apps=") for a in args):
            return "".join(f"{pid}\n" for pid in self.mig.processes(self.gpu))
        if args[:1] != ["mig"] or self._opt(args, "-i") != self.gpu.index:
            raise MigError(" ".join(args), "No devices were found")
        if "-lgi" in args:
            return self._list_gi()
        if "-lci" in args:
            return self._list_ci()
        if "-dci" in args:
            gi, ci = self._opt(args, "-gi"), self._opt(args, "-ci")
            self.mig.destroy_ci(self.gpu, gi, ci)
            return (
                f"Successfully destroyed compute instance ID  {ci} from GPU  0 "
                f"GPU instance ID  {gi}\n"
            )
        if "-dgi" in args:
            gi = self._opt(args, "-gi")
            self.mig.destroy_gi(self.gpu, gi)
            return f"Successfully destroyed GPU instance ID  {gi} from GPU  0\n"
        if "-cgi" in args:
            spec = args[args.index("-cgi") + 1]
            profile_id, _, start_text = spec.partition(":")
            profile = next(p for p in self.nvml.table.profiles if p.profile_id == int(profile_id))
            start = int(start_text) if start_text else profile.starts[0]
            size = profile.size_at(start) or 0
            gi = self.mig.create_gi(self.gpu, int(profile_id), start, size)
            return (
                f"Successfully created GPU instance ID  {gi} on GPU  0 using profile "
                f"MIG {profile.name} (ID  {profile_id})\n"
            )
        if "-cci" in args:
            gi = self._opt(args, "-gi")
            ci = self.mig.create_ci(self.gpu, gi)
            return (
                f"Successfully created compute instance ID  {ci} on GPU  0 GPU instance ID  {gi}\n"
            )
        raise MigError(" ".join(args), "unknown command")

    def _list_gi(self) -> str:
        found = self.mig.instances(self.gpu)
        if not found:
            raise MigError("-lgi", "No GPU instances found: Not Found")
        names = {p.profile_id: p.name for p in self.nvml.table.profiles}
        rows = [
            f"|   0  MIG {names[g.profile_id]:<14}{g.profile_id:>5}{g.gi_id:>9}"
            f"{g.start:>11}:{g.size:<6}|"
            for g in found
        ]
        head = [
            _RULE,
            "| GPU instances:                                        |",
            "| GPU   Name             Profile  Instance   Placement  |",
            "|                          ID       ID       Start:Size |",
            "|" + "=" * 55 + "|",
        ]
        return "\n".join([*head, *rows, _RULE]) + "\n"

    def _list_ci(self) -> str:
        found = [(g, ci) for g in self.mig.instances(self.gpu) for ci in g.ci_ids]
        if not found:
            raise MigError("-lci", "No compute instances found: Not Found")
        names = {p.profile_id: p.name for p in self.nvml.table.profiles}
        rows = [
            f"|   0{g.gi_id:>7}       MIG {names[g.profile_id]:<14}{0:>5}{ci:>9}"
            f"{0:>11}:{g.size:<6}|"
            for g, ci in found
        ]
        return "\n".join([_RULE, "| Compute instances: |", *rows, _RULE]) + "\n"
