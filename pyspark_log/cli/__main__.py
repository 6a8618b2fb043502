"""``python -m pyspark_log.cli``: the same as the ``pylog`` console script."""

from __future__ import annotations

from pyspark_log.cli.app import main

if __name__ == "__main__":
    raise SystemExit(main())
