"""Record formats of ``pylog consume`` and the choice of output mode."""

from __future__ import annotations

import io
import json

from pyspark_log.cli.output import Output, bytes_json, record_json, record_line, resolve_mode
from pyspark_log.client import ConsumerRecord, TimestampType


def record(
    key: bytes | None, value: bytes | None, headers: tuple[tuple[str, bytes | None], ...] = ()
) -> ConsumerRecord:
    return ConsumerRecord("events", 2, 41, 1_700_000_000_000, TimestampType.LOG_APPEND_TIME, key, value, headers)


def test_bytes_json_is_text_when_utf8_else_marked_base64() -> None:
    assert bytes_json(b"h\xc3\xa9") == "hé"
    assert bytes_json(b"\xff\x00") == {"base64": "/wA="}
    assert bytes_json(b"") == ""
    assert bytes_json(None) is None


def test_json_record() -> None:
    rec = record(b"k", b"\xff", (("trace", b"abc"), ("empty", None)))
    assert record_json(rec) == {
        "topic": "events",
        "partition": 2,
        "offset": 41,
        "timestamp": 1_700_000_000_000,
        "timestampType": "LogAppendTime",
        "key": "k",
        "value": {"base64": "/w=="},
        "headers": [{"key": "trace", "value": "abc"}, {"key": "empty", "value": None}],
    }
    line = record_line(rec, "json", b"\t")
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line) == record_json(rec)


def test_value_and_key_value_lines_are_raw_bytes_with_null_as_null() -> None:
    assert record_line(record(b"k", b"\xffv"), "value", b"\t") == b"\xffv\n"
    assert record_line(record(b"k", b"v"), "key-value", b"\t") == b"k\tv\n"
    assert record_line(record(None, None), "key-value", b" | ") == b"null | null\n"
    assert record_line(record(None, None), "value", b"\t") == b"null\n"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_mode_defaults_to_table_on_a_terminal_only() -> None:
    assert resolve_mode(None, _Tty()) == "table"
    assert resolve_mode(None, io.StringIO()) == "text"
    assert resolve_mode("json", _Tty()) == "json"


def test_table_prints_cells_literally() -> None:
    stream = io.StringIO()
    Output("table", stream).table(["Name", "N"], [("[bold]x[/bold]", None)], title="T", caption="c=[1]", numeric=["N"])
    text = stream.getvalue()
    assert "[bold]x[/bold]" in text
    assert "c=[1]" in text
    assert " - " in text
