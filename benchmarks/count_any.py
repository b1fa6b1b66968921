"""Count ``typing.Any`` in a source tree: how much of the code mypy cannot check.

Two figures, from the AST (comments, strings and import lines never count):

- uses: every ``Any`` name or ``typing.Any`` attribute in the code;
- annotations: parameter, return and variable annotations that mention ``Any`` (each one
  once, however many times it names it).

    python benchmarks/count_any.py gpucon [-v]
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path


def _is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any"
    )


def _mentions_any(annotation: ast.expr) -> bool:
    return any(_is_any(n) for n in ast.walk(annotation))


def _annotations(tree: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None and arg.annotation is not None:
                    found.append(arg.annotation)
            if node.returns is not None:
                found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


@dataclass(frozen=True, slots=True)
class AnyCount:
    path: Path
    uses: int
    annotations: int


def count_file(path: Path) -> AnyCount:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    uses = sum(1 for n in ast.walk(tree) if _is_any(n))
    annotations = sum(1 for a in _annotations(tree) if _mentions_any(a))
    return AnyCount(path, uses, annotations)


def count_tree(root: Path) -> list[AnyCount]:
    return [count_file(p) for p in sorted(root.rglob("*.py"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per file")
    args = parser.parse_args(argv)
    counts = [c for root in args.roots for c in count_tree(root)]
    if args.verbose:
        for c in sorted(counts, key=lambda c: (-c.uses, str(c.path))):
            if c.uses:
                print(f"{c.uses:4d} {c.annotations:4d}  {c.path}")
    uses = sum(c.uses for c in counts)
    annotations = sum(c.annotations for c in counts)
    print(f"Any: {uses} uses, {annotations} annotations, in {len(counts)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
