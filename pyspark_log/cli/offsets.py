"""``pylog offsets TOPIC [--time T]``: each partition's offset at a time (Kafka's ``kafka-get-offsets``).

``--time`` is ``latest`` (default: the next offset, i.e. the high watermark), ``earliest`` (the
log start), ``max-timestamp`` (the record with the largest timestamp), or a timestamp in ms or
ISO 8601 (the first offset whose timestamp is at or after it). A partition with no such record
has no offset: empty in text (as ``kafka-get-offsets`` prints it), null in JSON, ``-`` in a table.
"""

from __future__ import annotations

import argparse
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, kafka_error
from pyspark_log.cli.parsing import LATEST, format_timestamp_ms, non_negative_int, parse_time_spec
from pyspark_log.client import KafkaError, TopicPartition


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("offsets", help="partition offsets at a time (like kafka-get-offsets)", parents=[common])
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument(
        "--time",
        type=parse_time_spec,
        default=LATEST,
        metavar="T",
        help="earliest, latest (default), max-timestamp, epoch ms, or ISO 8601",
    )
    p.add_argument("--partition", type=non_negative_int, action="append", metavar="N", help="only N (repeatable)")
    p.set_defaults(handler=offsets)


def offsets(args: argparse.Namespace, ctx: Context) -> int:
    topics = list(dict.fromkeys(args.topics))
    with ctx.admin() as admin:
        try:
            metas = admin.describe_topics(topics)
        except KafkaError as exc:
            failed = getattr(exc, "errors", None) or {}
            raise kafka_error(exc, next(iter(failed), None)) from None
        tps: list[TopicPartition] = []
        for topic in topics:
            existing = sorted(metas[topic].partitions)
            wanted = sorted(set(args.partition)) if args.partition else existing
            for p in wanted:
                if p not in existing:
                    raise CliError(
                        f"topic {topic!r} has no partition {p} (it has {len(existing)}) (UNKNOWN_TOPIC_OR_PARTITION)"
                    )
                tps.append(TopicPartition(topic, p))
        try:
            found = admin.list_offsets(dict.fromkeys(tps, args.time))
        except KafkaError as exc:
            raise kafka_error(exc) from None
    rows: list[dict[str, Any]] = []
    for tp in tps:
        hit = found.get(tp)
        timestamp = None if hit is None or hit.timestamp < 0 else hit.timestamp
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "offset": None if hit is None else hit.offset,
                "timestamp": timestamp,
            }
        )
    out = ctx.output
    if out.is_json:
        out.json(rows)
    elif out.is_table:
        with_ts = args.time != LATEST and any(r["timestamp"] is not None for r in rows)
        columns = ["Topic", "Partition", "Offset"] + (["Timestamp"] if with_ts else [])
        table_rows = [
            (r["topic"], r["partition"], r["offset"])
            + ((None if r["timestamp"] is None else format_timestamp_ms(r["timestamp"]),) if with_ts else ())
            for r in rows
        ]
        out.table(columns, table_rows, numeric=["Partition", "Offset"])
    else:
        out.lines(f"{r['topic']}:{r['partition']}:{'' if r['offset'] is None else r['offset']}" for r in rows)
    return 0
