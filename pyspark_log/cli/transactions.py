"""``pylog transactions`` (Kafka's ``kafka-transactions.sh``): find and end hanging transactions.

Sub-commands and flags are kafka-transactions.sh's (KIP-664):

* ``list [--duration-filter MS] [--state S ...] [--producer-id P ...]``: every broker's
  transactions (ListTransactions; ``--duration-filter`` is KIP-994's, the other two filters are
  the API's that Kafka's tool does not expose). Columns TransactionalId, Coordinator, ProducerId,
  TransactionState.
* ``describe --transactional-id ID``: the coordinator's state of one transactional id.
* ``describe-producers --topic T --partition P [--broker-id B]``: the producers a partition's
  leader (or replica B) keeps state for, with the start offset of each open transaction.
* ``find-hanging (--topic T [--partition P] | --broker-id B) [--max-transaction-timeout MIN]``:
  open transactions whose producer wrote nothing for more than MIN minutes (default 15), with
  the coordinator's view (``pyspark_log.client.hanging``).
* ``abort --topic T --partition P (--start-offset O | --producer-id P --producer-epoch E
  --coordinator-epoch C)``: write an ABORT marker for that transaction on the partition
  (WriteTxnMarkers to its leader), so its LSO moves on and read_committed readers pass it. With
  ``--start-offset`` the producer is the one whose open transaction starts there
  (DescribeProducers); a coordinator epoch below 0 is sent as 0, as Kafka's tool does.

Text output is Kafka's: a header row and rows of left-aligned columns each followed by a tab;
``--output table`` draws a table, ``--output json`` a list of objects keyed by the column names.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError
from pyspark_log.cli.parsing import non_negative_int
from pyspark_log.client import AdminClient
from pyspark_log.client.errors import ErrorCode, KafkaError
from pyspark_log.client.hanging import coordinator_view, open_transactions
from pyspark_log.client.operations import AbortTransactionSpec, TransactionDescription
from pyspark_log.client.types import TopicPartition

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
]
PRODUCERS_HEADERS = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
]
HANGING_HEADERS = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
    "CoordinatorState",
]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "transactions", help="list, describe, find and abort (hanging) transactions", parents=[common]
    )
    sub = p.add_subparsers(dest="txn_command", metavar="COMMAND", required=True)

    ls = sub.add_parser("list", help="list transactions", parents=[common])
    ls.add_argument("--duration-filter", type=non_negative_int, metavar="MS",
                    help="only transactions running longer than MS milliseconds (KIP-994)")  # fmt: skip
    ls.add_argument("--state", action="append", default=[], metavar="S",
                    help="only transactions in state S (Ongoing, PrepareCommit, ...); repeatable")  # fmt: skip
    ls.add_argument("--producer-id", type=int, action="append", default=[], metavar="P",
                    help="only the transaction of producer id P; repeatable")  # fmt: skip
    ls.set_defaults(handler=run_list)

    de = sub.add_parser("describe", help="describe the state of an active transactional-id", parents=[common])
    de.add_argument("--transactional-id", required=True, metavar="ID", help="transactional id")
    de.set_defaults(handler=run_describe)

    dp = sub.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition", parents=[common]
    )
    dp.add_argument("--broker-id", type=int, metavar="B", help="describe the producer state on replica B")
    dp.add_argument("--topic", required=True, metavar="T", help="topic name")
    dp.add_argument("--partition", required=True, type=non_negative_int, metavar="P", help="partition number")
    dp.set_defaults(handler=run_describe_producers)

    fh = sub.add_parser("find-hanging", help="find hanging transactions", parents=[common])
    fh.add_argument("--broker-id", type=int, metavar="B", help="broker id to search for hanging transactions")
    fh.add_argument("--max-transaction-timeout", type=non_negative_int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                    metavar="MIN", help="list transactions idle for more than MIN minutes (default 15)")  # fmt: skip
    fh.add_argument("--topic", metavar="T", help="topic name to limit search to")
    fh.add_argument("--partition", type=non_negative_int, metavar="P", help="partition number")
    fh.set_defaults(handler=run_find_hanging)

    ab = sub.add_parser("abort", help="abort a hanging transaction", parents=[common])
    ab.add_argument("--topic", required=True, metavar="T", help="topic name")
    ab.add_argument("--partition", required=True, type=non_negative_int, metavar="P", help="partition number")
    ab.add_argument("--start-offset", type=non_negative_int, metavar="O", help="start offset of the transaction")
    ab.add_argument("--producer-id", type=int, metavar="P", help="producer id (with --producer-epoch, "
                    "--coordinator-epoch)")  # fmt: skip
    ab.add_argument("--producer-epoch", type=int, metavar="E", help="producer epoch")
    ab.add_argument("--coordinator-epoch", type=int, metavar="C", help="coordinator epoch")
    ab.set_defaults(handler=run_abort)


# -- output ----------------------------------------------------------------------------------------


def kafka_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Kafka's ``prettyPrintTable``: every cell left-aligned to its column's width, then a tab."""
    cells = [[str(c) for c in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return ["".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths, strict=True)) for row in cells]


