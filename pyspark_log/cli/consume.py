"""``pylog consume TOPIC``: print records to stdout (Kafka's ``kafka-console-consumer``).

Manual assignment of every partition of TOPIC (or the ``--partition`` ones); no group, nothing
committed. The start is ``--from-beginning``, ``--offset N`` (each partition at N; ``earliest`` /
``latest`` too), ``--from-timestamp`` (the first offset at or after it; the end where there is
none) or, by default, the end (only new records). It stops after ``--max-messages`` records,
after ``--timeout-ms`` with nothing new, or on Ctrl-C, and says "Processed a total of N messages"
on stderr as Kafka's tool does.

``--format value`` writes each value's raw bytes and a newline, ``key-value`` the key, the
separator (tab) and the value; null prints as ``null``. ``--format json`` writes one object per
line (``output.record_json``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError, kafka_error
from pyspark_log.cli.output import record_line
from pyspark_log.cli.parsing import (
    EARLIEST,
    LATEST,
    non_negative_int,
    parse_timestamp_ms,
    positive_int,
    unescape_separator,
)
from pyspark_log.cli.progress import progress_bar
from pyspark_log.client import Consumer, KafkaError, TopicPartition

FORMATS = ("value", "key-value", "json")
_POLL_SLICE_MS = 500.0  # the longest one poll blocks, so Ctrl-C and the idle timeout stay prompt


def _offset(text: str) -> int:
    named = {"earliest": EARLIEST, "latest": LATEST}.get(text.strip().lower())
    return named if named is not None else non_negative_int(text)


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("consume", help="print records of a topic", parents=[common])
    p.add_argument("topic", metavar="TOPIC")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at each partition's first record")
    start.add_argument("--offset", type=_offset, metavar="N", help="start at offset N (or earliest / latest)")
    start.add_argument("--from-timestamp", type=str, metavar="TIME", help="start at ISO 8601 or epoch-ms TIME")
    p.add_argument("--partition", type=non_negative_int, action="append", metavar="N", help="read only N (repeatable)")
    p.add_argument("--max-messages", type=positive_int, metavar="N", help="stop after N records")
    p.add_argument("--timeout-ms", type=positive_int, metavar="N", help="stop after N ms with no new record")
    p.add_argument("--format", choices=FORMATS, default="value", help="output format (default value)")
    p.add_argument("--key-separator", default="\\t", metavar="SEP", help="key-value separator (default \\t)")
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        help="read_uncommitted (default) or read_committed",
    )
    p.set_defaults(handler=consume)


def _partitions(consumer: Consumer, topic: str, wanted: list[int] | None) -> list[TopicPartition]:
    try:
        topics = consumer.list_topics()
    except KafkaError as exc:
        raise kafka_error(exc, topic) from None
    if topic not in topics:
        raise CliError(f"topic {topic!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
    existing = topics[topic]
    chosen = sorted(set(wanted)) if wanted else existing
    missing = [p for p in chosen if p not in existing]
    if missing:
        raise CliError(
            f"topic {topic!r} has no partition {missing[0]} (it has {len(existing)}) (UNKNOWN_TOPIC_OR_PARTITION)"
        )
    return [TopicPartition(topic, p) for p in chosen]


def _start(consumer: Consumer, tps: list[TopicPartition], args: argparse.Namespace, ts_ms: int | None) -> None:
    """Assign ``tps`` at their start offsets. Offsets are looked up before ``assign``, and seeks
    follow it at once, so the first fetch already asks for the right offset (a fetch at the
    default position would long-poll before a later seek took effect)."""
    seeks: dict[TopicPartition, int] = {}
    if ts_ms is not None:
        found = consumer.offsets_for_times(dict.fromkeys(tps, ts_ms))
        seeks = {tp: hit.offset for tp, hit in found.items() if hit is not None}  # the others: the end
    elif args.offset is not None and args.offset >= 0:
        seeks = dict.fromkeys(tps, args.offset)
    consumer.assign(tps)
    for tp, offset in seeks.items():
        consumer.seek(tp, offset)


def consume(args: argparse.Namespace, ctx: Context) -> int:
    ts_ms = None if args.from_timestamp is None else parse_timestamp_ms(args.from_timestamp)
    try:
        separator = unescape_separator(args.key_separator).encode("utf-8")
    except UsageError:
        raise UsageError("--key-separator must not be empty") from None
    earliest = args.from_beginning or args.offset == EARLIEST
    overrides = {
        "auto.offset.reset": "earliest" if earliest else "latest",
        "isolation.level": args.isolation_level,
        "enable.auto.commit": False,
    }
    out = sys.stdout.buffer
    count = 0
    with ctx.consumer(overrides) as consumer, progress_bar(args.topic, args.max_messages, unit="messages") as bar:
        try:
            tps = _partitions(consumer, args.topic, args.partition)
            _start(consumer, tps, args, ts_ms)
            idle_s = None if args.timeout_ms is None else args.timeout_ms / 1000.0
            last_record = time.monotonic()
            while args.max_messages is None or count < args.max_messages:
                wait_ms = _POLL_SLICE_MS
                if idle_s is not None:
                    left_s = last_record + idle_s - time.monotonic()
                    if left_s <= 0:
                        break
                    wait_ms = min(wait_ms, left_s * 1000.0)
                limit = None if args.max_messages is None else args.max_messages - count
                records = consumer.poll(timeout_ms=wait_ms, max_records=limit)
                if not records:
                    continue
                out.write(b"".join(record_line(rec, args.format, separator) for rec in records))
                out.flush()
                count += len(records)
                bar.advance(len(records))
                last_record = time.monotonic()
        except KafkaError as exc:
            raise kafka_error(exc, args.topic) from None
        except KeyboardInterrupt:
            pass
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
