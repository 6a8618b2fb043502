"""``pylog share-groups list|describe|reset-offsets|delete`` (Kafka 4.1's ``kafka-share-groups``).

KIP-932 share groups through their own APIs: ListGroups v5 with the ``share`` type to every
broker, ShareGroupDescribe (members, epochs, assignments), DescribeShareGroupOffsets (each
share-partition's start offset, SPSO), AlterShareGroupOffsets (``reset-offsets``) and
DeleteGroups, each to the group's coordinator. Output as Kafka's tool prints it:

* ``describe`` (``--offsets``, the default): GROUP TOPIC PARTITION START-OFFSET (``-`` for a
  share-partition never fetched; ``--verbose``: LEADER-EPOCH too); ``--members``: GROUP
  CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT (``--verbose``: MEMBER-EPOCH too);
  ``--state``: GROUP COORDINATOR (ID) STATE #MEMBERS (``--verbose``: GROUP-EPOCH and
  ASSIGNMENT-EPOCH too). A group without members is noted on stderr, as Kafka's tool does.
* ``reset-offsets`` with ``--to-earliest``, ``--to-latest`` or ``--to-datetime`` (and pylog's
  ``--to-offset``), for ``--topic T[:P,...]`` or ``--all-topics``; a dry run unless ``--execute``.
  Only a group without members may be reset (the broker answers NON_EMPTY_GROUP otherwise).
  Kafka 4.1.1's ``kafka-share-groups --reset-offsets`` answers "not yet implemented"; pylog's
  uses the AlterShareGroupOffsets API that Kafka 4.1 serves (docs/compatibility.md).
* ``delete`` refuses a group with members (NON_EMPTY_GROUP), as Kafka does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, kafka_error
from pyspark_log.cli.groups import columns, parse_topic_partitions
from pyspark_log.cli.parsing import EARLIEST, LATEST, non_negative_int, parse_timestamp_ms, positive_int
from pyspark_log.client import AdminClient, KafkaError, TopicPartition
from pyspark_log.client.errors import error_for
from pyspark_log.wire import ApiKey, ErrorCode

MISSING = "-"
_COORDINATOR_ERRORS = (
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
)
# the share APIs at Kafka 4.1.1's only versions (the client's own table does not list them)
_VERSIONS: dict[int, int] = {
    ApiKey.SHARE_GROUP_DESCRIBE: 1,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: 0,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: 0,
}
STATES = ("Stable", "Empty", "Dead")  # Kafka's ShareGroupState


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    coordinator: tuple[int, str, int]  # (node id, host, port)
    members: tuple[ShareMember, ...]


# -- requests (through the admin client's cluster and group-coordinator lookup) --------------------


def _run(admin: AdminClient, coro: Any) -> Any:
    return admin._run(coro, admin._w(None))  # the admin's own loop thread and default timeout


async def _coordinator_call(admin: AdminClient, group_id: str, api_key: int, body: dict[str, Any]) -> Any:
    core = admin.core

    async def attempt(node: int) -> Any:
        conn = await core.cluster.connection(node)
        resp = await conn.request(api_key, body, version=_VERSIONS.get(api_key))
        top = getattr(resp, "error_code", ErrorCode.NONE)
        groups = getattr(resp, "groups", None)
        if top == ErrorCode.NONE and groups and api_key != ApiKey.LIST_GROUPS:
            top = groups[0].error_code
        if top in (
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ):
            raise error_for(top, context=f"share group {group_id!r}")
        return resp, node

    return await core._groups._retrying(group_id, core.default_api_timeout_ms, attempt)


async def list_share_groups(admin: AdminClient, states: Sequence[str]) -> list[tuple[str, str]]:
    core = admin.core
    meta = await core.cluster.fetch_metadata([])
    found: dict[str, str] = {}
    for node in sorted(meta.brokers):
        conn = await core.cluster.connection(node)
        resp = await conn.request(ApiKey.LIST_GROUPS, {"states_filter": list(states), "types_filter": ["share"]})
        assert resp is not None
        if resp.error_code != ErrorCode.NONE:
            raise error_for(resp.error_code, context=f"list groups on broker {node}")
        for g in resp.groups:
            if (getattr(g, "group_type", "") or "").lower() == "share":
                found[g.group_id] = g.group_state
    return sorted(found.items())


async def describe_share_group(admin: AdminClient, group_id: str) -> ShareGroupDescription:
    body = {"group_ids": [group_id], "include_authorized_operations": False}
    resp, node = await _coordinator_call(admin, group_id, ApiKey.SHARE_GROUP_DESCRIBE, body)
    g = resp.groups[0]
    if g.error_code != ErrorCode.NONE:
        raise error_for(g.error_code, g.error_message, context=f"describe share group {group_id!r}")
    broker = admin.core.cluster.metadata.brokers.get(node)
    members = tuple(
        ShareMember(
            m.member_id,
            m.client_id,
            m.client_host,
            m.member_epoch,
            tuple(TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions),
        )
        for m in g.members
    )
    where = (node, broker.host, broker.port) if broker is not None else (node, "", -1)
    return ShareGroupDescription(group_id, g.group_state, g.group_epoch, g.assignment_epoch, where, members)


async def share_group_offsets(admin: AdminClient, group_id: str) -> list[tuple[str, int, int, int]]:
    """``(topic, partition, leader epoch, start offset)`` of every share-partition of the group."""
    body = {"groups": [{"group_id": group_id, "topics": None}]}
    resp, _ = await _coordinator_call(admin, group_id, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, body)
    g = resp.groups[0]
    if g.error_code != ErrorCode.NONE:
        raise error_for(g.error_code, g.error_message, context=f"describe share group offsets {group_id!r}")
    return sorted(
        (t.topic_name, p.partition_index, p.leader_epoch, p.start_offset) for t in g.topics for p in t.partitions
    )


async def alter_share_group_offsets(admin: AdminClient, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    topics: dict[str, list[dict[str, int]]] = {}
    for tp, offset in sorted(offsets.items()):
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "start_offset": offset})
    body = {"group_id": group_id, "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]}
    resp, _ = await _coordinator_call(admin, group_id, ApiKey.ALTER_SHARE_GROUP_OFFSETS, body)
    if resp.error_code != ErrorCode.NONE:
        raise error_for(resp.error_code, resp.error_message, context=f"reset offsets of share group {group_id!r}")
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.NONE:
                raise error_for(p.error_code, p.error_message, context=f"{t.topic_name}-{p.partition_index}")


async def delete_share_group(admin: AdminClient, group_id: str) -> None:
    resp, _ = await _coordinator_call(admin, group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]})
    code = resp.results[0].error_code
    if code != ErrorCode.NONE:
        raise error_for(code, context=f"delete share group {group_id!r}")


# -- commands --------------------------------------------------------------------------------------


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    shared = argparse.ArgumentParser(add_help=False, parents=[common])
    shared.add_argument("--timeout", type=positive_int, metavar="MS", help="time limit of each request (ms)")
    parser = commands.add_parser(
        "share-groups", help="list, describe, delete share groups (KIP-932), reset their offsets", parents=[common]
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", help="share groups (with --state: and their states)", parents=[shared])
    p.add_argument("--state", nargs="?", const=[], type=_states, metavar="S[,S]", help="show states; only these")
    p.set_defaults(handler=list_)

    p = verbs.add_parser("describe", help="start offsets per partition, members, or state", parents=[shared])
    _select(p)
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="start offset per share-partition (the default)")
    view.add_argument("--members", action="store_true", help="the members")
    view.add_argument("--state", action="store_true", help="coordinator, state and member count")
    p.add_argument("--verbose", action="store_true", help="members: assignments; state: epochs")
    p.set_defaults(handler=describe)

    p = verbs.add_parser("delete", help="delete share groups without members", parents=[shared])
    _select(p)
    p.set_defaults(handler=delete)

    p = verbs.add_parser("reset-offsets", help="move an empty share group's start offsets", parents=[shared])
    _select(p)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="T[:P,...]", help="a topic, or some of its partitions")
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has start offsets for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start")
    to.add_argument("--to-latest", action="store_true", help="the log end")
    to.add_argument("--to-datetime", type=parse_timestamp_ms, metavar="T", help="ISO 8601 or epoch ms")
    to.add_argument("--to-offset", type=non_negative_int, metavar="N", help="offset N (clamped to the log)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="set the new offsets")
    p.set_defaults(handler=reset_offsets)


def _select(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", metavar="G", help="a share group (repeatable)")
    which.add_argument("--all-groups", action="store_true", help="every share group")


def _states(text: str) -> list[str]:
    canonical = {s.lower(): s for s in STATES}
    out = []
    for part in (t.strip() for t in text.split(",") if t.strip()):
        if part.lower() not in canonical:
            raise argparse.ArgumentTypeError(f"invalid state {part!r}; valid states are: {', '.join(STATES)}")
        out.append(canonical[part.lower()])
    return out


def _admin(args: argparse.Namespace, ctx: Context) -> AbstractContextManager[AdminClient]:
    timeout = getattr(args, "timeout", None)
    return ctx.admin({"default.api.timeout.ms": timeout} if timeout else None)


def _error(exc: KafkaError, group: str) -> CliError:
    code = exc.code
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return CliError(f"Share group '{group}' does not exist.")
    if code == ErrorCode.NON_EMPTY_GROUP:
        return CliError(f"share group {group!r} is not empty: it has active members ({code.name})")
    if code.retriable:
        return kafka_error(exc)
    return CliError(f"share group {group!r}: {code.name.lower().replace('_', ' ')} ({code.name})")


def _groups(args: argparse.Namespace, admin: AdminClient) -> list[str]:
    if args.all_groups:
        return [g for g, _ in _run(admin, list_share_groups(admin, []))]
    return list(dict.fromkeys(args.group))


def list_(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.output
    with _admin(args, ctx) as admin:
        try:
            found = _run(admin, list_share_groups(admin, args.state or []))
        except KafkaError as exc:
            raise kafka_error(exc) from None
    if out.is_json:
        out.json([{"groupId": g, "state": s} for g, s in found])
    elif args.state is None:
        out.lines(g for g, _ in found)
    else:
        out.lines(columns(["GROUP", "STATE"], found))
    return 0


def describe(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.output
    rows: list[Sequence[object]] = []
    payload: list[dict[str, Any]] = []
    with _admin(args, ctx) as admin:
        for group in _groups(args, admin):
            try:
                desc = _run(admin, describe_share_group(admin, group))
                offsets = _run(admin, share_group_offsets(admin, group)) if not (args.members or args.state) else []
            except KafkaError as exc:
                raise _error(exc, group) from None
            payload.append(_json(desc, offsets))
            if args.members:
                for m in desc.members:
                    row: list[object] = [group, m.member_id, m.host, m.client_id, len(m.assignment)]
                    row += [m.member_epoch] if args.verbose else []
                    rows.append([*row, _assignment(m.assignment)])
            elif args.state:
                node, host, port = desc.coordinator
                row = [group, f"{host}:{port}  ({node})", desc.state]
                if args.verbose:
                    row += [desc.group_epoch, desc.assignment_epoch]
                rows.append([*row, len(desc.members)])
            else:
                if not desc.members and not out.is_json:
                    print(f"\nShare group '{group}' has no active members.", file=sys.stderr)
                for t, p, e, start in offsets:
                    epoch = [MISSING if e < 0 else e] if args.verbose else []
                    rows.append([group, t, p, *epoch, MISSING if start < 0 else start])
    if out.is_json:
        out.json(payload)
        return 0
    if args.members:
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        header += ["MEMBER-EPOCH"] if args.verbose else []
        header += ["ASSIGNMENT"]
    elif args.state:
        header = ["GROUP", "COORDINATOR (ID)", "STATE"]
        header += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"] if args.verbose else []
        header += ["#MEMBERS"]
    else:
        header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if args.verbose else []), "START-OFFSET"]
    out.lines(columns(header, rows))
    return 0


def _assignment(tps: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items())) or MISSING


def _json(desc: ShareGroupDescription, offsets: Sequence[tuple[str, int, int, int]]) -> dict[str, Any]:
    return {
        "groupId": desc.group_id,
        "state": desc.state,
        "groupEpoch": desc.group_epoch,
        "assignmentEpoch": desc.assignment_epoch,
        "coordinator": desc.coordinator[0],
        "members": [
            {
                "memberId": m.member_id,
                "clientId": m.client_id,
                "host": m.host,
                "memberEpoch": m.member_epoch,
                "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
            }
            for m in desc.members
        ],
        "offsets": [
            {"topic": t, "partition": p, "leaderEpoch": e, "startOffset": None if s < 0 else s}
            for t, p, e, s in offsets
        ],
    }


def delete(args: argparse.Namespace, ctx: Context) -> int:
    deleted = []
    with _admin(args, ctx) as admin:
        for group in _groups(args, admin):
            try:
                _run(admin, delete_share_group(admin, group))
            except KafkaError as exc:
                raise _error(exc, group) from None
            deleted.append(group)
    if ctx.output.is_json:
        ctx.output.json({"deleted": deleted})
    else:
        names = ", ".join(f"'{g}'" for g in deleted)
        ctx.output.line(f"Deletion of requested share groups ({names}) was successful.")
    return 0


def reset_offsets(args: argparse.Namespace, ctx: Context) -> int:
    rows: list[tuple[str, str, int, int]] = []
    with _admin(args, ctx) as admin:
        for group in _groups(args, admin):
            try:
                wanted = _reset_scope(args, admin, group)
                if not wanted:
                    raise CliError(f"share group {group!r}: no partitions to reset")
                spec = EARLIEST if args.to_earliest else LATEST if args.to_latest else args.to_datetime
                new: dict[TopicPartition, int] = {}
                if args.to_offset is not None:
                    low = admin.list_offsets(dict.fromkeys(wanted, EARLIEST))
                    high = admin.list_offsets(dict.fromkeys(wanted, LATEST))
                    for tp in wanted:
                        lo, hi = low.get(tp), high.get(tp)
                        offset = args.to_offset
                        if lo is not None and hi is not None:
                            offset = max(lo.offset, min(offset, hi.offset))
                        new[tp] = offset
                else:
                    found = admin.list_offsets(dict.fromkeys(wanted, spec))
                    ends = admin.list_offsets(dict.fromkeys(wanted, LATEST))
                    for tp in wanted:
                        hit = found.get(tp)
                        end = ends.get(tp)
                        new[tp] = hit.offset if hit is not None and hit.offset >= 0 else (end.offset if end else 0)
                if args.execute:
                    _run(admin, alter_share_group_offsets(admin, group, new))
            except KafkaError as exc:
                raise _error(exc, group) from None
            rows += [(group, tp.topic, tp.partition, offset) for tp, offset in sorted(new.items())]
    if ctx.output.is_json:
        ctx.output.json([{"groupId": g, "topic": t, "partition": p, "newOffset": o} for g, t, p, o in rows])
    else:
        ctx.output.lines(columns(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))
    return 0


def _reset_scope(args: argparse.Namespace, admin: AdminClient, group: str) -> list[TopicPartition]:
    if args.all_topics:
        return [TopicPartition(t, p) for t, p, _, _ in _run(admin, share_group_offsets(admin, group))]
    out: list[TopicPartition] = []
    for text in args.topic:
        topic, parts = parse_topic_partitions(text)
        if parts is None:
            parts = tuple(_partitions_of(admin, topic))
        out += [TopicPartition(topic, p) for p in parts]
    return out


def _partitions_of(admin: AdminClient, topic: str) -> list[int]:
    described = admin.describe_topics([topic])
    info = described.get(topic) if isinstance(described, dict) else None
    if info is None:
        raise CliError(f"topic {topic!r} does not exist")
    return sorted(info.partitions)