def _emit(ctx: Context, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    out = ctx.output
    if out.is_json:
        out.json([dict(zip(headers, row, strict=True)) for row in rows])
    elif out.is_table:
        out.table(headers, rows)
    else:
        out.lines(kafka_table(headers, rows))


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- commands --------------------------------------------------------------------------------------


def run_list(args: argparse.Namespace, ctx: Context) -> int:
    duration = -1 if args.duration_filter is None else args.duration_filter
    with ctx.admin() as admin:
        by_broker = admin.list_transactions(
            states=args.state, producer_ids=args.producer_id, duration_filter_ms=duration
        )
    rows = [
        (t.transactional_id, broker, t.producer_id, t.state)
        for broker, listings in sorted(by_broker.items())
        for t in listings
    ]
    _emit(ctx, LIST_HEADERS, rows)
    return 0


def run_describe(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.admin() as admin:
        try:
            found = admin.describe_transactions([args.transactional_id])
        except KafkaError as exc:
            what = f"transactional-id `{args.transactional_id}`"
            if exc.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                raise CliError(f"{what} is not known to its coordinator ({exc.code.name})") from None
            raise CliError(f"failed to describe the transaction state of {what}: {exc}") from None
    d = found[args.transactional_id]
    started = d.transaction_start_time_ms >= 0
    row = (
        d.coordinator_id,
        d.transactional_id,
        d.producer_id,
        d.producer_epoch,
        d.state,
        d.transaction_timeout_ms,
        d.transaction_start_time_ms if started else "None",
        _now_ms() - d.transaction_start_time_ms if started else "None",
        ",".join(str(tp) for tp in d.topic_partitions),
    )
    _emit(ctx, DESCRIBE_HEADERS, [row])
    return 0


def run_describe_producers(args: argparse.Namespace, ctx: Context) -> int:
    tp = TopicPartition(args.topic, args.partition)
    with ctx.admin() as admin:
        states = admin.describe_producers([tp], broker_id=args.broker_id)[tp]
    rows = [
        (
            p.producer_id,
            p.producer_epoch,
            p.coordinator_epoch,
            p.last_sequence,
            p.last_timestamp_ms,
            p.current_transaction_start_offset if p.current_transaction_start_offset >= 0 else "None",
        )
        for p in states
    ]
    _emit(ctx, PRODUCERS_HEADERS, rows)
    return 0


def run_find_hanging(args: argparse.Namespace, ctx: Context) -> int:
    if args.topic is None and args.broker_id is None:
        raise UsageError("find-hanging needs --topic or --broker-id to limit the scope of the search")
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    threshold_ms = args.max_transaction_timeout * 60_000
    with ctx.admin() as admin:
        partitions = _partitions_to_search(admin, args)
        producers = admin.describe_producers(partitions, broker_id=args.broker_id) if partitions else {}
        candidates = open_transactions(producers, _now_ms(), threshold_ms)
        transactional_ids: dict[int, str] = {}
        descriptions: dict[str, TransactionDescription] = {}
        if candidates:
            by_broker = admin.list_transactions(producer_ids=sorted({c.producer.producer_id for c in candidates}))
            transactional_ids = {t.producer_id: t.transactional_id for ls in by_broker.values() for t in ls}
            for tid in sorted(set(transactional_ids.values())):
                try:
                    descriptions.update(admin.describe_transactions([tid]))
                except KafkaError as exc:
                    if exc.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                        raise
    now = _now_ms()
    rows = [
        (
            c.partition.topic,
            c.partition.partition,
            c.producer.producer_id,
            c.producer.producer_epoch,
            c.producer.coordinator_epoch,
            c.producer.current_transaction_start_offset,
            c.producer.last_timestamp_ms,
            c.duration_ms(now) // 60_000,
            coordinator_view(c, transactional_ids, descriptions) or "None",
        )
        for c in candidates
    ]
    _emit(ctx, HANGING_HEADERS, rows)
    return 0


def _partitions_to_search(admin: AdminClient, args: argparse.Namespace) -> list[TopicPartition]:
    """``--topic [--partition]``, or the topic's (or every topic's) partitions with a replica on
    ``--broker-id`` when given."""
    if args.topic is not None and args.partition is not None:
        return [TopicPartition(args.topic, args.partition)]
    topics = [args.topic] if args.topic is not None else admin.list_topics()
    described = admin.describe_topics(topics)
    out = []
    for name, meta in sorted(described.items()):
        for part in sorted(meta.partitions.values(), key=lambda p: p.partition):
            if args.broker_id is None or args.broker_id in part.replicas:
                out.append(TopicPartition(name, part.partition))
    return out


def run_abort(args: argparse.Namespace, ctx: Context) -> int:
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is None and args.producer_id is None:
        raise UsageError(
            "the transaction to abort must be identified either with --start-offset or with "
            "--producer-id, --producer-epoch and --coordinator-epoch"
        )
    with ctx.admin() as admin:
        if args.start_offset is None:
            if args.producer_epoch is None:
                raise UsageError("missing --producer-epoch (needed with --producer-id)")
            if args.coordinator_epoch is None:
                raise UsageError("missing --coordinator-epoch (needed with --producer-id)")
            spec = AbortTransactionSpec(tp, args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
        else:
            states = admin.describe_producers([tp])[tp]
            found = next((p for p in states if p.current_transaction_start_offset == args.start_offset), None)
            if found is None:
                raise CliError(f"could not find any open transactions starting at offset {args.start_offset} on {tp}")
            spec = AbortTransactionSpec(tp, found.producer_id, found.producer_epoch, max(found.coordinator_epoch, 0))
        admin.abort_transaction(spec)
    if not ctx.output.is_json:
        ctx.output.line(f"Aborted the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}) on {tp}")
    else:
        ctx.output.json(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "producerId": spec.producer_id,
                "producerEpoch": spec.producer_epoch,
                "coordinatorEpoch": spec.coordinator_epoch,
            }
        )
    return 0
