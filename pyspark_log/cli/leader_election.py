"""``pylog leader-election`` (Kafka's ``kafka-leader-election``): preferred or unclean elections.

Kafka documentation §4.7 "Replication" "balance of leadership": after a broker restarts, other replicas lead its
partitions until leadership moves back to the preferred (first) replicas — automatically on the
controller's imbalance check (``auto.leader.rebalance.enable``), or at once with
``--election-type PREFERRED``. ``--election-type UNCLEAN`` gives a partition whose ISR is gone a
leader from its live replicas, losing what only the old ISR had.

Flags are kafka-leader-election's: ``--election-type PREFERRED|UNCLEAN`` (any case) and one of
``--topic T --partition P``, ``--all-topic-partitions``, or ``--path-to-json-file F`` holding
``{"partitions": [{"topic": "t", "partition": 0}, ...]}``. Output is Kafka's wording::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: <why> (<ERROR_NAME>)

and a failure ends with ``pylog: N replica(s) could not be elected`` and exit code 1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError
from pyspark_log.cli.progress import progress_bar
from pyspark_log.client import ElectionType, KafkaError, TopicPartition
from pyspark_log.client.errors import ErrorCode


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "leader-election", help="elect preferred leaders, or unclean leaders for offline partitions", parents=[common]
    )
    p.add_argument(
        "--election-type", required=True, type=election_type, metavar="PREFERRED|UNCLEAN", help="the kind of election"
    )
    p.add_argument("--topic", metavar="T", help="the topic of --partition")
    p.add_argument("--partition", type=int, metavar="P", help="the partition of --topic")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of the cluster")
    p.add_argument("--path-to-json-file", metavar="F", help='{"partitions": [{"topic": ..., "partition": ...}]}')
    p.set_defaults(handler=run)


def election_type(text: str) -> ElectionType:
    try:
        return ElectionType.parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be PREFERRED or UNCLEAN, not {text!r}") from None


def parse_json_partitions(text: str, source: str) -> list[TopicPartition]:
    """kafka-leader-election's JSON file: ``{"partitions": [{"topic": "t", "partition": 0}]}``."""
    try:
        doc = json.loads(text)
        items = doc["partitions"]
        parts = [TopicPartition(str(item["topic"]), int(item["partition"])) for item in items]
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{source}: not a partitions file ({exc!r}); expected {{\"partitions\": [{{\"topic\": "
                         '"t", "partition": 0}]}') from None  # fmt: skip
    duplicates = sorted({str(tp) for tp in parts if parts.count(tp) > 1})
    if duplicates:
        raise UsageError(f"{source}: duplicate partitions {', '.join(duplicates)}")
    if not parts:
        raise UsageError(f"{source}: the partitions list is empty")
    return parts


def wanted_partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions the flags name (None: all); exactly one way of naming them is allowed."""
    ways = [args.topic is not None, bool(args.all_topic_partitions), args.path_to_json_file is not None]
    if sum(ways) != 1:
        raise UsageError("give exactly one of --topic (with --partition), --all-topic-partitions, --path-to-json-file")
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    if args.topic is not None:
        if args.partition is None:
            raise UsageError("--topic needs --partition")
        if args.partition < 0:
            raise UsageError(f"--partition must be >= 0, not {args.partition}")
        return [TopicPartition(args.topic, args.partition)]
    if args.path_to_json_file is not None:
        path = args.path_to_json_file
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read {path!r}: {exc.strerror or exc}") from None
        return parse_json_partitions(text, path)
    return None


@dataclass
class Report:
    """The outcomes of one election request, grouped as Kafka's tool prints them."""

    election_type: ElectionType
    succeeded: list[TopicPartition] = field(default_factory=list)
    noop: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, KafkaError] = field(default_factory=dict)

    @classmethod
    def of(cls, kind: ElectionType, results: Mapping[TopicPartition, KafkaError | None]) -> Report:
        report = cls(kind)
        for tp in sorted(results, key=lambda tp: (tp.topic, tp.partition)):
            err = results[tp]
            if err is None:
                report.succeeded.append(tp)
            elif err.code == ErrorCode.ELECTION_NOT_NEEDED:
                report.noop.append(tp)
            else:
                report.failed[tp] = err
        return report

    def lines(self) -> list[str]:
        out = []
        if self.succeeded:
            out.append(
                f"Successfully completed leader election ({self.election_type.name}) for partitions "
                + ", ".join(map(str, self.succeeded))
            )
        if self.noop:
            out.append("Valid replica already elected for partitions " + ", ".join(map(str, self.noop)))
        for tp, err in self.failed.items():
            out.append(
                f"Error completing leader election ({self.election_type.name}) for partition: {tp}: {_reason(tp, err)}"
            )
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "electionType": self.election_type.name,
            "succeeded": [str(tp) for tp in self.succeeded],
            "notNeeded": [str(tp) for tp in self.noop],
            "failed": [
                {"partition": str(tp), "error": err.code.name, "message": _message(tp, err)}
                for tp, err in self.failed.items()
            ],
        }


def _message(tp: TopicPartition, err: KafkaError) -> str:
    prefix = f"elect leader of {tp}"
    text = (err.message or "").removeprefix(prefix).removeprefix(";").strip()
    return text or err.code.name.lower().replace("_", " ")


def _reason(tp: TopicPartition, err: KafkaError) -> str:
    return f"{_message(tp, err)} ({err.code.name})"


def run(args: argparse.Namespace, ctx: Context) -> int:
    partitions = wanted_partitions(args)
    kind: ElectionType = args.election_type
    results: dict[TopicPartition, KafkaError | None] = {}
    with ctx.admin() as admin:
        if partitions is None:  # every partition: one request, as kafka-leader-election sends
            results.update(admin.elect_leaders(kind, partitions))
        else:
            with progress_bar(f"Electing leaders ({kind.name})", len(partitions), unit="partitions") as bar:
                for chunk in bar.chunks(partitions):
                    results.update(admin.elect_leaders(kind, list(chunk)))
                    bar.advance(len(chunk))
    report = Report.of(kind, results)
    if ctx.output.is_json:
        ctx.output.json(report.as_json())
    else:
        ctx.output.lines(report.lines())
    if report.failed:
        raise CliError(f"{len(report.failed)} replica(s) could not be elected")
    return 0
