"""Where the CLI's results go: rich tables for people, text lines or JSON for programs.

``--output`` picks ``table``, ``text`` or ``json``; without it, ``table`` when stdout is a
terminal and ``text`` otherwise (so ``pylog topics list | xargs ...`` gets bare names). The text
forms follow Kafka's tools where one exists (``kafka-topics --describe``'s ``Key: value`` tab
lines, ``kafka-get-offsets``' ``topic:partition:offset``). rich is imported only when a table or
a progress bar is drawn.

The record encodings of ``consume --format json`` live here too (``record_json``): values and
keys are UTF-8 strings when they decode, else ``{"base64": "..."}``; null stays null.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import IO, Any

from pyspark_log.client.types import ConsumerRecord, TimestampType

MODES = ("table", "text", "json")

_TIMESTAMP_TYPE_NAMES = {TimestampType.CREATE_TIME: "CreateTime", TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


def resolve_mode(requested: str | None, stream: IO[str]) -> str:
    """``requested`` if given, else ``table`` on a terminal and ``text`` otherwise."""
    if requested:
        return requested
    isatty = getattr(stream, "isatty", None)
    return "table" if isatty is not None and isatty() else "text"


class Output:
    """The result writer of one command run (``mode`` is one of ``MODES``)."""

    def __init__(self, mode: str, stream: IO[str]) -> None:
        if mode not in MODES:
            raise ValueError(f"output mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.stream = stream
        self._console: Any = None

    @property
    def is_json(self) -> bool:
        return self.mode == "json"

    @property
    def is_table(self) -> bool:
        return self.mode == "table"

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")

    def lines(self, texts: Iterable[str]) -> None:
        for text in texts:
            self.line(text)

    def json(self, value: Any) -> None:
        self.line(json.dumps(value, indent=2, ensure_ascii=False))

    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream, highlight=False, soft_wrap=False)
        return self._console

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[object]],
        *,
        title: str | None = None,
        caption: str | None = None,
        numeric: Iterable[str] = (),
    ) -> None:
        """A rich table between a ``title`` line (rich markup allowed) and a ``caption`` line
        (literal); columns named in ``numeric`` are right-aligned; None cells print as ``-``."""
        from rich.markup import escape
        from rich.table import Table

        right = set(numeric)
        table = Table()
        for name in columns:
            table.add_column(name, justify="right" if name in right else "left", no_wrap=name in right)
        for row in rows:
            table.add_row(*("-" if cell is None else escape(str(cell)) for cell in row))
        console = self.console()
        if title is not None:
            console.print(title)
        console.print(table)
        if caption is not None:
            console.print(escape(caption))


def node_list(ids: Iterable[int]) -> str:
    """Broker ids as Kafka's tools print them: ``1,2,3`` (empty for none)."""
    return ",".join(str(i) for i in ids)


# -- records ------------------------------------------------------------------------------------


def bytes_json(data: bytes | None) -> str | dict[str, str] | None:
    """UTF-8 text when ``data`` decodes, ``{"base64": ...}`` otherwise; None stays None."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def timestamp_type_name(kind: int) -> str:
    try:
        return _TIMESTAMP_TYPE_NAMES[TimestampType(kind)]
    except ValueError:
        return "NoTimestampType"


def record_json(rec: ConsumerRecord) -> dict[str, Any]:
    """One consumed record as ``consume --format json`` prints it."""
    return {
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "timestampType": timestamp_type_name(rec.timestamp_type),
        "key": bytes_json(rec.key),
        "value": bytes_json(rec.value),
        "headers": [{"key": name, "value": bytes_json(value)} for name, value in rec.headers],
    }


def record_line(rec: ConsumerRecord, fmt: str, key_separator: bytes) -> bytes:
    """One consumed record as a line of ``--format value|key-value|json`` (newline included).
    Nulls print as ``null``, as Kafka's console consumer prints them; bytes are written raw."""
    if fmt == "json":
        return json.dumps(record_json(rec), ensure_ascii=False).encode("utf-8") + b"\n"
    value = b"null" if rec.value is None else rec.value
    if fmt == "value":
        return value + b"\n"
    key = b"null" if rec.key is None else rec.key
    return key + key_separator + value + b"\n"
