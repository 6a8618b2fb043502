"""Write each notebook of this folder in Databricks' source format, ``databricks/<name>.py``.

    python notebooks/to_databricks.py           # (re)write them
    python notebooks/to_databricks.py --check   # exit 1 when one is missing or differs

Databricks imports a ``.py`` file whose first line is ``# Databricks notebook source`` as a
notebook: cells are separated by ``# COMMAND ----------`` lines, and a markdown cell is a
``%md`` magic whose lines start with ``# MAGIC``. The ``.ipynb`` files are the source; the
``.py`` files are generated from them (a test checks they are in sync).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "databricks"
HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"


def _magic(lines: list[str]) -> str:
    return "\n".join(f"# MAGIC {line}".rstrip() for line in lines)


def databricks_source(notebook: dict) -> str:
    """The notebook (nbformat 4 as JSON) in Databricks' source format."""
    cells = []
    for cell in notebook["cells"]:
        text = "".join(cell["source"]).rstrip("\n")
        if cell["cell_type"] == "markdown":
            cells.append(_magic(["%md", *text.split("\n")]))
        elif cell["cell_type"] == "code" and text.strip():
            cells.append(text)
    return HEADER + "\n" + f"\n\n{SEPARATOR}\n\n".join(cells) + "\n"


def expected_files() -> dict[Path, str]:
    return {
        OUT / f"{path.stem}.py": databricks_source(json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(HERE.glob("*.ipynb"))
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in expected_files().items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path.name)
        if not check:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if check and stale:
        print(f"out of date (run python notebooks/to_databricks.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
