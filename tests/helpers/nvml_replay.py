"""A recorded-NVML stand-in: answers pynvml's functions from a recording, for CI.

This is a STAND-IN, not NVML. ``ReplayNvml(path)`` has the same function names as the pynvml
module; each ``nvml*`` call is answered with what the real library answered to the same call
with the same arguments when the recording was made (tests/helpers/nvml_record.py writes the
format). Repeated calls get the recorded answers in order, then the last one again. Recorded
NVML errors are raised as the real ``pynvml.NVMLError`` subclasses. Constants, structure types
and ``NVMLError`` come from the real pynvml module (importing it needs no GPU).

``tests/fixtures/nvml/h200.json`` was recorded on a real H200; ``a100_mig.json`` is
synthesized by hand (no MIG-enabled card was available to record) and says so in its meta.

Tests can change answers with ``inject`` (an error or a value for a function, optionally
only for given arguments). A call that was never recorded raises ``UnrecordedCall``.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from gpucon.sources.nvml_calls import pointer_address
from tests.helpers.nvml_record import FORMAT_ID, GPM_METRICS_GET, decode_float

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nvml"


class UnrecordedCall(AssertionError):
    """The program under test made an NVML call the recording does not hold."""


class ReplayHandle:
    """An NVML handle of the stand-in: just its recorded label."""

    def __init__(self, label: str) -> None:
        self.nvml_label = label

    def __repr__(self) -> str:
        return f"ReplayHandle({self.nvml_label!r})"


_ANY = "*"


class ReplayNvml:
    """Answers pynvml calls from a recording (a stand-in for the NVML library)."""

    def __init__(self, recording: Path | str | dict[str, Any]) -> None:
        if isinstance(recording, dict):
            document = recording
        else:
            path = Path(recording)
            if not path.is_absolute() and not path.exists():
                path = FIXTURES / path
            document = json.loads(path.read_text())
        if document.get("format") != FORMAT_ID:
            raise ValueError(f"not a {FORMAT_ID} recording: format={document.get('format')!r}")
        self.meta: dict[str, Any] = document.get("meta", {})
        self._answers: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for entry in document["calls"]:
            args = entry["args"]
            if entry["fn"] == GPM_METRICS_GET:  # answered per metric id: see _fill_metrics
                args = [{k: v for k, v in args[0].items() if k != "metrics"}]
            key = (entry["fn"], _args_key(args))
            self._answers.setdefault(key, []).append(entry)
        self._served: dict[tuple[str, str], int] = {}
        self._handles: dict[str, ReplayHandle] = {}
        self._sample_content: dict[int, str] = {}
        self._buffers: list[Any] = []
        self._injected: list[tuple[str, str, Callable[[], Any]]] = []
        self.log: list[str] = []  # names of the functions called, in order

    # --- test controls ----------------------------------------------------------------------
    def inject(
        self,
        fn: str,
        *,
        error: int | None = None,
        value: Any = None,
        raises: BaseException | None = None,
        args: list[Any] | None = None,
    ) -> None:
        """From now on answer ``fn`` (for ``args`` in recorded form, or any) differently."""

        def answer() -> Any:
            if raises is not None:
                raise raises
            if error is not None:
                raise pynvml.NVMLError(error)
            return value

        self._injected.insert(0, (fn, _ANY if args is None else _args_key(args), answer))

    def clear_injections(self) -> None:
        self._injected.clear()

    def replayed(self, fn: str) -> Callable[..., Any]:
        """The stand-in's own answer function for ``fn`` (to wrap in an override)."""
        return lambda *args: self._call(fn, args)

    def override(self, fn: str, function: Callable[..., Any]) -> None:
        """Answer ``fn`` with ``function`` from now on (e.g. a wrapper of ``replayed(fn)``)."""
        self.__dict__[fn] = function

    # --- the pynvml surface -----------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if not name.startswith("nvml"):
            return getattr(pynvml, name)

        return self.replayed(name)

    def _call(self, fn: str, args: tuple[Any, ...]) -> Any:
        self.log.append(fn)
        if fn == GPM_METRICS_GET:
            encoded = [self._metrics_request(args[0])]
        elif fn in ("nvmlGpmSampleGet", "nvmlGpmMigSampleGet", "nvmlGpmSampleFree"):
            encoded = [_encode_arg(a) for a in args[:-1]] + [{"gpm_sample": "any"}]
        else:
            encoded = [_encode_arg(a) for a in args]
        key = (fn, _args_key(encoded))
        for injected_fn, injected_args, answer in self._injected:
            if injected_fn == fn and injected_args in (_ANY, key[1]):
                return answer()
        entries = self._answers.get(key)
        if not entries:
            raise UnrecordedCall(f"{fn}{tuple(encoded)} is not in the recording")
        served = self._served.get(key, 0)
        entry = entries[min(served, len(entries) - 1)]
        self._served[key] = served + 1
        if entry.get("error") is not None:
            raise pynvml.NVMLError(entry["error"])
        result = entry.get("result")
        if fn == "nvmlGpmSampleAlloc":
            return self._new_sample()
        if fn in ("nvmlGpmSampleGet", "nvmlGpmMigSampleGet"):
            held = _encode_arg(args[0])["handle"] + (f"/gi{args[1]}" if len(args) == 3 else "")
            self._sample_content[pointer_address(args[-1]) or 0] = f"gpm:{held}"
            return args[-1]
        if fn == GPM_METRICS_GET:
            return _fill_metrics(args[0], result or {})
        return self._decode(result)

    def _new_sample(self) -> Any:
        buffer = ctypes.create_string_buffer(16)
        self._buffers.append(buffer)
        return ctypes.cast(buffer, pynvml.c_nvmlGpmSample_t)

    def _metrics_request(self, request: Any) -> dict[str, Any]:
        return {
            "sample1": self._sample_content.get(pointer_address(request.sample1) or 0, "?"),
            "sample2": self._sample_content.get(pointer_address(request.sample2) or 0, "?"),
        }

    def _decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._decode(v) for v in value]
        if isinstance(value, dict):
            if "handle" in value:
                label = value["handle"]
                return self._handles.setdefault(label, ReplayHandle(label))
            if "struct" in value:
                fields = {k: self._decode(v) for k, v in value["fields"].items()}
                return SimpleNamespace(**fields)
            return decode_float(value)
        return value


def _encode_arg(value: Any) -> Any:
    if isinstance(value, ReplayHandle):
        return {"handle": value.nvml_label}
    return value


def _args_key(args: list[Any]) -> str:
    return json.dumps(args, sort_keys=True)


def _fill_metrics(request: Any, result: dict[str, Any]) -> Any:
    """Fill each requested metric from the recorded answer for the same pair of samples."""
    by_id = {m[0]: m for m in result["gpm_metrics"]}
    for i in range(request.numMetrics):
        metric = request.metrics[i]
        if metric.metricId not in by_id:
            raise UnrecordedCall(f"{GPM_METRICS_GET}: metric {metric.metricId} not recorded")
        _, code, value = by_id[metric.metricId]
        metric.nvmlReturn = code
        metric.value = decode_float(value)
    return request
