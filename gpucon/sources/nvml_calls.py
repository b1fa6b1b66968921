"""The one wrapper every NVML call of the NVML source goes through.

``NvmlCalls.get`` calls a pynvml function (or the first of several that exists and that the
driver implements: the fallback across bindings and driver versions), counts the call, and
turns the answers that mean "the hardware or driver cannot say" (NotSupported, NoPermission,
NotFound, NoData, FunctionNotFound, ...) into ``None`` — a typed N/A that the UI shows as
"n/a", never as 0. Such answers are remembered per (function, handle), so a field that is not
supported costs one call per session, not one per read. Any other NVML error (GPU lost,
unknown, timeout) raises ``NvmlCallError`` naming the call, for the source to report.

Also here: the guards that turn garbage (NaN, infinities, negative or out-of-range numbers,
undecodable bytes) into ``None`` and note it.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

# NVML return codes (nvml.h); kept here so the wrapper works with any bindings object
ERROR_UNINITIALIZED = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NO_PERMISSION = 4
ERROR_NOT_FOUND = 6
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_NO_DATA = 21
ERROR_ARGUMENT_VERSION_MISMATCH = 25
ERROR_DEPRECATED = 26

# answers that mean "cannot say here": N/A, not a failure
NOT_AVAILABLE_CODES = frozenset(
    {ERROR_NOT_SUPPORTED, ERROR_NO_PERMISSION, ERROR_NOT_FOUND, ERROR_NO_DATA, ERROR_DEPRECATED}
)
# answers after which the next fallback is tried
FALL_BACK_CODES = frozenset({ERROR_FUNCTION_NOT_FOUND, ERROR_ARGUMENT_VERSION_MISMATCH})

# a function name, or (function name, arguments that replace the call's arguments)
Variant = str | tuple[str, tuple[Any, ...]]


class NvmlCallError(Exception):
    """An NVML call failed in a way that is not "not available": the read is degraded."""

    def __init__(self, function: str, code: int | None, text: str) -> None:
        super().__init__(f"{function}: {text}")
        self.function = function
        self.code = code


def error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def describe_nvml_error(exc: BaseException) -> str:
    """``NVMLError_NotSupported (3)``: the class name and code, without asking the library."""
    code = error_code(exc)
    name = type(exc).__name__
    return f"{name} ({code})" if code is not None else f"{name}: {exc}"


# this module's classes are plain ones, not dataclasses: a live console imports them before its
# first frame, and defining a dataclass (its generated methods compiled) costs ~0.5 ms of that
class NvmlCalls:
    """Calls into an NVML bindings object (pynvml or a stand-in) through one guarded path."""

    __slots__ = ("calls", "label_of", "not_available", "nvml")

    def __init__(self, nvml: Any, label_of: Callable[[Any], Hashable] = id) -> None:
        self.nvml = nvml
        self.label_of = label_of
        self.calls = 0
        # (function, argument labels) -> why it is not available, remembered for the session
        self.not_available: dict[tuple[str, Hashable], str] = {}

    def _is_nvml_error(self, exc: BaseException) -> bool:
        error_type = getattr(self.nvml, "NVMLError", None)
        return isinstance(error_type, type) and isinstance(exc, error_type)

    def get(
        self,
        function_or_variants: str | Sequence[Variant],
        *args: Any,
        extra_na: frozenset[int] = frozenset(),
        remember: bool = True,
    ) -> Any:
        """The first variant's answer, ``None`` when not available; raises NvmlCallError.

        ``function_or_variants`` is one function name, or a list of fallbacks tried in order:
        names (called with ``args``) or (name, own arguments) pairs.
        """
        variants: Sequence[Variant] = (
            [function_or_variants]
            if isinstance(function_or_variants, str)
            else function_or_variants
        )
        names = [v if isinstance(v, str) else v[0] for v in variants]
        memo_key = (names[0], tuple(self._key_part(a) for a in args))
        if memo_key in self.not_available:
            return None
        last_why = "not in these bindings"
        for variant in variants:
            name, call_args = (variant, args) if isinstance(variant, str) else variant
            function = getattr(self.nvml, name, None)
            if function is None:
                continue
            self.calls += 1
            try:
                return function(*call_args)
            except Exception as exc:
                if not self._is_nvml_error(exc):
                    raise NvmlCallError(name, None, describe_nvml_error(exc)) from exc
                code = error_code(exc)
                last_why = describe_nvml_error(exc)
                if code in FALL_BACK_CODES:
                    continue
                if code in NOT_AVAILABLE_CODES or (code is not None and code in extra_na):
                    if remember:
                        self.not_available[memo_key] = last_why
                    return None
                raise NvmlCallError(name, code, last_why) from exc
        if remember:
            self.not_available[memo_key] = last_why
        return None

    def _key_part(self, arg: Any) -> Hashable:
        if arg is None or isinstance(arg, (int, float, str, bytes)):
            return arg
        return self.label_of(arg)

    def reset(self) -> None:
        """Forget what was not available (after re-initialising NVML)."""
        self.not_available.clear()


class Garbage:
    """Notes of values that made no sense; a read with any is degraded."""

    __slots__ = ("notes",)

    def __init__(self) -> None:
        self.notes: list[str] = []

    def number(
        self, value: Any, what: str, low: float = 0.0, high: float = math.inf
    ) -> float | None:
        """``value`` as a float when it is a finite number in [low, high], else None (noted)."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.notes.append(f"{what}: not a number ({type(value).__name__})")
            return None
        number = float(value)
        if not math.isfinite(number) or number < low or number > high:
            self.notes.append(f"{what}: out of range ({value!r})")
            return None
        return number

    def integer(self, value: Any, what: str) -> int | None:
        number = self.number(value, what)
        return None if number is None else int(number)

    def text(self, value: Any, what: str) -> str | None:
        """Decoded text with control characters removed (it reaches the terminal)."""
        if value is None:
            return None
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        if not isinstance(value, str):
            self.notes.append(f"{what}: not text ({type(value).__name__})")
            return None
        cleaned = "".join(ch for ch in value if ch.isprintable()).strip()
        return cleaned or None


def pointer_address(value: Any) -> int | None:
    """The address a ctypes pointer holds, or None when ``value`` is no ctypes pointer."""
    if isinstance(value, ctypes._Pointer):
        return ctypes.cast(value, ctypes.c_void_p).value or 0
    return None


def handle_label(value: Any) -> Hashable:
    """A stable label for an NVML handle: its stand-in label, its address, or its id."""
    label = getattr(value, "nvml_label", None)
    if isinstance(label, str):
        return label
    address = pointer_address(value)
    return address if address is not None else id(value)
