"""XID error codes: what the common ones mean, to name them in alerts and on screen."""

from __future__ import annotations

# from NVIDIA's XID catalogue
XID_MEANINGS = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement / row remapping",
    64: "ECC page retirement / row remap failure",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


def xid_meaning(code: int) -> str | None:
    return XID_MEANINGS.get(code)
