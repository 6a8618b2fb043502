"""The repository explains itself: every tracked source and doc file cites public sources by their
public names (Kafka documentation §4.7 "Replication", KIP-595, docs/architecture.md), in English.

Pure file reading: ``git ls-files`` for the list, then each text file's lines. A line fails if it
holds Hangul, a reference to the unpublished translation notes ("seed 000" ... "seed 004"), or to
the unpublished design notes ("DESIGN principle N", the design file's name); the failure names the
file and line (docs/architecture.md, "cite the public source").
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

#: Hangul syllables, jamo and compatibility jamo.
HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")
#: The unpublished sources, spelled so that this file does not match itself.
FORBIDDEN = re.compile(r"(?i:seed)\s+00\d|DESIGN\s+principle|" + "DESIGN" + r"\.md")


def git_dir() -> Path:
    dot_git = ROOT / ".git"
    if dot_git.is_file():  # a worktree: ".git" names the real directory
        return Path(dot_git.read_text(encoding="utf-8").split("gitdir:", 1)[1].strip())
    return dot_git


def tracked_files() -> list[str]:
    """The paths in the git index (format v2/v3), read from the file: unit tests start no processes
    (tests/unit/conftest.py), so no ``git ls-files``. Without a readable v2/v3 index, every file
    under the repository's folders except caches and virtual environments."""
    index = git_dir() / "index"
    data = index.read_bytes() if index.is_file() else b""
    if data[:4] != b"DIRC" or int.from_bytes(data[4:8], "big") not in (2, 3):
        skip = {".git", ".venv", ".refs", "__pycache__", "node_modules", "build", "dist"}
        return [
            p.relative_to(ROOT).as_posix()
            for p in sorted(ROOT.rglob("*"))
            if p.is_file()
            and not skip.intersection(p.relative_to(ROOT).parts)
            and p.relative_to(ROOT).as_posix() != SELF
        ]
    names = []
    position = 12
    for _ in range(int.from_bytes(data[8:12], "big")):
        flags = int.from_bytes(data[position + 60 : position + 62], "big")
        start = position + 62 + (2 if flags & 0x4000 else 0)  # v3 extended flags
        end = data.index(b"\0", start)
        names.append(data[start:end].decode("utf-8"))
        position = position + ((end - position) // 8 + 1) * 8  # 1-8 NUL bytes pad to a multiple of 8
    return [name for name in names if name != SELF]


def offending_lines() -> list[str]:
    found = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if HANGUL.search(line) or FORBIDDEN.search(line):
                found.append(f"{name}:{number}: {line.strip()[:100]}")
        # A citation wrapped over two lines ("seed" at a line's end, "000" on the next).
        for match in FORBIDDEN.finditer(text):
            if "\n" in match.group(0):
                number = text.count("\n", 0, match.start()) + 1
                found.append(f"{name}:{number}: {match.group(0)!r} wrapped over two lines")
    return found


def test_tracked_files_cite_only_public_sources_in_english() -> None:
    found = offending_lines()
    assert not found, "unpublished sources or Korean text in the repository:\n" + "\n".join(found)
