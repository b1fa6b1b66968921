"""Label and field selectors as the Kubernetes API server reads them, for the stand-in.

Label selectors take the full grammar of ``k8s.io/apimachinery/pkg/labels``: ``k=v``, ``k==v``,
``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists) and ``!k`` (does not exist), joined
by commas (commas inside parentheses belong to the set). ``matchLabels``/``matchExpressions``
(the form a PodDisruptionBudget's selector takes) become the same requirements. Field selectors
take ``field=value``, ``field==value`` and ``field!=value`` over the few fields the API server
indexes for pods and nodes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 BadRequest."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # "!=" and "notin" match a missing key


_SET = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)\s*$")
_EQ = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def _split(text: str) -> list[str]:
    """Split at the commas that are not inside a ``(...)`` set."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str) -> list[Requirement]:
    requirements = []
    for part in _split(text):
        if m := _SET.match(part):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            requirements.append(Requirement(m.group(1), m.group(2), values))
        elif m := _EQ.match(part):
            op = "!=" if m.group(2) == "!=" else "="
            requirements.append(Requirement(m.group(1), op, frozenset({m.group(3)})))
        elif m := _EXISTS.match(part):
            requirements.append(Requirement(m.group(2), "!" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
    return requirements


def from_label_selector_object(selector: Obj) -> list[Requirement]:
    """A ``metav1.LabelSelector`` (matchLabels + matchExpressions) as requirements."""
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    requirements = [
        Requirement(k, "=", frozenset({v})) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expr in selector.get("matchExpressions") or []:
        values = frozenset(expr.get("values") or [])
        requirements.append(Requirement(expr["key"], ops[expr["operator"]], values))
    return requirements


def labels_match(requirements: list[Requirement], obj: Obj) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


_FIELDS: dict[str, Callable[[Obj], Any]] = {
    "metadata.name": lambda o: o["metadata"].get("name"),
    "metadata.namespace": lambda o: o["metadata"].get("namespace"),
    "spec.nodeName": lambda o: o.get("spec", {}).get("nodeName", ""),
    "spec.unschedulable": lambda o: str(bool(o.get("spec", {}).get("unschedulable"))).lower(),
    "status.phase": lambda o: o.get("status", {}).get("phase"),
}


def parse_field_selector(text: str) -> list[tuple[str, bool, str]]:
    """(field, equal?, value) for each term; an unknown field is a 400, as on a real server."""
    terms = []
    for part in _split(text):
        m = _EQ.match(part)
        if m is None or m.group(1) not in _FIELDS:
            raise SelectorError(f'field label not supported: "{part.strip()}"')
        terms.append((m.group(1), m.group(2) != "!=", m.group(3)))
    return terms


def fields_match(terms: list[tuple[str, bool, str]], obj: Obj) -> bool:
    return all((str(_FIELDS[f](obj) or "") == v) == equal for f, equal, v in terms)
