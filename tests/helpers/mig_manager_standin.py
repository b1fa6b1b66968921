"""A STAND-IN for NVIDIA's mig-manager, beside the Kubernetes API stand-in.

The real mig-manager (a GPU operator daemonset) watches its node's ``nvidia.com/mig.config``
label, sets ``nvidia.com/mig.config.state`` to ``pending``, applies the named mig-parted config
from its ConfigMap and sets ``success`` (or ``failed``). This one polls the stand-in's node
objects (every ``poll_s``) and moves the state label the same way: ``pending`` when the config
label changes, then after ``apply_s`` ``success`` for a config it knows, ``failed`` for one it
does not, and never anything for a config in ``stalls`` (stuck in ``pending``, as a node whose
GPUs cannot be reset is). It changes no GPU: there is none.
"""

from __future__ import annotations

import threading
import time

from tests.helpers.kube_standin import KubeStandIn

CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"


class MigManagerStandIn:
    def __init__(
        self,
        kube: KubeStandIn,
        node: str,
        configs: set[str],
        *,
        apply_s: float = 0.3,
        poll_s: float = 0.02,
        stalls: frozenset[str] = frozenset(),
    ) -> None:
        self.kube = kube
        self.node = node
        self.configs = configs
        self.apply_s = apply_s
        self.poll_s = poll_s
        self.stalls = stalls
        self.applied: list[tuple[str, str]] = []  # (config, final state)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mig-manager-standin", daemon=True)
        self._seen = self._labels().get(CONFIG)

    def _labels(self) -> dict[str, str]:
        node = self.kube.nodes.get(self.node) or {}
        return dict((node.get("metadata") or {}).get("labels") or {})

    def _set_state(self, state: str) -> None:
        self.kube.update_node(self.node, {"metadata": {"labels": {STATE: state}}})

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            config = self._labels().get(CONFIG)
            if config == self._seen or config is None:
                continue
            self._seen = config
            self._set_state("pending")
            if config in self.stalls:
                continue
            deadline = time.monotonic() + self.apply_s
            while time.monotonic() < deadline and not self._stop.is_set():
                if self._labels().get(CONFIG) != config:
                    break  # changed again meanwhile: start over with the new one
                time.sleep(self.poll_s)
            else:
                final = "success" if config in self.configs else "failed"
                self._set_state(final)
                self.applied.append((config, final))

    def __enter__(self) -> MigManagerStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
