"""Pure parsing of the command line's values: ``k=v`` pairs, properties files, timestamps,
offset specs. No I/O beyond reading the file a caller names; every failure is a ``UsageError``
whose message is one line for the user.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Iterable

from pyspark_log.cli.errors import UsageError

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

_NAMED_TIMES = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}


def parse_kv(text: str, what: str = "config") -> tuple[str, str]:
    """``key=value`` (the value may hold further ``=``; it may be empty) -> ``(key, value)``."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"{what} {text!r} must look like key=value")
    return key, value


def parse_kv_list(items: Iterable[str] | None, what: str = "config") -> dict[str, str]:
    """Repeated ``key=value`` options -> an ordered dict (a later key wins, as in Kafka's tools)."""
    return dict(parse_kv(item, what) for item in items or ())


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' ``--replica-assignment``: partitions separated by commas, the broker ids of
    one partition by colons (``4:5,5:4`` = partition 0 on 4 then 5, partition 1 on 5 then 4)."""
    lists: list[list[int]] = []
    for number, part in enumerate(text.split(",")):
        try:
            lists.append([int(b) for b in part.split(":")])
        except ValueError:
            raise UsageError(
                f"--replica-assignment {text!r}: partition {number} is {part.strip()!r}; give broker ids"
                " separated by ':' and partitions separated by ',' (e.g. 1:2,2:1)"
            ) from None
    return lists


def parse_headers(items: Iterable[str] | None) -> list[tuple[str, bytes]]:
    """Repeated ``--header k=v`` -> ``[(k, v as UTF-8)]``, in order (header names may repeat)."""
    return [(k, v.encode("utf-8")) for k, v in (parse_kv(item, "header") for item in items or ())]


def parse_properties(text: str) -> dict[str, str]:
    """A Java-style ``.properties`` body as Kafka's ``--command-config`` files are written:
    ``key=value`` or ``key: value`` lines, ``#``/``!`` comments, blank lines ignored, a trailing
    backslash continues a line. Escapes other than line continuation are not interpreted."""
    out: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        seps = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not seps:
            raise UsageError(f"line {number} of the command config is not key=value: {raw.strip()!r}")
        cut = min(seps)
        out[line[:cut].strip()] = line[cut + 1 :].strip()
    if pending:
        raise UsageError(f"the command config ends inside a continued line: {pending!r}")
    return out


def parse_timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date-time (UTC when it names no zone, as
    Kafka's ``--to-datetime`` does): ``1700000000000``, ``2024-05-01``, ``2024-05-01T12:00:00Z``,
    ``2024-05-01T12:00:00.250+02:00``."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        ms = int(value)
        if ms < 0:
            raise UsageError(f"timestamp must be >= 0 ms, not {ms}")
        return ms
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(
            f"timestamp {text!r} is neither milliseconds nor ISO 8601 (e.g. 2024-05-01T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    ms = (when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)
    if ms < 0:
        raise UsageError(f"timestamp {text!r} is before 1970")
    return ms


def parse_time_spec(text: str) -> int:
    """``earliest`` / ``latest`` / ``max-timestamp`` (ListOffsets' special values -2/-1/-3), or a
    timestamp as ``parse_timestamp_ms`` reads it."""
    named = _NAMED_TIMES.get(text.strip().lower())
    if named is not None:
        return named
    try:
        return parse_timestamp_ms(text)
    except UsageError:
        raise UsageError(f"time must be earliest, latest, max-timestamp, epoch ms or ISO 8601, not {text!r}") from None


def format_timestamp_ms(ms: int) -> str:
    """An ISO 8601 UTC rendering of ``ms`` (``-`` for Kafka's "no timestamp", -1)."""
    if ms < 0:
        return "-"
    when = dt.datetime.fromtimestamp(ms / 1000.0, tz=dt.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB`` (binary units, one decimal)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    raise AssertionError("unreachable")


def unescape_separator(text: str) -> str:
    r"""``\t``, ``\n``, ``\\`` in a separator given on the command line (shells make tabs awkward)."""
    out: list[str] = []
    i = 0
    escapes = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\", "0": "\0"}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in escapes:
            out.append(escapes[text[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    if not out:
        raise UsageError("a separator must not be empty")
    return "".join(out)


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an int >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse ``type``: an int >= 1."""
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value
