"""``parse``: ``ast.parse`` for the tests that read the repository's source.

CPython 3.11's AST constructor keeps its recursion-depth counter in state shared by every thread
(CPython issue gh-106905, fixed in 3.12): while another thread parses too — a background thread of
an earlier test formatting a traceback, whose carets ``traceback`` computes with ``ast.parse`` —
a parse may fail with ``SystemError: AST constructor recursion depth mismatch``. The source did
not change, so the parse is simply repeated.
"""

from __future__ import annotations

import ast

ATTEMPTS = 5


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    for _ in range(ATTEMPTS - 1):
        try:
            return ast.parse(source, filename=filename)
        except SystemError:  # gh-106905: another thread parsed at the same moment
            continue
    return ast.parse(source, filename=filename)
