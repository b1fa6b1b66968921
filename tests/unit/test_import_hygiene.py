"""The core never imports Textual or the UI, checked on the AST (lint-imports checks it too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gpucon"
CORE = [
    *("model", "registry", "sources", "controls", "actions", "sim", "config", "session"),
    *("hub.py", "errors.py"),
]
FORBIDDEN = (
    "textual",
    "gpucon.screens",
    "gpucon.widgets",
    "gpucon.app",
    "gpucon.themes",
    "gpucon.messages",
    "gpucon.commands.console",
)


def core_files() -> list[Path]:
    files: list[Path] = []
    for entry in CORE:
        path = PACKAGE / entry
        if path.is_dir():
            files.extend(sorted(path.rglob("*.py")))
        elif path.exists():
            files.append(path)
    return files


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_does_not_import_textual(path: Path) -> None:
    bad = {
        m
        for m in imported_modules(path)
        if m.split(".")[0] == "textual"
        or m in FORBIDDEN
        or any(m.startswith(f + ".") for f in FORBIDDEN)
    }
    assert not bad, f"{path} imports {sorted(bad)}"


def test_checker_catches_a_textual_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from textual.app import App\nimport os\n")
    assert "textual.app" in imported_modules(sample)


def test_importing_every_core_module_loads_no_textual_at_run_time() -> None:
    """Indirect imports too: import the whole core in a fresh interpreter, then look."""
    import subprocess
    import sys

    modules = []
    for path in core_files():
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        modules.append(".".join(parts))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad[:5]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the core loaded {out.stdout.strip()}"
