"""Recording a benchmark's figures in benchmarks/RESULTS.md, one ``## `` section each."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(heading: str, text: str, results: Path = RESULTS) -> None:
    """Replace the section that starts with ``heading`` (others' sections stay as they are),
    or append it when RESULTS.md has none yet."""
    current = results.read_text() if results.exists() else "# Benchmark results\n"
    start = current.find(heading)
    if start == -1:
        updated = current.rstrip("\n") + "\n\n" + text
    else:
        end = current.find("\n## ", start + len(heading))
        rest = current[end + 1 :] if end != -1 else ""
        updated = current[:start] + text + ("\n" + rest if rest else "")
    results.write_text(updated)
