"""``pylog log-dirs --describe`` (Kafka's ``kafka-log-dirs``): log dirs, partition sizes, offline dirs.

Flags are kafka-log-dirs': ``--describe`` (required), ``--broker-list 0,1`` (default: every
broker), ``--topic-list t1,t2`` (default: every topic). The output is the tool's: two progress
lines, then one JSON document::

    Querying brokers for log directories information
    Received log directory information from brokers 1
    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data","error":null,
     "partitions":[{"partition":"t-0","size":1234,"offsetLag":0,"isFuture":false}]}]}]}

``error`` is null for an online dir and the Kafka error name (``KAFKA_STORAGE_ERROR``) for an
offline one, where Kafka's tool prints the Java exception class. ``--output json`` prints the
document alone.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import UsageError
from pyspark_log.client.log_dirs import LogDirDescription


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "log-dirs", help="describe the log dirs of brokers: partition sizes, offline dirs", parents=[common]
    )
    p.add_argument("--describe", action="store_true", help="describe the log dirs (the only action)")
    p.add_argument("--broker-list", metavar="0,1", help="brokers to ask (default: every broker)")
    p.add_argument("--topic-list", metavar="T1,T2", help="topics to show (default: every topic)")
    p.set_defaults(handler=run)


def parse_broker_list(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--broker-list must be comma-separated broker ids (e.g. 0,1), not {text!r}") from None
    if not ids:
        raise UsageError("--broker-list names no broker")
    return ids


def parse_topic_list(text: str | None) -> set[str] | None:
    if text is None:
        return None
    topics = {part.strip() for part in text.split(",") if part.strip()}
    if not topics:
        raise UsageError("--topic-list names no topic")
    return topics


def as_document(found: Mapping[int, Mapping[str, LogDirDescription]], topics: set[str] | None) -> dict[str, Any]:
    """kafka-log-dirs' JSON document (``version`` 1), partitions filtered by ``topics``."""
    brokers = []
    for broker in sorted(found):
        dirs = []
        for path, desc in sorted(found[broker].items()):
            partitions = [
                {"partition": str(tp), "size": info.size, "offsetLag": info.offset_lag, "isFuture": info.is_future}
                for tp, info in sorted(desc.replicas.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
                if topics is None or tp.topic in topics
            ]
            error = None if desc.error is None else desc.error.code.name
            dirs.append({"logDir": path, "error": error, "partitions": partitions})
        brokers.append({"broker": broker, "logDirs": dirs})
    return {"version": 1, "brokers": brokers}


def run(args: argparse.Namespace, ctx: Context) -> int:
    if not args.describe:
        raise UsageError("give --describe (kafka-log-dirs' only action)")
    broker_ids = parse_broker_list(args.broker_list)
    topics = parse_topic_list(args.topic_list)
    with ctx.admin() as admin:
        found = admin.describe_log_dirs(broker_ids)
    document = as_document(found, topics)
    if ctx.output.is_json:
        ctx.output.json(document)
    else:
        ctx.output.lines(
            [
                "Querying brokers for log directories information",
                "Received log directory information from brokers " + ",".join(map(str, sorted(found))),
                json.dumps(document, separators=(",", ":")),
            ]
        )
    return 0
