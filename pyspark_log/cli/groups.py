"""``pylog groups list|describe|delete|reset-offsets|delete-offsets`` (Kafka's ``kafka-consumer-groups``).

``describe`` prints, per partition a group has a member assigned to or an offset committed for,
CURRENT-OFFSET (the committed offset), LOG-END-OFFSET (the high watermark) and LAG (their
difference), with the consumer, host and client of the member that owns it (``-`` for none): so a
group without members but with commits (a Spark query's ``groupId``, say) shows its lag too.
``--members`` lists the members (``--verbose``: with assignments), ``--state`` the coordinator,
assignor, state and member count. A KIP-848 group (type ``consumer``, described with
ConsumerGroupDescribe) shows its members' epochs (CURRENT-EPOCH; ``--verbose``: the current and
target assignments and the target epoch, as Kafka 4's tool) and, with ``--state``, the group and
target-assignment epochs; ``list --type`` shows (or filters by) the group type. A group that does
not exist is an error (exit 1); one without members is noted on stderr, as Kafka's tool notes it.

``delete`` and ``reset-offsets`` act only on groups without members, as Kafka's do: the broker
refuses to delete a non-empty group (NON_EMPTY_GROUP) and ``reset-offsets`` refuses a group that
is not Empty (or Dead: a new group's offsets may be set before it starts). ``reset-offsets`` is a
dry run unless ``--execute`` is given; ``--to-offset`` and ``--shift-by`` are clamped to each
partition's [earliest, latest] range, ``--to-datetime``/``--by-duration`` go to the first offset
at or after the time (the end when there is none), as Kafka's ``GroupOffsetsResetter`` does.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError, kafka_error
from pyspark_log.cli.parsing import EARLIEST, LATEST, non_negative_int, parse_timestamp_ms, positive_int
from pyspark_log.cli.progress import progress_bar
from pyspark_log.client import AdminClient, KafkaError, TopicPartition
from pyspark_log.client.errors import ErrorCode
from pyspark_log.client.group_admin import ConsumerGroupDescription, MemberDescription

MISSING = "-"
STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead", "Assigning", "Reconciling")
TYPES = ("classic", "consumer")  # Kafka's GroupType (KIP-848)
_INACTIVE = frozenset({"Empty", "Dead"})
_REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance"})
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)

# -- pure parsing ----------------------------------------------------------------------------------


def parse_states(text: str) -> list[str]:
    """``stable,empty`` -> Kafka's state names; an empty text means "any state"."""
    canonical = {s.lower(): s for s in STATES}
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name = canonical.get(part.lower())
        if name is None:
            raise UsageError(f"invalid state {part!r}; valid states are: {', '.join(STATES)}")
        out.append(name)
    return list(dict.fromkeys(out))


def parse_types(text: str) -> list[str]:
    """``consumer,classic`` -> group types; an empty text means "any type"."""
    out: list[str] = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        if part not in TYPES:
            raise UsageError(f"invalid type {part!r}; valid types are: {', '.join(TYPES)}")
        out.append(part)
    return list(dict.fromkeys(out))


def parse_topic_partitions(text: str) -> tuple[str, tuple[int, ...] | None]:
    """``TOPIC`` (every partition) or ``TOPIC:0,2,5`` (those) -> ``(topic, partitions or None)``."""
    topic, sep, rest = text.rpartition(":") if ":" in text else (text, "", "")
    topic = topic.strip()
    if not topic:
        raise UsageError(f"topic {text!r} must look like TOPIC or TOPIC:P[,P...]")
    if not sep:
        return topic, None
    try:
        parts = tuple(dict.fromkeys(non_negative_int(p.strip()) for p in rest.split(",")))
    except argparse.ArgumentTypeError:
        raise UsageError(f"topic {text!r} must look like TOPIC or TOPIC:P[,P...] (partitions >= 0)") from None
    return topic, parts


