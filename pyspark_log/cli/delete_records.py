"""``pylog delete-records`` (Kafka's ``kafka-delete-records.sh``): delete the records of
partitions below an offset (DeleteRecords; the partitions' log start offsets move there).

``--offset-json-file FILE`` is kafka-delete-records' file::

    {"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}

(``version`` may be left out and must be 1 when given; ``offset`` -1 means the high watermark:
everything stored is deleted.) A partition listed twice is refused, as Kafka's tool refuses it.
Output is Kafka's::

    Executing records delete operation
    Records delete operation completed:
    partition: t-0	low_watermark: 10
    partition: t-1	error: <why> (<ERROR_NAME>)

and a failed partition makes the exit code 1 (``pylog: N partition(s) failed``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError
from pyspark_log.cli.progress import progress_bar
from pyspark_log.client.errors import KafkaError
from pyspark_log.client.types import TopicPartition

SUPPORTED_VERSION = 1


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "delete-records", help="delete records of partitions below an offset (moves their log start)", parents=[common]
    )
    p.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}',
    )
    p.set_defaults(handler=run)


def parse_offset_json(text: str, source: str) -> dict[TopicPartition, int]:
    """kafka-delete-records' JSON: ``{tp: offset}``; UsageError naming what is wrong."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{source}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f'{source}: expected an object {{"partitions": [...], "version": 1}}')
    version = doc.get("version", SUPPORTED_VERSION)
    if version != SUPPORTED_VERSION:
        raise UsageError(f"{source}: not supported version field value {version!r} (use 1)")
    items = doc.get("partitions")
    if not isinstance(items, list):
        raise UsageError(f"{source}: missing partitions field (a list of topic/partition/offset objects)")
    offsets: dict[TopicPartition, int] = {}
    duplicates: list[str] = []
    for item in items:
        try:
            tp = TopicPartition(str(item["topic"]), _int(item["partition"]))
            offset = _int(item["offset"])
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(
                f"{source}: every partition needs topic, partition and offset ({item!r}: {exc!r})"
            ) from None
        if tp in offsets:
            duplicates.append(str(tp))
        offsets[tp] = offset
    if duplicates:
        raise UsageError(f"{source}: offset json file contains duplicate topic partitions: {', '.join(duplicates)}")
    if not offsets:
        raise UsageError(f"{source}: the partitions list is empty")
    return offsets


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def run(args: argparse.Namespace, ctx: Context) -> int:
    path = args.offset_json_file
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read --offset-json-file {path!r}: {exc.strerror or exc}") from None
    offsets = parse_offset_json(text, path)
    out = ctx.output
    if not out.is_json:
        out.line("Executing records delete operation")
    results: dict[TopicPartition, int | KafkaError] = {}
    items = list(offsets.items())
    with ctx.admin() as admin, progress_bar("Deleting records", len(items), unit="partitions") as bar:
        for chunk in bar.chunks(items):
            results.update(admin.delete_records(dict(chunk), return_exceptions=True))
            bar.advance(len(chunk))
    failed = {tp: r for tp, r in results.items() if isinstance(r, KafkaError)}
    if out.is_json:
        out.json(
            [
                {"topic": tp.topic, "partition": tp.partition}
                | ({"error": r.code.name, "message": r.message} if isinstance(r, KafkaError) else {"lowWatermark": r})
                for tp, r in results.items()
            ]
        )
    else:
        out.line("Records delete operation completed:")
        for tp, r in results.items():
            if isinstance(r, KafkaError):
                out.line(f"partition: {tp}\terror: {r.message or r.code.name.lower()} ({r.code.name})")
            else:
                out.line(f"partition: {tp}\tlow_watermark: {r}")
    if failed:
        raise CliError(f"{len(failed)} partition(s) failed")
    return 0
