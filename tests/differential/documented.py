"""The differences docs/compatibility.md declares, read from its section "Differences found by the
differential tier": one markdown table per ``####`` heading, parsed into rows of cells.

The tests compute the differences they observe and compare them with these rows both ways: an
undocumented difference fails, and so does a documented one that is gone (the list stays true).
A failure prints the rows to add or remove, ready to paste.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

COMPATIBILITY = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
SECTION = "### Differences found by the differential tier"


def tables(path: Path = COMPATIBILITY) -> dict[str, list[list[str]]]:
    """``{#### heading: [row cells]}`` of the section (header and separator rows dropped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index(SECTION)
    except ValueError:
        return {}
    out: dict[str, list[list[str]]] = {}
    heading = ""
    seen_header = False
    for line in lines[start + 1 :]:
        if line.startswith(("## ", "### ")):
            break
        if line.startswith("#### "):
            heading, seen_header = line[5:].strip(), False
            out.setdefault(heading, [])
            continue
        if not line.startswith("|") or not heading:
            continue
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if not seen_header:
            seen_header = True  # the header row
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the separator row
        out[heading].append(cells)
    return out


def table(heading: str, columns: int) -> list[list[str]]:
    """The rows under ``#### heading``, each cut to its first ``columns`` cells (the last cell,
    the reason, is for readers)."""
    rows = tables().get(heading, [])
    return [row[:columns] for row in rows]


def compare(heading: str, observed: Iterable[tuple[str, ...]], documented: Iterable[tuple[str, ...]]) -> str:
    """A failure message naming undocumented and stale rows of ``heading``; empty when they agree."""
    observed, documented = set(observed), set(documented)
    missing = sorted(observed - documented)
    stale = sorted(documented - observed)
    parts = []
    if missing:
        rows = "\n".join("| " + " | ".join(row) + " | why |" for row in missing)
        parts.append(f"differences not in docs/compatibility.md ({SECTION} / #### {heading}):\n{rows}")
    if stale:
        rows = "\n".join("| " + " | ".join(row) + " |" for row in stale)
        parts.append(f"documented under #### {heading} but no longer observed (remove them):\n{rows}")
    return "\n".join(parts)