def parse_duration_ms(text: str) -> int:
    """An ISO 8601 duration as Kafka's ``--by-duration`` takes it (``PnDTnHnMnS``, e.g. ``PT30M``,
    ``P1DT2H``) -> milliseconds."""
    m = _DURATION.match(text.strip())
    if m is None or not any(m.groups()) or text.strip().upper().endswith("T"):
        raise UsageError(f"duration {text!r} must look like PnDTnHnMnS (e.g. PT30M, P1DT2H)")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def assignment_text(tps: Iterable[TopicPartition]) -> str:
    """``t:0,1;u:2`` as kafka-consumer-groups prints an assignment (``-`` for none)."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items()))


def columns(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """Left-aligned text columns (None cells as ``-``), two spaces apart, as Kafka's tools align them."""
    cells = [list(header)] + [[MISSING if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]


# -- pure lag and reset computations --------------------------------------------------------------


@dataclass(frozen=True)
class PartitionRow:
    """One line of ``describe``: where a group is in a partition and who reads it."""

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str | None = None
    host: str | None = None
    client_id: str | None = None

    @property
    def lag(self) -> int | None:
        """LOG-END-OFFSET minus CURRENT-OFFSET as Kafka's tool computes it, unclamped: negative
        when the committed offset is past the end (the log was truncated or deleted)."""
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset


def offset_rows(
    desc: ConsumerGroupDescription, committed: Mapping[TopicPartition, int], log_end: Mapping[TopicPartition, int]
) -> list[PartitionRow]:
    """Kafka's describe rows: members with the most partitions first, each member's partitions
    in order; then the partitions with a committed offset that no member owns."""

    def row(tp: TopicPartition, member: MemberDescription | None) -> PartitionRow:
        who = (None, None, None) if member is None else (member.member_id, member.host, member.client_id)
        return PartitionRow(desc.group_id, tp.topic, tp.partition, committed.get(tp), log_end.get(tp), *who)

    rows: list[PartitionRow] = []
    owned: set[TopicPartition] = set()
    for member in sorted((m for m in desc.members if m.assignment), key=lambda m: -len(m.assignment)):
        for tp in sorted(member.assignment):
            rows.append(row(tp, member))
            owned.add(tp)
    rows.extend(row(tp, None) for tp in sorted(set(committed) - owned))
    return rows


@dataclass(frozen=True)
class ResetSpec:
    """One ``reset-offsets`` scenario: ``kind`` is earliest, latest, current, offset, shift or
    time (``value``: the offset, the shift, or the timestamp in ms)."""

    kind: str
    value: int = 0

    @property
    def needs_committed(self) -> bool:
        return self.kind in {"current", "shift"}


def plan_reset(
    spec: ResetSpec,
    partitions: Iterable[TopicPartition],
    *,
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    committed: Mapping[TopicPartition, int],
    at_time: Mapping[TopicPartition, int | None] | None = None,
) -> dict[TopicPartition, int]:
    """The new offset of every partition (Kafka's ``GroupOffsetsResetter`` rules): ``offset``
    and ``shift`` are clamped into [earliest, latest]; ``current`` keeps the committed offset
    (latest where there is none); ``time`` takes the first offset at or after the timestamp
    (latest where there is none). Shifting a partition without a committed offset fails."""
    out: dict[TopicPartition, int] = {}
    for tp in partitions:
        lo, hi = earliest[tp], latest[tp]
        if spec.kind == "earliest":
            out[tp] = lo
        elif spec.kind == "latest":
            out[tp] = hi
        elif spec.kind == "current":
            out[tp] = committed.get(tp, hi)
        elif spec.kind == "time":
            found = (at_time or {}).get(tp)
            out[tp] = hi if found is None else found
        elif spec.kind == "offset":
            out[tp] = min(max(spec.value, lo), hi)
        elif spec.kind == "shift":
            if tp not in committed:
                raise CliError(f"cannot shift the offset of {tp.topic}:{tp.partition}: the group has none committed")
            out[tp] = min(max(committed[tp] + spec.value, lo), hi)
        else:
            raise AssertionError(f"unknown reset kind {spec.kind!r}")
    return out


# -- the parser ------------------------------------------------------------------------------------


def _select_groups(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", metavar="G", help="the group (repeatable)")
    which.add_argument("--all-groups", action="store_true", help="every consumer group")


def _to_offset(text: str) -> ResetSpec:
    return ResetSpec("offset", non_negative_int(text))


def _shift_by(text: str) -> ResetSpec:
    try:
        return ResetSpec("shift", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _to_datetime(text: str) -> ResetSpec:
    return ResetSpec("time", parse_timestamp_ms(text))


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    shared = argparse.ArgumentParser(add_help=False, parents=[common])
    shared.add_argument("--timeout", type=positive_int, metavar="MS", help="time limit of each request (ms)")
    groups = commands.add_parser(
        "groups", help="list, describe, delete consumer groups, reset their offsets", parents=[common]
    )
    verbs = groups.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", help="consumer groups (table/json: with state and protocol type)", parents=[shared])
    p.add_argument(
        "--state", nargs="?", const=[], type=parse_states, metavar="S[,S]", help="show states; only these if given"
    )
    p.add_argument(
        "--type", nargs="?", const=[], type=parse_types, metavar="T[,T]", help="show group types; only these if given"
    )
    p.set_defaults(handler=list_)

    p = verbs.add_parser("describe", help="offsets and lag per partition, members, or state", parents=[shared])
    _select_groups(p)
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets and lag per partition (the default)")
    view.add_argument("--members", action="store_true", help="the members (with --verbose: their partitions)")
    view.add_argument("--state", action="store_true", help="coordinator, assignor, state and member count")
    p.add_argument("--verbose", action="store_true", help="with --members: each member's assignment")
    p.set_defaults(handler=describe)

    p = verbs.add_parser("delete", help="delete groups that have no members", parents=[shared])
    _select_groups(p)
    p.set_defaults(handler=delete)

    p = verbs.add_parser("reset-offsets", help="move an inactive group's committed offsets", parents=[shared])
    _select_groups(p)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="T[:P,...]", help="a topic, or some of its partitions")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_const", const=ResetSpec("earliest"), dest="spec", help="log start")
    to.add_argument("--to-latest", action="store_const", const=ResetSpec("latest"), dest="spec", help="log end")
    to.add_argument(
        "--to-current", action="store_const", const=ResetSpec("current"), dest="spec", help="the committed offset"
    )
    to.add_argument("--to-offset", type=_to_offset, dest="spec", metavar="N", help="offset N (clamped to the log)")
    to.add_argument(
        "--shift-by", type=_shift_by, dest="spec", metavar="N", help="the committed offset plus N (or minus)"
    )
    to.add_argument("--to-datetime", type=_to_datetime, dest="spec", metavar="T", help="ISO 8601 or epoch ms")
    to.add_argument("--by-duration", type=parse_duration_ms, metavar="PnDTnHnMnS", help="that long before now")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.set_defaults(handler=reset_offsets)

    p = verbs.add_parser("delete-offsets", help="forget a group's offsets of some topics", parents=[shared])
    p.add_argument("--group", required=True, metavar="G", help="the group")
    p.add_argument("--topic", action="append", required=True, metavar="T[:P,...]", help="a topic or some partitions")
    p.set_defaults(handler=delete_offsets)


# -- shared I/O ------------------------------------------------------------------------------------


def _admin(args: argparse.Namespace, ctx: Context) -> AbstractContextManager[AdminClient]:
    timeout = getattr(args, "timeout", None)
    return ctx.admin({"default.api.timeout.ms": timeout} if timeout else None)


def group_error(exc: KafkaError, group: str) -> CliError:
    """One line for a group-level failure."""
    code = exc.code
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return CliError(f"consumer group {group!r} does not exist ({code.name})")
    if code == ErrorCode.NON_EMPTY_GROUP:
        return CliError(f"consumer group {group!r} is not empty: it has active members ({code.name})")
    if code == ErrorCode.INVALID_GROUP_ID:
        return CliError(f"{group!r} is not a valid group id ({code.name})")
    if code == ErrorCode.REQUEST_TIMED_OUT or code.retriable:
        return kafka_error(exc)
    return CliError(f"consumer group {group!r}: {code.name.lower().replace('_', ' ')} ({code.name})")


def _first_failure(failures: Sequence[CliError], what: str) -> CliError:
    more = len(failures) - 1
    return CliError(f"{failures[0]}; and {more} more {what} failed" if more else str(failures[0]))


def _group_ids(args: argparse.Namespace, admin: AdminClient) -> list[str]:
    if getattr(args, "all_groups", False):
        return [g.group_id for g in admin.list_consumer_groups()]
    return list(dict.fromkeys(args.group))


def _describe(admin: AdminClient, ids: Sequence[str]) -> dict[str, ConsumerGroupDescription]:
    try:
        return admin.describe_consumer_groups(ids) if ids else {}
    except KafkaError as exc:
        failed = getattr(exc, "errors", None) or {ids[0]: exc}
        group, first = next(iter(failed.items()))
        raise group_error(first, group) from None


def _offsets(admin: AdminClient, tps: Iterable[TopicPartition], spec: int) -> dict[TopicPartition, int | None]:
    """ListOffsets for ``spec`` (EARLIEST, LATEST or a timestamp); partitions that fail (a topic
    deleted meanwhile, a partition without a leader) map to None."""
    wanted = list(dict.fromkeys(tps))
    out: dict[TopicPartition, int | None] = dict.fromkeys(wanted)
    while wanted:
        try:
            found = admin.list_offsets(dict.fromkeys(wanted, spec))
        except KafkaError as exc:
            failed = set(getattr(exc, "errors", None) or ())
            if not failed & set(wanted):
                raise kafka_error(exc) from None
            wanted = [tp for tp in wanted if tp not in failed]
            continue
        out.update({tp: None if hit is None else hit.offset for tp, hit in found.items()})
        break
    return out


def _committed(admin: AdminClient, group: str) -> dict[TopicPartition, int]:
    try:
        return {tp: om.offset for tp, om in admin.list_consumer_group_offsets(group).items()}
    except KafkaError as exc:
        raise group_error(exc, group) from None


def _note(ctx: Context, text: str) -> None:
    """A remark beside the result (Kafka's tool writes these to stderr); none in JSON mode."""
    if not ctx.output.is_json:
        print(text, file=sys.stderr)


# -- list ------------------------------------------------------------------------------------------


def list_(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.output
    with _admin(args, ctx) as admin:
        listings = admin.list_consumer_groups(args.state or None)
    types = getattr(args, "type", None)
    if types:
        listings = [g for g in listings if g.type in types]
    if out.is_json:
        out.json([
            {"groupId": g.group_id, "state": g.state, "protocolType": g.protocol_type, "type": g.type}
            for g in listings
        ])  # fmt: skip
    elif out.is_table:
        rows = [(g.group_id, g.state, g.protocol_type or "(simple)", g.type) for g in listings]
        out.table(["Group", "State", "Protocol type", "Type"], rows)
    elif args.state is None and types is None:
        out.lines(g.group_id for g in listings)
    elif types is None:
        out.lines(columns(["GROUP", "STATE", "PROTOCOL-TYPE"], [(g.group_id, g.state, g.protocol_type or MISSING)
                                                                 for g in listings]))  # fmt: skip
    elif args.state is None:
        out.lines(columns(["GROUP", "TYPE"], [(g.group_id, g.type) for g in listings]))
    else:
        rows = [(g.group_id, g.state, g.protocol_type or MISSING, g.type) for g in listings]
        out.lines(columns(["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"], rows))
    return 0


# -- describe --------------------------------------------------------------------------------------


def _coordinator_text(desc: ConsumerGroupDescription) -> str:
    c = desc.coordinator
    return MISSING if c is None else f"{c.host}:{c.port}  ({c.node_id})"


def _member_json(m: MemberDescription) -> dict[str, Any]:
    out: dict[str, Any] = {
        "memberId": m.member_id,
        "groupInstanceId": m.group_instance_id,
        "clientId": m.client_id,
        "host": m.host,
        "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
    }
    if m.member_epoch is not None:  # a KIP-848 member
        out["memberEpoch"] = m.member_epoch
        out["targetAssignment"] = [{"topic": tp.topic, "partition": tp.partition} for tp in m.target_assignment]
    return out


def _group_json(desc: ConsumerGroupDescription, rows: list[PartitionRow] | None) -> dict[str, Any]:
    c = desc.coordinator
    out: dict[str, Any] = {
        "groupId": desc.group_id,
        "state": desc.state,
        "protocolType": desc.protocol_type,
        "assignor": desc.partition_assignor or None,
        "coordinator": None if c is None else {"id": c.node_id, "host": c.host, "port": c.port},
        "members": [_member_json(m) for m in desc.members],
    }
    if desc.type == "consumer":  # KIP-848: the group's type and epochs
        out.update(type=desc.type, groupEpoch=desc.group_epoch, targetAssignmentEpoch=desc.assignment_epoch)
    if rows is not None:
        out["offsets"] = [
            {
                "topic": r.topic,
                "partition": r.partition,
                "currentOffset": r.current_offset,
                "logEndOffset": r.log_end_offset,
                "lag": r.lag,
                "consumerId": r.consumer_id,
                "host": r.host,
                "clientId": r.client_id,
            }
            for r in rows
        ]
    return out


def describe(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.output
    view = "members" if args.members else "state" if args.state else "offsets"
    failures: list[CliError] = []
    shown: list[tuple[ConsumerGroupDescription, list[PartitionRow] | None]] = []
    with _admin(args, ctx) as admin:
        ids = _group_ids(args, admin)
        described = _describe(admin, ids)
        for group in ids:
            desc = described[group]
            if desc.state == "Dead":
                failures.append(CliError(f"consumer group {group!r} does not exist (GROUP_ID_NOT_FOUND)"))
                continue
            rows = None
            if view == "offsets":
                committed = _committed(admin, group)
                tps = set(committed) | {tp for m in desc.members for tp in m.assignment}
                log_end = {tp: o for tp, o in _offsets(admin, tps, LATEST).items() if o is not None}
                rows = offset_rows(desc, committed, log_end)
            shown.append((desc, rows))
    if out.is_json:
        out.json([_group_json(desc, rows) for desc, rows in shown])
    for desc, rows in [] if out.is_json else shown:
        if desc.state == "Empty":
            _note(ctx, f"Consumer group '{desc.group_id}' has no active members.")
        elif desc.state in _REBALANCING:
            _note(ctx, f"Warning: consumer group '{desc.group_id}' is rebalancing.")
        if view == "offsets":
            assert rows is not None
            _print_offsets(ctx, desc, rows)
        elif view == "members":
            _print_members(ctx, desc, verbose=args.verbose)
        else:
            _print_state(ctx, desc)
    if failures:
        raise _first_failure(failures, "group(s)")
    return 0


def _title(desc: ConsumerGroupDescription, extra: str = "") -> str:
    from rich.markup import escape

    return f"[bold]{escape(desc.group_id)}[/bold]" + (f"  {escape(extra)}" if extra else "")


def _emit(ctx: Context, header: list[str], rows: Sequence[Sequence[object]], title: str, numeric: list[str]) -> None:
    out = ctx.output
    if out.is_table:
        out.table(header, rows, title=title, numeric=numeric)
    else:
        out.line()
        out.lines(columns(header, rows))


def _print_offsets(ctx: Context, desc: ConsumerGroupDescription, rows: list[PartitionRow]) -> None:
    if not rows:
        return
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"]
    header.append("CLIENT-ID")
    cells = [
        (r.group, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id, r.host, r.client_id)
        for r in rows
    ]
    total = sum(r.lag or 0 for r in rows)
    title = _title(desc, f"state {desc.state}  total lag {total}") if ctx.output.is_table else ""
    _emit(ctx, header, cells, title, ["PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"])


def _print_members(ctx: Context, desc: ConsumerGroupDescription, *, verbose: bool) -> None:
    if not desc.members:
        return
    instances = any(m.group_instance_id for m in desc.members)
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if instances else []) + ["HOST", "CLIENT-ID"]
    kip848 = desc.type == "consumer"
    header += ["#PARTITIONS"]
    if kip848:  # KIP-848 members: their epoch; with --verbose what they own and what they will own
        header += ["CURRENT-EPOCH"] + (["CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"] if verbose else [])
    elif verbose:
        header += ["ASSIGNMENT"]

    def extra(m: MemberDescription) -> tuple[object, ...]:
        if not kip848:
            return (assignment_text(m.assignment),) if verbose else ()
        if not verbose:
            return (m.member_epoch,)
        return (m.member_epoch, assignment_text(m.assignment), desc.assignment_epoch,
                assignment_text(m.target_assignment))  # fmt: skip

    rows = [
        (desc.group_id, m.member_id)
        + ((m.group_instance_id,) if instances else ())
        + (m.host, m.client_id, len(m.assignment))
        + extra(m)
        for m in desc.members
    ]
    title = _title(desc, f"state {desc.state}  members {len(desc.members)}") if ctx.output.is_table else ""
    _emit(ctx, header, rows, title, ["#PARTITIONS"])


def _print_state(ctx: Context, desc: ConsumerGroupDescription) -> None:
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row: tuple[object, ...] = (
        desc.group_id, _coordinator_text(desc), desc.partition_assignor or None, desc.state, len(desc.members),
    )  # fmt: skip
    if desc.type == "consumer":  # KIP-848: the group's epochs
        header[4:4] = ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row = (*row[:4], desc.group_epoch, desc.assignment_epoch, row[4])
    _emit(ctx, header, [row], _title(desc) if ctx.output.is_table else "", ["#MEMBERS"])


# -- delete ----------------------------------------------------------------------------------------


def delete(args: argparse.Namespace, ctx: Context) -> int:
    with _admin(args, ctx) as admin:
        ids = _group_ids(args, admin)
        if not ids:
            return 0
        errors: dict[str, KafkaError] = {}
        try:
            admin.delete_consumer_groups(ids)
        except KafkaError as exc:
            errors = dict(getattr(exc, "errors", None) or {ids[0]: exc})
    deleted = [g for g in ids if g not in errors]
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        ctx.output.line(f"Deletion of requested consumer groups ({names}) was successful.")
    if errors:
        raise _first_failure([group_error(e, g) for g, e in errors.items()], "group(s)")
    return 0


# -- reset-offsets / delete-offsets ----------------------------------------------------------------


def _expand_topics(admin: AdminClient, specs: Iterable[str]) -> list[TopicPartition]:
    """``--topic`` values -> partitions, checked against the topics' partition counts."""
    parsed = [parse_topic_partitions(s) for s in specs]
    topics = list(dict.fromkeys(t for t, _ in parsed))
    try:
        metas = admin.describe_topics(topics)
    except KafkaError as exc:
        failed = getattr(exc, "errors", None) or {}
        raise kafka_error(exc, next(iter(failed), None)) from None
    out: list[TopicPartition] = []
    for topic, parts in parsed:
        existing = sorted(metas[topic].partitions)
        for p in existing if parts is None else parts:
            if p not in existing:
                raise CliError(
                    f"topic {topic!r} has no partition {p} (it has {len(existing)}) (UNKNOWN_TOPIC_OR_PARTITION)"
                )
            out.append(TopicPartition(topic, p))
    return list(dict.fromkeys(out))


def _prepare_reset(
    admin: AdminClient,
    spec: ResetSpec,
    group: str,
    partitions: list[TopicPartition],
    committed: dict[TopicPartition, int],
) -> dict[TopicPartition, int]:
    earliest = _offsets(admin, partitions, EARLIEST)
    latest = _offsets(admin, partitions, LATEST)
    missing = [tp for tp in partitions if earliest[tp] is None or latest[tp] is None]
    if missing:
        tp = missing[0]
        raise CliError(f"group {group!r}: no offsets for {tp.topic}:{tp.partition} (UNKNOWN_TOPIC_OR_PARTITION)")
    at_time = _offsets(admin, partitions, spec.value) if spec.kind == "time" else None
    return plan_reset(
        spec,
        partitions,
        earliest={tp: o for tp, o in earliest.items() if o is not None},
        latest={tp: o for tp, o in latest.items() if o is not None},
        committed=committed,
        at_time=at_time,
    )


def reset_offsets(args: argparse.Namespace, ctx: Context) -> int:
    spec: ResetSpec = args.spec if args.by_duration is None else ResetSpec("time", _now_ms() - args.by_duration)
    failures: list[CliError] = []
    plans: list[tuple[str, dict[TopicPartition, int]]] = []
    with _admin(args, ctx) as admin:
        ids = _group_ids(args, admin)
        described = _describe(admin, ids)
        chosen = None if args.all_topics else _expand_topics(admin, args.topic)
        for group in ids:
            state = described[group].state
            if state not in _INACTIVE:
                failures.append(
                    CliError(
                        f"assignments can only be reset if the group {group!r} is inactive, "
                        f"but the current state is {state}"
                    )
                )
                continue
            committed = _committed(admin, group) if spec.needs_committed or chosen is None else {}
            partitions = sorted(committed) if chosen is None else chosen
            plan = _prepare_reset(admin, spec, group, partitions, committed) if partitions else {}
            if args.execute and plan:
                items = sorted(plan.items())
                try:
                    with progress_bar(f"Resetting offsets of {group}", len(items), unit="partitions") as bar:
                        for chunk in bar.chunks(items):
                            admin.alter_consumer_group_offsets(group, dict(chunk))
                            bar.advance(len(chunk))
                except KafkaError as exc:
                    raise group_error(exc, group) from None
            plans.append((group, plan))
    _print_plans(ctx, plans)
    if plans and not args.execute and not args.dry_run:
        _note(ctx, "Dry run: nothing changed (add --execute to commit these offsets).")
    if failures:
        raise _first_failure(failures, "group(s)")
    return 0


def _now_ms() -> int:
    return int(time.time() * 1000)


def _print_plans(ctx: Context, plans: list[tuple[str, dict[TopicPartition, int]]]) -> None:
    out = ctx.output
    rows = [(g, tp.topic, tp.partition, offset) for g, plan in plans for tp, offset in sorted(plan.items())]
    if out.is_json:
        out.json([{"group": g, "topic": t, "partition": p, "offset": o} for g, t, p, o in rows])
    elif out.is_table:
        out.table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, numeric=["PARTITION", "NEW-OFFSET"])
    elif rows:
        out.lines(columns(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))


def delete_offsets(args: argparse.Namespace, ctx: Context) -> int:
    group = args.group
    errors: dict[TopicPartition, KafkaError] = {}
    with _admin(args, ctx) as admin:
        partitions = _expand_topics(admin, args.topic)
        try:
            admin.delete_consumer_group_offsets(group, partitions)
        except KafkaError as exc:
            per_partition = getattr(exc, "errors", None)
            if not per_partition:
                raise group_error(exc, group) from None
            errors = dict(per_partition)
    out = ctx.output
    status = {tp: "Successful" if tp not in errors else f"Error: {errors[tp].code.name}" for tp in partitions}
    if out.is_json:
        out.json([{"topic": tp.topic, "partition": tp.partition, "status": s} for tp, s in status.items()])
    elif out.is_table:
        out.table(["TOPIC", "PARTITION", "STATUS"], [(tp.topic, tp.partition, s) for tp, s in status.items()])
    else:
        out.lines(columns(["TOPIC", "PARTITION", "STATUS"], [(tp.topic, tp.partition, s) for tp, s in status.items()]))
    if errors:
        tp, first = next(iter(errors.items()))
        more = f"; and {len(errors) - 1} more partition(s) failed" if len(errors) > 1 else ""
        raise CliError(f"cannot delete the offset of {tp.topic}:{tp.partition} for {group!r} ({first.code.name}){more}")
    return 0
