"""GPU health the NVML source reads besides the numbers: XID errors and why clocks are held down.

XID errors come as NVML events: each GPU whose supported event types include
``nvmlEventTypeXidCriticalError`` is registered on one event set (on the slow path, once per
GPU per NVML session), and every read drains that set with ``nvmlEventSetWait(set, 0)`` — a
timeout of 0 never blocks: no event answers NVML_ERROR_TIMEOUT at once. The last XID code of
each GPU and when this source saw it are kept for the session (NVML gives no event time).
A GPU that cannot be watched (event type not supported, registration refused: e.g. in some
VMs) has ``xid_watched`` False and its XID is "n/a", never "none".

Clock event reasons (``nvmlDeviceGetCurrentClocksEventReasons``; ``...ThrottleReasons`` on
older bindings) are read on every read: thermal slowdown (software or hardware) and power
capping (software power cap or hardware power brake) are bits of one mask.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import msgspec

from gpucon.sources.nvml_calls import Garbage, NvmlCallError, NvmlCalls, describe_nvml_error

# nvmlEventTypeXidCriticalError (nvml.h)
EVENT_XID_CRITICAL = 0x8
# nvmlClocksEventReason* bits (nvml.h; the same values as the older ...ThrottleReason*)
REASON_SW_POWER_CAP = 0x4
REASON_SW_THERMAL = 0x20
REASON_HW_THERMAL = 0x40
REASON_HW_POWER_BRAKE = 0x80
THERMAL_REASONS = REASON_SW_THERMAL | REASON_HW_THERMAL
POWER_REASONS = REASON_SW_POWER_CAP | REASON_HW_POWER_BRAKE
_ERROR_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: no event waiting
# events drained per read at most: a storm of XIDs must not hold the read up
MAX_EVENTS_PER_READ = 64
_REASON_FUNCTIONS = [
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
]
_WAIT_FUNCTIONS = ["nvmlEventSetWait_v2", "nvmlEventSetWait"]


class ClockReasons(msgspec.Struct, frozen=True, gc=False):
    """What the clock event reasons mask says (None: not readable here)."""

    thermal_slowdown: bool | None
    power_capped: bool | None


def read_clock_reasons(calls: NvmlCalls, handle: Any, garbage: Garbage) -> ClockReasons:
    mask = garbage.integer(calls.get(_REASON_FUNCTIONS, handle), "clock event reasons")
    if mask is None:
        return ClockReasons(None, None)
    return ClockReasons(bool(mask & THERMAL_REASONS), bool(mask & POWER_REASONS))


class XidSeen(msgspec.Struct, frozen=True, gc=False):
    code: int
    at: float


class XidWatch:
    """One NVML event set for the XID errors of this host's GPUs, drained without blocking."""

    def __init__(
        self, calls: NvmlCalls, clock: Callable[[], float], label_of: Callable[[Any], Hashable]
    ) -> None:
        self._calls = calls
        self._clock = clock
        self._label_of = label_of
        self._set: Any = None
        # GPU UUID -> whether its XID events are watched (decided once per NVML session)
        self._watched: dict[str, bool] = {}
        self._last: dict[str, XidSeen] = {}
        # GPU UUID -> why its XID events are not watched (shown in recordings and tests)
        self.why_unwatched: dict[str, str] = {}

    def watched(self, uuid: str) -> bool | None:
        return self._watched.get(uuid)

    def last(self, uuid: str) -> XidSeen | None:
        return self._last.get(uuid)

    def register(self, uuid: str, handle: Any) -> None:
        """Watch this GPU's XID errors, once; a refusal leaves it unwatched (n/a)."""
        if uuid in self._watched:
            return
        self._watched[uuid] = False
        try:
            supported = self._calls.get("nvmlDeviceGetSupportedEventTypes", handle)
        except NvmlCallError as exc:
            self.why_unwatched[uuid] = str(exc)
            return
        if not isinstance(supported, int) or not supported & EVENT_XID_CRITICAL:
            self.why_unwatched[uuid] = f"supported event types: {supported!r}"
            return
        if self._set is None:
            try:
                self._set = self._calls.get("nvmlEventSetCreate", remember=False)
            except NvmlCallError as exc:
                self.why_unwatched[uuid] = str(exc)
                return
            if self._set is None:
                self.why_unwatched[uuid] = "nvmlEventSetCreate: not available"
                return
        # called directly, not through NvmlCalls.get: pynvml answers None when it worked,
        # which get() could not tell from "not available"
        register = getattr(self._calls.nvml, "nvmlDeviceRegisterEvents", None)
        if register is None:
            self.why_unwatched[uuid] = "nvmlDeviceRegisterEvents: not in these bindings"
            return
        self._calls.calls += 1
        try:
            register(handle, EVENT_XID_CRITICAL, self._set)
        except Exception as exc:  # refused (e.g. NotSupported in a VM): not watched, n/a
            self.why_unwatched[uuid] = f"nvmlDeviceRegisterEvents: {describe_nvml_error(exc)}"
            return
        self._watched[uuid] = True

    def poll(self, uuid_by_label: Mapping[Hashable, str], garbage: Garbage) -> None:
        """Take every XID event waiting (at most MAX_EVENTS_PER_READ); never blocks."""
        if self._set is None or not any(self._watched.values()):
            return
        for _ in range(MAX_EVENTS_PER_READ):
            try:
                data = self._calls.get(_WAIT_FUNCTIONS, self._set, 0, remember=False)
            except NvmlCallError as exc:
                if exc.code != _ERROR_TIMEOUT:
                    garbage.notes.append(f"XID events: {exc}")
                return
            if data is None:
                return
            event_type = garbage.integer(getattr(data, "eventType", None), "event type")
            if event_type is None or not event_type & EVENT_XID_CRITICAL:
                continue
            code = garbage.integer(getattr(data, "eventData", None), "XID code")
            uuid = uuid_by_label.get(self._label_of(getattr(data, "device", None)))
            if code is None or uuid is None:
                garbage.notes.append(f"XID event for an unknown GPU (code {code})")
                continue
            self._last[uuid] = XidSeen(code, self._clock())

    def forget(self, live: set[str]) -> None:
        for uuid in [u for u in self._last if u not in live]:
            del self._last[uuid]

    def reset(self) -> None:
        """Forget the event set without freeing it (NVML was initialised again)."""
        self._set = None
        self._watched.clear()
        self.why_unwatched.clear()

    def close(self) -> None:
        """Free the event set (NVML is shut down after it)."""
        if self._set is not None:
            with contextlib.suppress(Exception):  # shutting down must not raise
                self._calls.nvml.nvmlEventSetFree(self._set)
        self._set = None
        self._watched.clear()
        self.why_unwatched.clear()
