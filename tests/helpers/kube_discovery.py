"""What the stand-in API server says about itself: discovery documents and its TLS identity.

Discovery (``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/policy/v1``,
``/apis/apps/v1``) lists exactly the resources the stand-in serves, with the verbs, short names
and the ``pods/eviction`` subresource (group ``policy``, version ``v1``) that ``kubectl drain``
looks for before it evicts. The TLS identity is a throwaway CA (``trustme``) and a serving
certificate for ``127.0.0.1``/``localhost``, made once per test process.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import trustme

Obj = dict[str, Any]

SERVER_VERSION: Obj = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-standin",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]


def _resource(
    name: str, kind: str, namespaced: bool, verbs: list[str], short: list[str] | None = None
) -> Obj:
    singular = kind.lower() if "/" not in name else ""
    res: Obj = {
        "name": name,
        "singularName": singular,
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    }
    if short:
        res["shortNames"] = short
    return res


def _resource_list(group_version: str, resources: list[Obj]) -> Obj:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


CORE_V1 = _resource_list(
    "v1",
    [
        _resource("nodes", "Node", False, _READ + _WRITE, ["no"]),
        _resource("nodes/status", "Node", False, ["get", "patch", "update"]),
        _resource("pods", "Pod", True, _READ + _WRITE, ["po"]),
        _resource("pods/status", "Pod", True, ["get", "patch", "update"]),
        # kubectl drain takes the Eviction's group and version from here
        {
            **_resource("pods/eviction", "Eviction", True, ["create"]),
            "group": "policy",
            "version": "v1",
        },
    ],
)
POLICY_V1 = _resource_list(
    "policy/v1",
    [
        _resource("poddisruptionbudgets", "PodDisruptionBudget", True, _READ, ["pdb"]),
        _resource("poddisruptionbudgets/status", "PodDisruptionBudget", True, ["get"]),
    ],
)
APPS_V1 = _resource_list(
    "apps/v1", [_resource("daemonsets", "DaemonSet", True, ["get", "list"], ["ds"])]
)
RESOURCE_LISTS = {
    ("api", "v1"): CORE_V1,
    ("apis", "policy/v1"): POLICY_V1,
    ("apis", "apps/v1"): APPS_V1,
}


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str) -> Obj:
    version = {"groupVersion": f"{name}/v1", "version": "v1"}
    return {"name": name, "versions": [version], "preferredVersion": version}


API_GROUPS: Obj = {
    "kind": "APIGroupList",
    "apiVersion": "v1",
    "groups": [_group("apps"), _group("policy")],
}


def discovery_document(path: str, server_address: str) -> Obj | None:
    """The discovery answer for ``path``, or None when it is not a discovery path."""
    parts = path.strip("/").split("/")
    if parts == ["version"]:
        return SERVER_VERSION
    if parts == ["api"]:
        return api_versions(server_address)
    if parts == ["apis"]:
        return API_GROUPS
    if parts == ["api", "v1"]:
        return CORE_V1
    if len(parts) == 3 and parts[0] == "apis":
        return RESOURCE_LISTS.get(("apis", f"{parts[1]}/{parts[2]}"))
    if len(parts) == 2 and parts[0] == "apis":
        return next((g for g in API_GROUPS["groups"] if g["name"] == parts[1]), None)
    return None


@functools.cache
def certificate_authority() -> trustme.CA:
    """One throwaway CA per test process (key generation is the slow part)."""
    return trustme.CA()


@functools.cache
def _server_cert() -> trustme.LeafCert:
    return certificate_authority().issue_cert("127.0.0.1", "localhost")


def server_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _server_cert().configure_cert(ctx)
    return ctx


def ca_pem() -> bytes:
    return certificate_authority().cert_pem.bytes()
